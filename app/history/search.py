"""The history's search index (SQLite FTS5 over every message), kept in
step with the messages by triggers; a history made before it had the index
is indexed once when opened, and so is one whose triggers were dropped.

The index never stops the history from saving. A statement that meets a
damaged index (SQLITE_CORRUPT from a search or from a trigger, though
`PRAGMA integrity_check` says ok: FTS5's blocks are only blobs to SQLite)
has the index rebuilt from the messages and goes once more (`mended`), and
the user is told once; so does one whose error is another, where the index
then fails on its own (a config FTS5 cannot read, a table of it gone). An index that cannot be rebuilt loses its triggers,
so messages are still saved and only search is off; so is search where
`messages_fts` is a table another program made. Each time the history is
opened, an index without its triggers is rebuilt.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from specchat.errors import SpecchatError

TABLE = "CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id')"
TRIGGERS = {
    "messages_fts_insert": """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END""",
    "messages_fts_delete": """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END""",
    "messages_fts_update": """CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END""",
}
REBUILD = "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')"
SHADOWS = ("data", "idx", "docsize", "config")  # FTS5's own tables: messages_fts_data, …
SEARCH_LIMIT = 50  # matches one search returns, best first
REBUILT = "the search index was damaged; rebuilt it from the stored messages"
RETRY_HINT = "every message is still saved; specchat rebuilds the index each time it opens the history"

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Found:
    """A message a search matched: its conversation, and the words around the match («» marks it)."""

    conversation: int
    title: str
    role: str
    snippet: str


class SearchIndex:
    """One history's index. `problem`: why search is off ("" while it works)."""

    def __init__(self, db: sqlite3.Connection, say: Callable[[str], None]) -> None:
        self.db, self.say = db, say
        self.problem = ""
        self.hint = ""

    def open(self) -> None:
        """Check the index when the history opens: made where missing, rebuilt where its triggers are not all there."""
        row = self.db.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'").fetchone()
        if row is not None and _words(row[0]) != _words(TABLE):
            self._unhook()  # our triggers would write into another program's table
            self.problem = "this history's search index (messages_fts) is a table another program made, not specchat's"
            self.hint = (
                "saving goes on; rename that table and specchat makes its own index the next time it opens the history"
            )
            return
        triggers = {name for (name,) in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        if row is not None and TRIGGERS.keys() <= triggers:
            return
        try:
            if row is None:
                with self.db:
                    self.db.execute(TABLE)
            self.rebuild()
        except sqlite3.DatabaseError as err:
            if _busy(err):
                raise
            self._off(err)

    def rebuild(self) -> None:
        """The index made again from the messages, triggers and all. Where FTS5
        cannot even open it (its structure is garbage), its own tables start
        again as a new index's first."""
        try:
            self._rebuild()
        except sqlite3.DatabaseError as err:
            if _busy(err):
                raise
            self._reset()
            self._rebuild()
        self.problem = self.hint = ""

    def mend(self, err: sqlite3.DatabaseError, say_off: bool = True) -> bool:
        """After `err` from a statement that touched the index: whether it was
        the index's damage, now mended (rebuilt, or its triggers dropped so
        that messages are saved without it; `say_off`: say so, where no error
        will)."""
        if self.problem or _code(err) == 0 or _busy(err):
            return False  # without triggers nothing writes to the index: the damage is elsewhere
        if _code(err) != sqlite3.SQLITE_CORRUPT and not self._fails():
            return False  # the index passes FTS5's own check: the trouble is elsewhere (a full disk, say)
        try:
            self.rebuild()
        except sqlite3.DatabaseError as again:
            if _busy(again):
                raise
            self._off(again)
            if say_off:
                self.say(f"{self.problem}; messages are still saved, search is off")
        else:
            self.say(REBUILT)
        return True

    def _fails(self) -> bool:
        """Whether the index fails on its own: FTS5's check of it, or a row
        written to it and rolled back. SQLite reports some damage as another
        error than SQLITE_CORRUPT (a config FTS5 cannot read, one of its
        tables gone, blocks it cannot parse)."""
        try:
            try:
                self.db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
                self.db.execute("INSERT INTO messages_fts(rowid, content) VALUES (-1, 'probe')")
                self.db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")  # written through
            finally:
                self.db.rollback()
        except sqlite3.DatabaseError as err:
            return not _busy(err)
        return False

    def search(self, text: str) -> list[Found]:
        """Messages holding `text` (its words, in order), best match first;
        nothing for text with no words in it. Search off: a SpecchatError."""
        words = " ".join(text.split())
        try:
            return self._search(words)
        except sqlite3.DatabaseError as err:
            if not self.mend(err, say_off=False):  # off: the error says it
                raise
        return self._search(words)

    def _search(self, words: str) -> list[Found]:
        if self.problem:
            raise SpecchatError(self.problem, hint=self.hint)
        if not words:
            return []
        phrase = '"' + words.replace('"', '""') + '"'  # the user's text, never FTS5 syntax
        rows = self.db.execute(
            "SELECT m.conversation_id, c.title, m.role, snippet(messages_fts, 0, '«', '»', '…', 12), m.created, "
            "m.content FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
            "JOIN conversations c ON c.id = m.conversation_id "
            "WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?",
            (phrase, SEARCH_LIMIT),
        ).fetchall()
        # A branch begins with copies of its parent's messages: each is listed
        # once, in the conversation it was first written in (the oldest).
        found: list[Found] = []
        where: dict[tuple, int] = {}
        for conv, title, role, snip, created, content in rows:
            hit = Found(int(conv), str(title), str(role), " ".join(str(snip).split()))
            i = where.setdefault((role, created, content), len(found))
            if i == len(found):
                found.append(hit)
            elif hit.conversation < found[i].conversation:
                found[i] = hit
        return found

    def _rebuild(self) -> None:
        with self.db:  # the rebuild opens the transaction: the triggers come in it too
            self.db.execute(REBUILD)
            for name, sql in TRIGGERS.items():
                self.db.execute(f"DROP TRIGGER IF EXISTS {name}")
                self.db.execute(sql)

    def _reset(self) -> None:
        """FTS5's own tables as a new, empty index has them, made by FTS5 itself in memory."""
        fresh = sqlite3.connect(":memory:")
        try:
            fresh.execute(TABLE)
            made = {t: fresh.execute(f"SELECT * FROM messages_fts_{t}").fetchall() for t in SHADOWS}
            create = dict(fresh.execute("SELECT name, sql FROM sqlite_master WHERE name GLOB 'messages_fts_*'"))
        finally:
            fresh.close()
        with self.db:
            for t, rows in made.items():
                self.db.execute(create[f"messages_fts_{t}"].replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
                self.db.execute(f"DELETE FROM messages_fts_{t}")
                for row in rows:
                    self.db.execute(f"INSERT INTO messages_fts_{t} VALUES ({', '.join('?' * len(row))})", row)

    def _off(self, err: sqlite3.DatabaseError) -> None:
        """Search off: an index that cannot be rebuilt loses its triggers, so saving goes on without it."""
        self._unhook()
        self.problem = f"the search index is damaged and cannot be rebuilt ({err})"
        self.hint = RETRY_HINT

    def _unhook(self) -> None:
        """Drop the triggers that keep the index, where they are specchat's own."""
        stored = dict(self.db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        with self.db:
            for name, sql in TRIGGERS.items():
                if name in stored and _words(stored[name]) == _words(sql):
                    self.db.execute(f"DROP TRIGGER {name}")


class Indexed(Protocol):
    """What `mended` needs of the history: its lock and its index."""

    lock: threading.RLock
    index: SearchIndex


S = TypeVar("S", bound=Indexed)


def mended(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A history write that touches the index (through its triggers), holding
    the history's lock: where it meets a damaged index, the index is mended
    and the write, rolled back, goes once more."""

    @functools.wraps(method)
    def run(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.lock:
            try:
                return method(self, *args, **kwargs)
            except sqlite3.DatabaseError as err:
                if not self.index.mend(err):
                    raise
            return method(self, *args, **kwargs)

    return run


def _code(err: sqlite3.Error) -> int:
    """The primary SQLite result code (SQLITE_CORRUPT_VTAB reads as SQLITE_CORRUPT);
    0 for an error Python raised itself (a closed connection), which has none."""
    return (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF


def _busy(err: sqlite3.Error) -> bool:
    """Another connection holds the lock: the caller waits and tries again; no sign of damage."""
    return _code(err) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _words(sql: str | None) -> str:
    return " ".join(str(sql).split())
