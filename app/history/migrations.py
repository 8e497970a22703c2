"""The history's schema after its first tables, as numbered steps.

`PRAGMA user_version` holds how many of STEPS a history has had; opening
one runs the steps it has not, each in a transaction of its own that also
sets the number, so a history is never left between two steps. A history
made before the steps were numbered reads as 0, and a step that adds
columns adds only those it lacks (such a history may have them already).
A history whose number is past STEPS was written by a newer specchat: it
is not opened (this specchat would not know its columns), and it is left
as it is; so is one whose number is below 0, which specchat never writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

BRANCH_COLUMNS = {
    "parent_id": "INTEGER REFERENCES conversations(id) ON DELETE SET NULL",  # the conversation it branched from
    "fork_seq": "INTEGER",  # how many of the parent's messages it began with
    "system": "TEXT",  # its system prompt; NULL: the settings' default
}


def _add_columns(db: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    for name, kind in columns.items():
        if name not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")


def branches(db: sqlite3.Connection) -> None:
    """Step 1: a conversation's parent, the messages it was forked with, its own system prompt (history/tree.py)."""
    _add_columns(db, "conversations", BRANCH_COLUMNS)


STEPS: tuple[Callable[[sqlite3.Connection], None], ...] = (branches,)


def version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def known(db: sqlite3.Connection) -> int:
    """The steps this history has had; an OperationalError, before anything
    is written to it, for one written by a newer specchat or holding a
    number below 0 (another program's, or a planted one)."""
    done = version(db)
    if done > len(STEPS):
        raise sqlite3.OperationalError(f"written by a newer specchat (schema step {done}; this one knows {len(STEPS)})")
    if done < 0:
        raise sqlite3.OperationalError(f"schema step {done} is not one specchat writes")
    return done


def migrate(db: sqlite3.Connection) -> None:
    """Run the steps this history has not had (`known` has checked its number)."""
    done = known(db)
    for number, step in enumerate(STEPS[done:], done + 1):
        with db:
            step(db)
            db.execute(f"PRAGMA user_version = {number}")  # a pragma takes no parameter; number is an int
