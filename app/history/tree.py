"""The history's tree: branches, and each conversation's own system prompt.

A branch is a conversation of its own that began as a copy of another's
first messages (`fork`): it keeps its parent's id and the number of
messages it copied, so the old branch stays as it was and the new one goes
its own way. A conversation and every branch made from it, and from those,
are a family (`family`), which the chat steps through; F3 shows each branch
under the conversation it came from (`tree_order`). Deleting a conversation
leaves its branches as conversations of their own.

`Tree` works on the history's connection, under its lock: `History.tree`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from specchat.history.search import SearchIndex, mended

if TYPE_CHECKING:
    from specchat.history.rows import Conversation


class Tree:
    """The history's branches, on its connection, under its lock (History.tree)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, index: SearchIndex) -> None:
        self.db, self.lock, self.index = db, lock, index  # `mended` takes the lock and mends the index

    @mended
    def fork(self, conv_id: int, upto: int) -> int:
        """A new branch of conv_id holding copies of its first `upto`
        messages (and its system prompt); the branch's id."""
        with self.db:
            row = self.db.execute("SELECT title, pair, system FROM conversations WHERE id = ?", (conv_id,)).fetchone()
            if row is None:
                raise KeyError(conv_id)
            title, pair, system = row
            now = time.time()
            cur = self.db.execute(
                "INSERT INTO conversations (title, pair, created, updated, parent_id, fork_seq, system) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (title, pair, now, now, conv_id, upto, system),
            )
            branch = cur.lastrowid
            assert branch is not None  # an INSERT sets it
            self.db.execute(
                "INSERT INTO messages (conversation_id, seq, role, content, created, finish, stats_json, spans_json) "
                "SELECT ?, seq, role, content, created, finish, stats_json, spans_json FROM messages "
                "WHERE conversation_id = ? ORDER BY seq LIMIT ?",
                (branch, conv_id, upto),
            )
        return branch

    def family(self, conv_id: int) -> list[int]:
        """The conversation's family: the first conversation it branched from
        (directly or not) and every branch of it, oldest first."""
        with self.lock:
            root = conv_id
            seen = {root}
            while (row := self.db.execute("SELECT parent_id FROM conversations WHERE id = ?", (root,)).fetchone()) and (
                row[0] is not None and row[0] not in seen
            ):
                root = row[0]
                seen.add(root)
            rows = self.db.execute(
                "WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT c.id FROM conversations c JOIN tree t "
                "ON c.parent_id = t.id) SELECT c.id FROM conversations c JOIN tree USING (id) ORDER BY c.created, c.id",
                (root,),
            ).fetchall()
        return [r[0] for r in rows]

    def set_system(self, conv_id: int, system: str | None) -> None:
        """The conversation's own system prompt (None: the settings' default)."""
        with self.lock, self.db:
            self.db.execute("UPDATE conversations SET system = ? WHERE id = ?", (system, conv_id))


def tree_order(convs: Sequence[Conversation]) -> list[tuple[Conversation, int]]:
    """(conversation, depth): each branch right under the conversation it
    came from, the rest in the order given (F3: most recent first). Walked
    without recursion, so a chain of any length is listed; conversations whose
    parents go round in a loop (a damaged file) are each listed once: the
    loop is cut at one of them, listed as a root, and the rest hang under it."""
    by_id = {c.id: c for c in convs}
    children: dict[int, list[Conversation]] = {}
    for c in convs:
        if c.parent is not None and c.parent in by_id:
            children.setdefault(c.parent, []).append(c)
    out: list[tuple[Conversation, int]] = []
    listed: set[int] = set()

    def add(root: Conversation) -> None:
        todo = [(root, 0)]
        while todo:
            c, depth = todo.pop()
            if c.id in listed:
                continue
            listed.add(c.id)
            out.append((c, depth))
            below = sorted(children.get(c.id, []), key=lambda x: x.id)
            todo += [(child, depth + 1) for child in reversed(below)]  # the oldest branch comes off first

    for c in convs:
        if c.parent is None or c.parent not in by_id:
            add(c)
    for c in convs:  # what is left hangs from a loop of parents
        if c.id not in listed:
            add(_in_loop(c, by_id))
    return out


def _in_loop(c: Conversation, by_id: dict[int, Conversation]) -> Conversation:
    """A conversation of the loop that c's parents lead into: where the walk up comes round."""
    seen: set[int] = set()
    while c.id not in seen and c.parent in by_id:
        seen.add(c.id)
        c = by_id[c.parent]
    return c
