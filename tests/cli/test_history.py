"""History: messages with stats and spans round-trip; list, rename, delete;
Markdown export; a crash mid-write loses at most the reply being written."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

from specchat.history.database import History, Message

SPANS = [{"text": " def", "kind": "accepted", "drafter": "ngram"},
         {"text": " x", "kind": "rejected", "drafter": "ngram"},
         {"text": " f", "kind": "target", "drafter": "target"}]
STATS = {"alpha": 3.25, "acceptance_rate": 0.75, "tok_s": 41.5, "baseline_tok_s": 30.0, "speedup": 1.3833,
         "drafters": ["ngram", "draft"], "drafted": 8, "accepted": 6}


def test_round_trip_with_stats_and_spans(tmp_path):
    h = History(tmp_path / "h.sqlite3")
    cid = h.new_conversation("first", "pair-a")
    h.add_message(cid, Message("user", "write f"))
    h.add_message(cid, Message("assistant", " def f", "eos", STATS, SPANS))
    h.close()
    conv = History(tmp_path / "h.sqlite3").load(cid)
    assert (conv.title, conv.pair, conv.n_messages) == ("first", "pair-a", 2)
    assert conv.messages[0] == Message("user", "write f")
    assert conv.messages[1] == Message("assistant", " def f", "eos", STATS, SPANS)


def test_list_rename_delete(tmp_path):
    h = History(tmp_path / "h.sqlite3")
    a = h.new_conversation("a")
    b = h.new_conversation("b")
    h.add_message(a, Message("user", "newer"))  # touching a makes it the most recent
    assert [(c.id, c.title, c.n_messages) for c in h.list()] == [(a, "a", 1), (b, "b", 0)]
    h.rename(b, "renamed")
    assert h.load(b).title == "renamed"
    h.delete(a)
    assert [c.id for c in h.list()] == [b]
    assert h.db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0  # cascade


def test_drop_last(tmp_path):
    h = History(tmp_path / "h.sqlite3")
    cid = h.new_conversation()
    for role, text in [("user", "1"), ("assistant", "r1"), ("user", "2"), ("assistant", "r2")]:
        h.add_message(cid, Message(role, text))
    h.drop_last(cid, "assistant")
    assert [m.content for m in h.load(cid).messages] == ["1", "r1", "2"]
    h.drop_last(cid, "user")
    assert [m.content for m in h.load(cid).messages] == ["1", "r1"]
    h.add_message(cid, Message("user", "3"))
    assert [m.content for m in h.load(cid).messages] == ["1", "r1", "3"]


def test_export_markdown_has_a_stats_table(tmp_path):
    h = History(tmp_path / "h.sqlite3")
    cid = h.new_conversation("Code", "pair-a")
    h.add_message(cid, Message("user", "write f"))
    h.add_message(cid, Message("assistant", "def f(): pass", "cancelled", STATS, SPANS))
    md = h.export_markdown(cid)
    assert md.startswith("# Code\n\nPair: `pair-a`\n\n## You\n\nwrite f\n\n## Assistant (cancelled)\n\ndef f(): pass\n")
    assert "| reply | drafters | α | accepted | tok/s | baseline tok/s | speedup |" in md
    assert "| 1 | ngram→draft | 3.25 | 75% | 41.5 | 30.0 | 1.38× |" in md


def test_killed_mid_write_keeps_the_file_and_earlier_messages(tmp_path):
    """A process killed inside a transaction (mid-reply write): the file is
    intact, earlier messages are there, the half-written reply is not."""
    db = tmp_path / "h.sqlite3"
    script = textwrap.dedent(f"""
        import os
        from specchat.history.database import History, Message
        h = History(__import__("pathlib").Path({str(db)!r}))
        cid = h.new_conversation("c")
        h.add_message(cid, Message("user", "kept"))
        h.db.execute("BEGIN")
        h.db.execute("INSERT INTO messages (conversation_id, seq, role, content, created) VALUES (?, 1, 'assistant', 'lost', 0)", (cid,))
        os._exit(1)  # like a crash or a kill mid-reply
    """)
    assert subprocess.run([sys.executable, "-c", script]).returncode == 1
    h = History(db)
    assert h.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    (conv,) = h.list()
    assert [m.content for m in h.load(conv.id).messages] == ["kept"]


def test_a_failing_write_rolls_back(tmp_path):
    h = History(tmp_path / "h.sqlite3")
    cid = h.new_conversation()
    h.add_message(cid, Message("user", "one"))
    try:
        h.add_message(cid, Message("assistant", "x", stats={"bad": object()}))  # not JSON
    except TypeError:
        pass
    assert [m.content for m in h.load(cid).messages] == ["one"]
    assert isinstance(h.db, sqlite3.Connection)



def test_a_title_passes_over_a_code_fence(tmp_path):
    h = History(tmp_path / "h.sqlite3")
    conv = h.record("p", "```python\ndef f():\n    return 1\n```", Message("assistant", "ok"))
    assert h.load(conv).title == "def f():"
    h.close()
