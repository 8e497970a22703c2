"""Conversation history: SQLite in the data dir (`paths.history_db()`).

A conversation is a list of messages. Each assistant message also keeps its
turn's stats (TurnStats as JSON, plus which drafters ran) and its token
spans (`specchat.stats.spans`), so a reopened conversation shows the same
colours and numbers.

Every write is one transaction, and the user's message is stored when it is
sent, the reply when it ends: a crash or Ctrl-C mid-reply loses at most that
reply. The database runs in WAL mode, so a killed process never leaves a
half-written file.

A history that cannot be used never stops the chat (`open_history`): a file
that is not a history database is renamed aside and a fresh one started; a
folder that cannot be written means chatting without saving. Either way the
app says so once.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from specchat import paths
from specchat.stats import number
from specchat.textsafe import safe_text

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id      INTEGER PRIMARY KEY,
    title   TEXT NOT NULL,
    pair    TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL,           -- user | assistant
    content         TEXT NOT NULL,
    created         REAL NOT NULL,
    finish          TEXT,                    -- assistant: eos | length | cancelled | context
    stats_json      TEXT,                    -- assistant: TurnStats + drafters
    spans_json      TEXT,                    -- assistant: [{text, kind, drafter}]
    UNIQUE (conversation_id, seq)
);
"""


@dataclass
class Message:
    role: str
    content: str
    finish: str | None = None
    stats: dict | None = None
    spans: list[dict] | None = None


@dataclass
class Conversation:
    id: int
    title: str
    pair: str = ""
    updated: float = 0.0
    n_messages: int = 0
    messages: list[Message] = field(default_factory=list)


class History:
    """The history database. One connection, usable from one thread at a time."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.history_db()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, check_same_thread=False)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            with self.db:
                self.db.executescript(SCHEMA)
            self._check_tables()
        except sqlite3.Error:
            self.db.close()
            raise

    def _check_tables(self) -> None:
        """A database with other tables of these names is not ours: fail here, not mid-chat."""
        try:
            self.db.execute("SELECT id, title, pair, created, updated FROM conversations LIMIT 1").fetchall()
            self.db.execute("SELECT conversation_id, seq, role, content, created, finish, stats_json, spans_json "
                            "FROM messages LIMIT 1").fetchall()
        except sqlite3.OperationalError as err:
            raise sqlite3.DatabaseError(f"not a specchat history: {err}") from None

    def close(self) -> None:
        self.db.close()

    # --- conversations --------------------------------------------------------

    def new_conversation(self, title: str = "New chat", pair: str = "") -> int:
        now = time.time()
        with self.db:
            cur = self.db.execute(
                "INSERT INTO conversations (title, pair, created, updated) VALUES (?, ?, ?, ?)",
                (title, pair, now, now),
            )
        return int(cur.lastrowid)

    def list(self) -> list[Conversation]:
        """Every conversation, most recently updated first (messages not loaded)."""
        rows = self.db.execute(
            "SELECT c.id, c.title, c.pair, c.updated, COUNT(m.id) FROM conversations c "
            "LEFT JOIN messages m ON m.conversation_id = c.id GROUP BY c.id ORDER BY c.updated DESC, c.id DESC"
        ).fetchall()
        return [Conversation(id, str(title), str(pair), float(updated or 0), n) for id, title, pair, updated, n in rows]

    def load(self, conv_id: int) -> Conversation:
        row = self.db.execute("SELECT id, title, pair, updated FROM conversations WHERE id = ?", (conv_id,)).fetchone()
        if row is None:
            raise KeyError(conv_id)
        conv = Conversation(*row)
        for role, content, finish, stats, spans in self.db.execute(
            "SELECT role, content, finish, stats_json, spans_json FROM messages "
            "WHERE conversation_id = ? ORDER BY seq",
            (conv_id,),
        ):
            conv.messages.append(Message(role, content, finish, _json(stats), _json(spans)))
        conv.n_messages = len(conv.messages)
        return conv

    def rename(self, conv_id: int, title: str) -> None:
        with self.db:
            self.db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conv_id))

    def delete(self, conv_id: int) -> None:
        with self.db:
            self.db.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))

    # --- messages ------------------------------------------------------------------

    def add_message(self, conv_id: int, msg: Message) -> None:
        """Append one message, in one transaction."""
        now = time.time()
        with self.db:
            (seq,) = self.db.execute(
                "SELECT COALESCE(MAX(seq), -1) + 1 FROM messages WHERE conversation_id = ?", (conv_id,)
            ).fetchone()
            self.db.execute(
                "INSERT INTO messages (conversation_id, seq, role, content, created, finish, stats_json, spans_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (conv_id, seq, msg.role, msg.content, now, msg.finish, _dump(msg.stats), _dump(msg.spans)),
            )
            self.db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conv_id))

    def drop_last(self, conv_id: int, role: str) -> None:
        """Delete trailing messages up to and including the last one with this role
        (regenerate drops the last reply; edit drops the last user message and its reply)."""
        with self.db:
            row = self.db.execute(
                "SELECT MAX(seq) FROM messages WHERE conversation_id = ? AND role = ?", (conv_id, role)
            ).fetchone()
            if row[0] is not None:
                self.db.execute("DELETE FROM messages WHERE conversation_id = ? AND seq >= ?", (conv_id, row[0]))

    # --- export -----------------------------------------------------------------------

    def export_markdown(self, conv_id: int) -> str:
        return to_markdown(self.load(conv_id))


def to_markdown(conv: Conversation) -> str:
    """The conversation as Markdown, ending with a table of each reply's numbers.
    Control characters are made visible: an export is read in a terminal too."""
    out = [f"# {conv.title}", ""]
    if conv.pair:
        out += [f"Pair: `{conv.pair}`", ""]
    rows = []
    for msg in conv.messages:
        who = "You" if msg.role == "user" else "Assistant"
        note = " (cancelled)" if msg.finish == "cancelled" else ""
        out += [f"## {who}{note}", "", msg.content.strip(), ""]
        if msg.role == "assistant" and msg.stats:
            rows.append(_stats_row(len(rows) + 1, msg.stats))
    if rows:
        out += ["## Stats", "",
                "| reply | drafters | α | accepted | tok/s | baseline tok/s | speedup |",
                "|---:|---|---:|---:|---:|---:|---:|", *rows, ""]
    return safe_text("\n".join(out))


def _stats_row(n: int, s: dict) -> str:
    drafters = "→".join(map(str, s.get("drafters") or [])) or "–"
    return (f"| {n} | {drafters} | {number(s.get('alpha'))} | {number(s.get('acceptance_rate', 0) * 100, '.0f', '%')} "
            f"| {number(s.get('tok_s'), '.1f')} | {number(s.get('baseline_tok_s'), '.1f')} "
            f"| {number(s.get('speedup'), '.2f', '×')} |")


def _dump(value) -> str | None:
    return None if value is None else json.dumps(value)


def _json(text: str | None):
    """Stored stats or spans; a damaged row shows as a reply without them."""
    try:
        return None if text is None else json.loads(text)
    except (TypeError, ValueError):
        return None


def open_history(path: Path | None = None) -> tuple[History | None, str]:
    """The history, and a note for the user when it is not the usual one:
    (a fresh History, why) after a damaged file was renamed aside, or
    (None, why) when nothing can be saved."""
    path = path or paths.history_db()
    try:
        return History(path), ""
    except OSError as err:  # the data folder cannot be made
        return None, f"cannot open the history at {path} ({err}); chatting without saving"
    except sqlite3.DatabaseError as err:
        if isinstance(err, sqlite3.OperationalError) or not path.is_file():
            return None, f"cannot open the history at {path} ({err}); chatting without saving"
        reason = err
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        os.replace(path, aside)
        for suffix in ("-wal", "-shm"):
            extra = path.with_name(path.name + suffix)
            if extra.exists():
                os.replace(extra, aside.with_name(aside.name + suffix))
        return History(path), f"{path} is not a readable history ({reason}); kept it as {aside.name} and started a fresh one"
    except (OSError, sqlite3.Error) as err:
        return None, f"{path} is not a readable history ({reason}) and cannot be moved aside ({err}); chatting without saving"
