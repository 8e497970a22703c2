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

A cache that cannot be opened or written costs only the tokenizing. The
file is read as untrusted (kept.py): where it, or SQLite's -wal or -shm
beside it, is no regular file under TOKENS_MAX_BYTES, it is said once and
replaced by a new cache; an entry naming a token outside the model's
vocabulary (which llama.cpp would refuse to decode) is dropped, said once,
and tokenized again.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from array import array
from collections.abc import Callable

from specchat import kept, paths

SCHEMA = "CREATE TABLE IF NOT EXISTS tokens (key TEXT PRIMARY KEY, tokens BLOB NOT NULL, used REAL NOT NULL)"
KEEP_SECONDS = 30 * 24 * 3600  # an entry no fill has used for a month is dropped (its reply left the history)
FILE = "memory-tokens.sqlite3"  # in the data folder
# A bigger one is no cache of specchat's: the memory holds 2M tokens (8 MB) a
# model and system prompt, and entries unused for KEEP_SECONDS are dropped.
TOKENS_MAX_BYTES = 512 << 20


class TokenCache:
    """The kept tokens of one model's stored replies."""

    def __init__(self, model_key: str, system: str | None, n_vocab: int) -> None:
        self.prefix = f"{model_key}\n{system or ''}\n"
        self.n_vocab = n_vocab  # token ids run from 0 below it
        self.path = paths.data_dir() / FILE
        self.db = self._open()
        self.hits = self.misses = self.dropped = 0

    def _open(self) -> sqlite3.Connection | None:
        """The cache, made anew where what the data folder holds is no cache (said once)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            for name in (FILE, f"{FILE}-wal", f"{FILE}-shm"):
                if not kept.usable(self.path.with_name(name), TOKENS_MAX_BYTES):
                    self.path.with_name(name).unlink()  # a link goes, not what it leads to; a folder stays: no cache
            for last in (False, True):
                db = sqlite3.connect(self.path, timeout=0.5, check_same_thread=False)
                try:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute(SCHEMA)
                    return db
                except sqlite3.DatabaseError as err:
                    db.close()
                    if last or isinstance(err, sqlite3.OperationalError):  # locked, or the folder is read-only
                        return None
                    kept.damaged(self.path, "is not an SQLite database")
                    self.path.unlink()
        except (OSError, sqlite3.Error):
            pass
        return None

    def tokens(self, question: str, reply: str, make: Callable[[str, str], list[int]]) -> list[int]:
        """The reply's tokens: kept ones, or make(question, reply) once and keep them."""
        key = hashlib.sha256(f"{self.prefix}{len(question)}\n{question}{reply}".encode("utf-8", "surrogatepass"))
        digest, now = key.hexdigest(), time.time()
        if self.db is not None:
            try:
                row = self.db.execute("SELECT tokens FROM tokens WHERE key = ?", (digest,)).fetchone()
                if row is not None and isinstance(row[0], bytes) and len(row[0]) % 4 == 0:
                    ids = array("i", row[0])
                    if ids and (min(ids) < 0 or max(ids) >= self.n_vocab):
                        self.dropped += 1  # made again below, replacing it
                    else:
                        self.db.execute("UPDATE tokens SET used = ? WHERE key = ?", (now, digest))
                        self.hits += 1
                        return ids.tolist()
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
        if self.dropped:
            kept.warn(
                f"{self.path}: dropped {self.dropped} kept token list(s) naming tokens outside the model's "
                f"vocabulary of {self.n_vocab}; they were tokenized again"
            )
        if self.db is None:
            return
        try:
            with self.db:
                self.db.execute("DELETE FROM tokens WHERE used < ?", (time.time() - KEEP_SECONDS,))
        except sqlite3.Error:
            pass
        self.db.close()
        self.db = None
