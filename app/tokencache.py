"""Stored replies as a model reads them, kept between runs.

The memory drafter holds every stored reply as tokens: the tail of the
prompt that asked for it, then the reply. Tokenizing a large history again
at every `specchat run` and every chat start cost seconds (a chat template
rendered and a tokenizer run per reply), so each reply's tokens are kept in
the data folder (`memory-tokens.sqlite3`), keyed by what they depend on:
the model file (its `cost_key`, which names the file, its size and mtime),
the system prompt, the question and the reply. Only replies not seen before
are tokenized; entries no fill asked for in a while are dropped, so the
file holds what the history holds.

A cache that cannot be opened or written costs only the tokenizing.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from array import array
from collections.abc import Callable

from specchat import paths

SCHEMA = "CREATE TABLE IF NOT EXISTS tokens (key TEXT PRIMARY KEY, tokens BLOB NOT NULL, used REAL NOT NULL)"
KEEP_SECONDS = 30 * 24 * 3600  # an entry no fill has used for a month is dropped (its reply left the history)


class TokenCache:
    """The kept tokens of one model's stored replies."""

    def __init__(self, model_key: str, system: str | None) -> None:
        self.prefix = f"{model_key}\n{system or ''}\n"
        self.db: sqlite3.Connection | None
        try:
            path = paths.data_dir() / "memory-tokens.sqlite3"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, timeout=0.5, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(SCHEMA)
        except (OSError, sqlite3.Error):
            self.db = None
        self.hits = self.misses = 0

    def tokens(self, question: str, reply: str, make: Callable[[str, str], list[int]]) -> list[int]:
        """The reply's tokens: kept ones, or make(question, reply) once and keep them."""
        key = hashlib.sha256(f"{self.prefix}{len(question)}\n{question}{reply}".encode("utf-8", "surrogatepass"))
        digest, now = key.hexdigest(), time.time()
        if self.db is not None:
            try:
                row = self.db.execute("SELECT tokens FROM tokens WHERE key = ?", (digest,)).fetchone()
                if row is not None and isinstance(row[0], bytes) and len(row[0]) % 4 == 0:
                    self.db.execute("UPDATE tokens SET used = ? WHERE key = ?", (now, digest))
                    self.hits += 1
                    return array("i", row[0]).tolist()
            except sqlite3.Error:
                pass
        self.misses += 1
        made = make(question, reply)
        if self.db is not None:
            try:
                self.db.execute(
                    "INSERT OR REPLACE INTO tokens VALUES (?, ?, ?)", (digest, array("i", made).tobytes(), now)
                )
            except (sqlite3.Error, OverflowError):
                pass
        return made

    def close(self) -> None:
        """Keep what was added and drop what no fill has used for a long time."""
        if self.db is None:
            return
        try:
            with self.db:
                self.db.execute("DELETE FROM tokens WHERE used < ?", (time.time() - KEEP_SECONDS,))
        except sqlite3.Error:
            pass
        self.db.close()
        self.db = None
