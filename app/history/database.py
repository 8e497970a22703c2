"""Conversation history: SQLite in the data dir (`paths.history_db()`).

A conversation is a list of messages. Each assistant message also keeps its
turn's stats (TurnStats as JSON, plus which drafters ran) and its token
spans (`specchat.display.spans`), so a reopened conversation shows the same
colours and numbers.

Every write is one transaction, and the user's message is stored when it is
sent, the reply when it ends: a crash or Ctrl-C mid-reply loses at most that
reply. The database runs in WAL mode, so a killed process never leaves a
half-written file. A statement waits at most BUSY_SECONDS for another
process's lock; the chat writes on a thread of its own and tries again
(tui/state/conversation.py), so a locked file never freezes it.

A history that cannot be used never stops the chat (`open_history`): a file
that is not a history database is renamed aside and a fresh one started; a
folder that cannot be written means chatting without saving. Either way the
app says so once. A damaged search index never stops saving either
(search.py): it is rebuilt, and what it tells the user goes to
`on_note`, once.

Every row is checked where it is read (`History.list`, `History.load`, by rows.py), so
no reader meets a value specchat would not have written: a message row that
is not one (an unknown role, a span whose text is a number, stats that are
a list, NaN or absurd counts) comes back as a Message with `problem` set,
which the chat and the export show as a one-line marker in its place. The
row itself is left as it is.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from specchat import paths
from specchat.display import NOT_MEASURED, measured_acceptance, measured_alpha, number
from specchat.history.migrations import known, migrate
from specchat.history.rows import Conversation, Message, read_conversation, read_message
from specchat.history.search import Found, SearchIndex, mended
from specchat.history.tree import Tree
from specchat.message.attach import first_line
from specchat.textsafe import safe_text, storable

BUSY_SECONDS = 0.5  # how long one statement waits for another process's lock before it fails
P = ParamSpec("P")
R = TypeVar("R")

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


Replies = list[tuple[int, str, str]]  # (conversation id, the user's message, the reply)


def _locked(method: Callable[Concatenate[History, P], R]) -> Callable[Concatenate[History, P], R]:
    """One operation at a time on the connection: the chat writes on its own thread and reads on the UI's."""

    @functools.wraps(method)
    def run(self: History, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.lock:
            return method(self, *args, **kwargs)

    return run


class History:
    """The history database. One connection; each operation holds `lock`, so any thread may call it."""

    def __init__(self, path: Path | None = None, busy: float = BUSY_SECONDS) -> None:
        self.path = path or paths.history_db()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.db = sqlite3.connect(self.path, check_same_thread=False, timeout=busy)
        self.on_delete: list[Callable[[int], None]] = []  # told each deleted conversation's id (the memory)
        self.on_note: list[Callable[[str], None]] = []  # told what the user should know (the index was rebuilt)
        self._said: set[str] = set()
        self.index = SearchIndex(self.db, self._say)
        self.tree = Tree(self.db, self.lock, self.index)  # branches: fork, family, set_system
        self.db.text_factory = lambda raw: raw.decode("utf-8", "replace")  # a stray byte is not a crash
        try:
            known(self.db)  # a newer specchat's history is left as it is: not even put in WAL mode
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            with self.db:
                self.db.executescript(SCHEMA)
            self._check_tables()
            migrate(self.db)
            self.index.open()
        except sqlite3.Error:
            self.db.close()
            raise

    def _check_tables(self) -> None:
        """A database with other tables of these names is not ours: fail here, not mid-chat."""
        try:
            self.db.execute("SELECT id, title, pair, created, updated FROM conversations LIMIT 1").fetchall()
            self.db.execute(
                "SELECT conversation_id, seq, role, content, created, finish, stats_json, spans_json "
                "FROM messages LIMIT 1"
            ).fetchall()
        except sqlite3.OperationalError as err:
            raise sqlite3.DatabaseError(f"not a specchat history: {err}") from None

    def _say(self, note: str) -> None:
        """Tell the listeners a note, once per history."""
        if note not in self._said:
            self._said.add(note)
            for tell in self.on_note:
                tell(note)

    @_locked
    def search(self, text: str) -> list[Found]:
        """Messages holding `text` (its words, in order), best match first;
        a SpecchatError where search is off (search.py)."""
        return self.index.search(text)

    @_locked
    def close(self) -> None:
        self.db.close()

    # --- conversations --------------------------------------------------------

    @_locked
    def new_conversation(self, title: str = "New chat", pair: str = "", system: str | None = None) -> int:
        now = time.time()
        with self.db:
            cur = self.db.execute(
                "INSERT INTO conversations (title, pair, created, updated, system) VALUES (?, ?, ?, ?, ?)",
                (storable(title), storable(pair), now, now, None if system is None else storable(system)),
            )
        assert cur.lastrowid is not None  # an INSERT sets it
        return cur.lastrowid

    @_locked
    def list(self) -> list[Conversation]:
        """Every conversation, most recently updated first (messages not loaded)."""
        rows = self.db.execute(
            "SELECT c.id, c.title, c.pair, c.updated, COUNT(m.id), c.parent_id, c.system FROM conversations c "
            "LEFT JOIN messages m ON m.conversation_id = c.id GROUP BY c.id ORDER BY c.updated DESC, c.id DESC"
        ).fetchall()
        return [read_conversation(*row) for row in rows]

    @_locked
    def load(self, conv_id: int) -> Conversation:
        """A stored conversation with its messages; KeyError where no
        conversation has that id (one past SQLite's 64-bit ids included)."""
        if not -(2**63) <= conv_id < 2**63:
            raise KeyError(conv_id)
        row = self.db.execute(
            "SELECT id, title, pair, updated, 0, parent_id, system FROM conversations WHERE id = ?", (conv_id,)
        ).fetchone()
        if row is None:
            raise KeyError(conv_id)
        conv = read_conversation(*row)
        for stored in self.db.execute(
            "SELECT role, content, finish, stats_json, spans_json FROM messages WHERE conversation_id = ? ORDER BY seq",
            (conv_id,),
        ):
            conv.messages.append(read_message(*stored))
        conv.n_messages = len(conv.messages)
        return conv

    @_locked
    def rename(self, conv_id: int, title: str) -> None:
        with self.db:
            self.db.execute("UPDATE conversations SET title = ? WHERE id = ?", (storable(title), conv_id))

    def delete(self, conv_id: int) -> None:
        self._delete_row(conv_id)
        for forget in self.on_delete:  # outside the lock: the memory takes its own
            forget(conv_id)

    @mended
    def _delete_row(self, conv_id: int) -> None:
        with self.db:
            self.db.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))

    @_locked
    def replies(self) -> Replies:
        """(conversation id, the user's message, the reply) of every stored
        reply, least recently updated conversation first: what the memory
        (drafters/memory.py) is filled from. Unreadable rows are left out."""
        rows = self.db.execute(
            "SELECT m.conversation_id, m.role, m.content FROM messages m "
            "JOIN conversations c ON c.id = m.conversation_id ORDER BY c.updated, c.id, m.seq"
        ).fetchall()
        out: Replies = []
        asked = None
        for conv_id, role, content in rows:
            if not isinstance(content, str):
                asked = None
            elif role == "user":
                asked = (conv_id, content)
            elif role == "assistant" and asked is not None and asked[0] == conv_id:
                out.append((conv_id, asked[1], content))
        return out

    @_locked
    def record(self, pair: str, user_text: str, reply: Message) -> int:
        """One exchange as a new conversation (what `specchat run` keeps); its id."""
        conv_id = self.new_conversation(title_for(user_text), pair)
        self.add_message(conv_id, Message("user", user_text))
        self.add_message(conv_id, reply)
        return conv_id

    # --- messages ------------------------------------------------------------------

    @mended
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
                (conv_id, seq, msg.role, storable(msg.content), now, msg.finish, _dump(msg.stats), _dump(msg.spans)),
            )
            self.db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conv_id))
            # A branch's first message of its own (one edited, or a reply had again) names it,
            # unless the user renamed it: a list of branches all titled as their root tells nothing.
            self.db.execute(
                "UPDATE conversations SET title = ? WHERE id = ? AND fork_seq = ? AND title = "
                "(SELECT p.title FROM conversations p WHERE p.id = conversations.parent_id)",
                (storable(title_for(msg.content)), conv_id, seq),
            )

    @mended
    def drop_last(self, conv_id: int, role: str) -> None:
        """Delete trailing messages up to and including the last one with this role
        (regenerate drops the last reply; edit drops the last user message and its reply)."""
        with self.db:
            row = self.db.execute(
                "SELECT MAX(seq) FROM messages WHERE conversation_id = ? AND role = ?", (conv_id, role)
            ).fetchone()
            if row[0] is not None:
                self.db.execute("DELETE FROM messages WHERE conversation_id = ? AND seq >= ?", (conv_id, row[0]))

    @_locked
    def delete_if_empty(self, conv_id: int) -> bool:
        """Delete a conversation that holds no message (its only turn failed); whether it did."""
        with self.db:
            cur = self.db.execute(
                "DELETE FROM conversations WHERE id = ? AND NOT EXISTS "
                "(SELECT 1 FROM messages WHERE conversation_id = ?)",
                (conv_id, conv_id),
            )
        return cur.rowcount > 0

    # --- export -----------------------------------------------------------------------

    def export_markdown(self, conv_id: int) -> str:
        return to_markdown(self.load(conv_id))


def title_for(text: str) -> str:
    """A conversation's title: the first line of its first message (attach's
    first_line: its attached files as "[+ NAME]", code fences passed over),
    cut at 60 characters."""
    line = first_line(text) or "New chat"
    return line[:60] + ("…" if len(line) > 60 else "")


def to_markdown(conv: Conversation) -> str:
    """The conversation as Markdown, ending with a table of each reply's numbers.
    Control characters are made visible: an export is read in a terminal too."""
    out = [f"# {conv.title}", ""]
    if conv.pair:
        out += [f"Pair: `{conv.pair}`", ""]
    rows: list[str] = []
    for msg in conv.messages:
        if msg.problem:
            out += ["## Unreadable message", "", msg.marker, ""]
            continue
        who = "You" if msg.role == "user" else "Assistant"
        note = " (cancelled)" if msg.finish == "cancelled" else ""
        out += [f"## {who}{note}", "", msg.content.strip(), ""]
        if msg.role == "assistant" and msg.stats:
            rows.append(_stats_row(len(rows) + 1, msg.stats))
    if rows:
        out += [
            "## Stats",
            "",
            "| reply | drafters | α | accepted | tok/s | baseline tok/s | speedup |",
            "|---:|---|---:|---:|---:|---:|---:|",
            *rows,
            "",
        ]
    return safe_text("\n".join(out))


def _stats_row(n: int, s: dict) -> str:
    drafters = "→".join(map(str, s.get("drafters") or [])) or "–"
    accepted = measured_acceptance(s)  # a server that sent no counters measured neither: no "0.00", no "0%"
    return (
        f"| {n} | {drafters} | {number(measured_alpha(s), missing=NOT_MEASURED)} "
        f"| {number(None if accepted is None else accepted * 100, '.0f', '%', NOT_MEASURED)} "
        f"| {number(s.get('tok_s'), '.1f')} | {number(s.get('baseline_tok_s'), '.1f')} "
        f"| {number(s.get('speedup'), '.2f', '×')} |"
    )


def _dump(value) -> str | None:
    return None if value is None else json.dumps(value)


def open_history(path: Path | None = None, busy: float = BUSY_SECONDS) -> tuple[History | None, str]:
    """The history, and a note for the user when it is not the usual one:
    (a fresh History, why) after a damaged file was renamed aside, or
    (None, why) when nothing can be saved. `busy`: how long a statement
    waits for another process's lock (`run` may wait; the chat retries)."""
    path = path or paths.history_db()
    try:
        return History(path, busy), ""
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
        return History(
            path, busy
        ), f"{path} is not a readable history ({reason}); kept it as {aside.name} and started a fresh one"
    except (OSError, sqlite3.Error) as err:
        return (
            None,
            f"{path} is not a readable history ({reason}) and cannot be moved aside ({err}); chatting without saving",
        )
