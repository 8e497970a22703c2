"""The history's numbered schema steps (history/migrations.py): a history
made before the steps were numbered, or before branches, opens with its
conversations as they were and the steps it lacked; one written by a newer
specchat is left exactly as it is, and the chat goes on without saving, in
one line."""

from __future__ import annotations

import sqlite3

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specchat.history.database import SCHEMA, History, Message, open_history
from specchat.history.migrations import STEPS, version

BEFORE_BRANCHES = [("Tell me about cats", "Cats sleep."), ("Rename x", "def f(count):\n    return count")]


def old_history(path, with_branch_columns: bool) -> None:
    """A history as an earlier specchat left it: the first tables, user_version 0."""
    db = sqlite3.connect(path)
    with db:
        db.executescript(SCHEMA)
        if with_branch_columns:  # added by probing for them, before the steps were numbered
            db.execute("ALTER TABLE conversations ADD COLUMN parent_id INTEGER")
            db.execute("ALTER TABLE conversations ADD COLUMN fork_seq INTEGER")
            db.execute("ALTER TABLE conversations ADD COLUMN system TEXT")
        for i, (asked, replied) in enumerate(BEFORE_BRANCHES, 1):
            db.execute("INSERT INTO conversations (id, title, created, updated) VALUES (?, ?, 1, 1)", (i, asked))
            db.execute("INSERT INTO messages (conversation_id, seq, role, content, created) VALUES (?, 0, 'user', ?, 1)",
                       (i, asked))
            db.execute("INSERT INTO messages (conversation_id, seq, role, content, created) "
                       "VALUES (?, 1, 'assistant', ?, 1)", (i, replied))
    db.close()


def test_a_history_from_before_the_steps_opens_with_every_step_and_its_conversations(tmp_path):
    for with_columns in (False, True):
        path = tmp_path / f"history-{with_columns}.sqlite3"
        old_history(path, with_columns)
        history = History(path)
        assert version(history.db) == len(STEPS)
        assert [c.title for c in sorted(history.list(), key=lambda c: c.id)] == [a for a, _ in BEFORE_BRANCHES]
        assert [m.content for m in history.load(2).messages] == list(BEFORE_BRANCHES[1])
        branch = history.tree.fork(1, 1)  # the branch columns are there
        history.tree.set_system(branch, "Be brief.")
        assert history.tree.family(branch) == [1, branch]
        history.close()
        again = History(path)  # opened again: no step runs twice
        assert version(again.db) == len(STEPS) and len(again.list()) == 3
        again.close()


def test_a_history_from_a_newer_specchat_is_left_as_it_is(tmp_path):
    path = tmp_path / "history.sqlite3"
    history = History(path)
    history.record("p", "Keep me", Message("assistant", "Kept."))
    history.db.execute(f"PRAGMA user_version = {len(STEPS) + 1}")
    history.close()
    before = path.read_bytes()
    opened, why = open_history(path)
    assert opened is None
    assert why.startswith(f"cannot open the history at {path}") and "newer specchat" in why
    assert why.endswith("chatting without saving") and "\n" not in why
    assert path.read_bytes() == before  # not renamed aside, not written
    assert not list(tmp_path.glob("*.damaged-*"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(number=st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_any_schema_number_opens_at_every_step_or_is_left_as_it_is(tmp_path_factory, number):
    """Whatever number a planted or foreign file holds, the history opens
    with every step, or it is not opened and its bytes stay as they were."""
    path = tmp_path_factory.mktemp("h") / "history.sqlite3"
    old_history(path, with_branch_columns=number > 0)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {number}")
    db.close()
    before = path.read_bytes()
    opened, why = open_history(path)
    if 0 <= number <= len(STEPS):
        assert opened is not None and version(opened.db) == len(STEPS) and len(opened.list()) == 2
        opened.close()
    else:
        assert opened is None and why.endswith("chatting without saving") and "\n" not in why
        assert path.read_bytes() == before
