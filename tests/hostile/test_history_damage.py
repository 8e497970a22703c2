"""A history that was damaged or bent out of shape never stops saving. A
search index whose blocks are garbage (PRAGMA integrity_check still says
ok) is rebuilt, with one warning, by `history search`, by F3's search and by
any save; one that cannot be rebuilt loses its triggers, so messages are
still saved and search says it is off; a `messages_fts` another program made
is left alone. A chain of branches of any length, and parents that point at
each other, are listed in F3. `run --server` keeps its turn in the history,
and a server that sent no speculation data reads "not measured", never
"α 0.00" or "0%"."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from specchat import paths
from specchat.errors import SpecchatError
from specchat.history.database import History, Message
from specchat.history.search import REBUILT
from specchat.history.tree import tree_order
from specchat.server.session import ServerSession
from specchat.tui.parts.branching import BranchScreen
from specchat.tui.parts.screens import HistoryScreen, TextPrompt, conversation_line
from specchat.tui.state.models import chat_models
from tests.support.fakeserver import good_docs
from tests.support.hostile import err_lines, specchat
from tests.support.tui import make_app, notices, ready, saved, send, wait_until

CANNOT = "the search index is damaged and cannot be rebuilt"


def stored(path: Path) -> tuple[int, int]:
    """Two conversations, in a history that is then closed."""
    history = History(path)
    cats = history.record("p", "Tell me about cats", Message("assistant", "The quick brown cat sleeps all day."))
    code = history.record("p", "Rename x", Message("assistant", "def f(count):\n    return count"))
    history.close()
    return cats, code


def garble(path: Path) -> None:
    """Every block of the FTS5 index overwritten with bytes FTS5 cannot read, as
    another program or a bad disk could leave it; SQLite's own check still passes."""
    db = sqlite3.connect(path)
    with db:
        rows = db.execute("SELECT id, length(block) FROM messages_fts_data").fetchall()
        db.executemany("UPDATE messages_fts_data SET block = ? WHERE id = ?", [(b"\xa5" * n, i) for i, n in rows])
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


def unrebuildable(path: Path) -> None:
    """The index's data table replaced by one FTS5 cannot write to: no rebuild can work."""
    db = sqlite3.connect(path)
    with db:
        db.execute("DROP TABLE messages_fts_data")
        db.execute("CREATE TABLE messages_fts_data (other TEXT)")
    db.close()


def contents(history: History) -> list[str]:
    return [m.content for c in reversed(history.list()) for m in history.load(c.id).messages]


# --- a damaged search index ------------------------------------------------------------------


def test_a_damaged_index_is_rebuilt_by_the_next_save_said_once_and_searched_again(tmp_path):
    path = tmp_path / "h.sqlite3"
    cats, _ = stored(path)
    garble(path)
    history = History(path)
    told: list[str] = []
    history.on_note.append(told.append)
    history.record("p", "zebras?", Message("assistant", "Zebras have stripes."))  # the trigger meets the damage
    history.record("p", "and lions?", Message("assistant", "Lions have manes."))
    assert told == [REBUILT]
    assert [f.conversation for f in history.search("quick brown")] == [cats]  # the old messages, indexed again
    assert [f.snippet for f in history.search("stripes")] == ["Zebras have «stripes»."]
    history.db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")  # FTS5's own check
    assert told == [REBUILT]


DAMAGE = {  # what another program or a bad disk can leave of the index, each reported as another error
    "a config FTS5 cannot read": "UPDATE messages_fts_config SET v = 99 WHERE k = 'version'",
    "its blocks zeroed": "UPDATE messages_fts_data SET block = x'00'",
    "its config table gone": "DROP TABLE messages_fts_config",
    "its sizes table gone": "DROP TABLE messages_fts_docsize",
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_an_index_damaged_past_sqlite_s_corrupt_code_is_rebuilt_too(tmp_path, damage):
    path = tmp_path / "h.sqlite3"
    cats, _ = stored(path)
    db = sqlite3.connect(path)
    with db:
        db.execute(DAMAGE[damage])
    db.close()
    history = History(path)
    told: list[str] = []
    history.on_note.append(told.append)
    history.record("p", "zebras?", Message("assistant", "Zebras have stripes."))
    assert told == [REBUILT]
    assert [f.conversation for f in history.search("quick brown")] == [cats]
    assert [f.snippet for f in history.search("stripes")] == ["Zebras have «stripes»."]


def test_an_error_that_is_not_the_index_s_is_raised_as_it_was_and_rebuilds_nothing(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    told: list[str] = []
    history.on_note.append(told.append)
    with pytest.raises(sqlite3.IntegrityError):
        history.add_message(12345, Message("user", "to a conversation that is not there"))
    assert told == [] and not history.index.problem
    history.record("p", "zebras?", Message("assistant", "Zebras have stripes."))
    assert [f.snippet for f in history.search("stripes")] == ["Zebras have «stripes»."]


def test_text_utf8_cannot_hold_is_saved_with_a_replacement_character(tmp_path):
    """A lone surrogate (a server's JSON may escape one) in a reply, a title or a system prompt."""
    history = History(tmp_path / "h.sqlite3")
    conv = history.record("server \ud800", "hi \udfff", Message("assistant", "Hello \ud800!"))
    assert [m.content for m in history.load(conv).messages] == ["hi \ufffd", "Hello \ufffd!"]
    (listed,) = history.list()
    assert (listed.title, listed.pair) == ("hi \ufffd", "server \ufffd")
    history.new_conversation("t", system="be \ud800 brief")
    history.rename(conv, "renamed \ud800")
    assert sorted(c.title for c in history.list()) == ["renamed \ufffd", "t"]


def test_history_search_rebuilds_a_damaged_index_with_one_note(specchat_home):
    cats, _ = stored(paths.history_db())
    garble(paths.history_db())
    done = specchat("history", "search", "quick brown")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == [f"{cats:>5}  Tell me about cats · assistant: The «quick brown» cat sleeps all day."]  # fmt: skip
    assert err_lines(done) == [f"note: {REBUILT}", "open one: specchat --conversation ID (or F3 in the chat, then s to search there)"]
    again = specchat("history", "search", "quick brown")
    assert err_lines(again) == ["open one: specchat --conversation ID (or F3 in the chat, then s to search there)"]  # mended for good


async def test_f3_searches_a_damaged_index_and_the_chat_goes_on_saving(tmp_path):
    cats, _ = stored(tmp_path / "history.sqlite3")
    garble(tmp_path / "history.sqlite3")
    app = make_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, TextPrompt))
        for key in "sleeps":
            await pilot.press(key)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        options = app.screen.query_one("OptionList")
        await wait_until(pilot, lambda: options.option_count == 1)
        assert "«sleeps»" in str(options.get_option_at_index(0).prompt)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, HistoryScreen))
        reply = await send(pilot, "hello")
        assert app.is_running
        history = app.conversation.history
        assert contents(history)[-2:] == ["hello", reply.text]
        assert [f.conversation for f in history.search("hello")] == [app.conversation.id]
        assert notices(app).count(REBUILT) == 1


async def test_the_chat_saves_on_a_damaged_index_with_one_warning(tmp_path):
    stored(tmp_path / "history.sqlite3")
    garble(tmp_path / "history.sqlite3")
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        first = await send(pilot, "hello")
        second = await send(pilot, "again")
        await wait_until(pilot, lambda: REBUILT in notices(app))
        assert contents(app.conversation.history)[-4:] == ["hello", first.text, "again", second.text]
        assert notices(app).count(REBUILT) == 1 and not [n for n in notices(app) if "cannot save" in n]


def test_an_index_that_cannot_be_rebuilt_costs_search_only(tmp_path):
    path = tmp_path / "h.sqlite3"
    stored(path)
    garble(path)
    unrebuildable(path)
    history = History(path)
    told: list[str] = []
    history.on_note.append(told.append)
    history.record("p", "zebras?", Message("assistant", "Zebras have stripes."))
    history.record("p", "lions?", Message("assistant", "Lions have manes."))
    assert contents(history)[-4:] == ["zebras?", "Zebras have stripes.", "lions?", "Lions have manes."]
    assert len(told) == 1 and told[0].startswith(CANNOT) and told[0].endswith("messages are still saved, search is off")
    with pytest.raises(SpecchatError) as err:
        history.search("stripes")
    assert str(err.value).startswith(CANNOT) and "rebuilds the index each time it opens" in err.value.hint
    conv = history.record("p", "x", Message("assistant", "y"))
    history.delete(conv)  # deleting too goes on without the index
    history.close()
    reopened = History(path)  # tries again, quietly: the search says why it is off
    reopened.record("p", "tigers?", Message("assistant", "Tigers have stripes too."))
    assert contents(reopened)[-1] == "Tigers have stripes too."
    reopened.close()


def test_history_search_on_an_index_that_cannot_be_rebuilt_is_one_line(specchat_home):
    stored(paths.history_db())
    garble(paths.history_db())
    unrebuildable(paths.history_db())
    done = specchat("history", "search", "quick brown")
    assert done.returncode == 1 and done.stdout == b""
    lines = err_lines(done)
    assert len(lines) == 2 and lines[0].startswith(f"error: {CANNOT}") and lines[1].startswith("hint: every message")


def test_a_messages_fts_made_by_another_program_is_left_alone(specchat_home):
    paths.history_db().parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(paths.history_db())
    with db:
        db.execute("CREATE TABLE messages_fts (note TEXT)")
        db.execute("INSERT INTO messages_fts VALUES ('theirs')")
    db.close()
    history = History(paths.history_db())
    history.record("p", "hello", Message("assistant", "hi there"))
    assert contents(history) == ["hello", "hi there"]
    history.close()
    done = specchat("history", "search", "hello")
    assert done.returncode == 1
    assert err_lines(done)[0] == (
        "error: this history's search index (messages_fts) is a table another program made, not specchat's"
    )
    db = sqlite3.connect(paths.history_db())
    assert db.execute("SELECT * FROM messages_fts").fetchall() == [("theirs",)]
    assert db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == []
    db.close()


async def test_f3_search_on_a_messages_fts_made_by_another_program_is_one_notice(tmp_path):
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    with db:
        db.execute("CREATE TABLE messages_fts (content TEXT)")  # what an older specchat wrote into through its triggers
    db.close()
    app = make_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, TextPrompt))
        for key in "hello":
            await pilot.press(key)
        await pilot.press("enter")
        await wait_until(pilot, lambda: [n for n in notices(app) if "another program made" in n])
        assert [n for n in notices(app) if "messages_fts" in n] == [
            "this history's search index (messages_fts) is a table another program made, not specchat's (saving goes "
            "on; rename that table and specchat makes its own index the next time it opens the history)"
        ]
        assert isinstance(app.screen, HistoryScreen) and app.screen.query_one("OptionList").option_count == 1
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    assert db.execute("SELECT count(*) FROM messages_fts").fetchone() == (0,)  # nothing of ours written into it
    db.close()


# --- the tree of branches ---------------------------------------------------------------------


def test_a_chain_of_1100_branches_is_listed_each_under_the_last(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    root = history.new_conversation("root")
    with history.db:
        history.db.executemany(
            "INSERT INTO conversations (id, title, created, updated, parent_id) VALUES (?, ?, ?, ?, ?)",
            [(root + n, f"branch {n}", n, n, root + n - 1) for n in range(1, 1101)],
        )
    order = tree_order(history.list())
    assert [(c.id, depth) for c, depth in order] == [(root + n, n) for n in range(1101)]
    assert len(history.tree.family(root + 1100)) == 1101
    line = str(conversation_line(order[-1][0], 1100))
    assert line.startswith(" " * 14 + "└ branch (level 1100): branch 1100  ·") and len(line) < 100


async def test_conversations_whose_parents_point_at_each_other_are_listed_once_in_f3(tmp_path):
    history = History(tmp_path / "history.sqlite3")
    one, two = history.new_conversation("one"), history.new_conversation("two")
    three = history.tree.fork(two, 0)
    lone = history.new_conversation("lone")
    with history.db:  # a damaged file: two and one each name the other as the one they branched from
        history.db.execute("UPDATE conversations SET parent_id = ? WHERE id = ?", (two, one))
        history.db.execute("UPDATE conversations SET parent_id = ? WHERE id = ?", (one, two))
    history.close()
    app = make_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        options = app.screen.query_one("OptionList")
        await wait_until(pilot, lambda: options.option_count > 0)
        listed = [options.get_option_at_index(i) for i in range(options.option_count)]
        assert sorted(int(o.id) for o in listed) == [one, two, three, lone]
        assert [str(o.prompt).split("  ·")[0] for o in listed] == ["lone", "two", "└ branch: one", "└ branch: two"]


# --- `run --server` and a server that sent no speculation data --------------------------------


def no_speculation_docs() -> dict:
    docs = good_docs()
    for event in docs["stream"]:
        if "timings" in event:
            event["timings"].update(draft_n=None, draft_n_accepted=None)
    return docs


def test_run_on_a_server_keeps_the_turn_in_the_history(serve, specchat_home):
    url = serve(good_docs())
    done = specchat("run", "--server", url, "Say hello")
    assert done.returncode == 0, done.stderr
    history = History(paths.history_db())
    (conv,) = history.list()
    assert (conv.title, conv.pair) == ("Say hello", "server tiny.gguf")
    ask, reply = history.load(conv.id).messages
    assert (ask.role, ask.content) == ("user", "Say hello")
    assert (reply.content, reply.finish, reply.problem) == ("Hello world", "eos", "")
    assert reply.stats is not None and (reply.stats["source"], reply.stats["drafters"]) == ("server", ["server"])
    assert "".join(s["text"] for s in reply.spans or []) == "Hello world"
    history.close()
    assert specchat("run", "--server", url, "Again", "--no-history").returncode == 0
    assert [c.title for c in History(paths.history_db()).list()] == ["Say hello"]


@pytest.mark.parametrize("json_out", [False, True])
def test_run_on_a_server_into_a_full_stdout_is_one_line_and_keeps_the_turn(serve, specchat_home, json_out):
    url = serve(good_docs())
    command = [sys.executable, "-m", "specchat.cli.main", "run", "--server", url, "Say hello"]
    with open("/dev/full", "wb") as full:
        done = subprocess.run([*command, *(["--json"] if json_out else [])], stdout=full, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 1
    assert err_lines(done)[-2:] == ["error: cannot write the reply to stdout: No space left on device",
                                    "hint: the turn is saved in the history: specchat history search WORDS finds it"]  # fmt: skip
    history = History(paths.history_db())
    (conv,) = history.list()
    assert [m.content for m in history.load(conv.id).messages] == ["Say hello", "Hello world"]
    history.close()


def test_the_export_of_a_server_reply_with_no_speculation_data_says_not_measured(serve, tmp_path):
    session = ServerSession(serve(no_speculation_docs()))
    try:
        turn = session.reply("hi")
    finally:
        session.close()
    stats = {**turn.stats.to_dict(), "drafters": ["server"]}  # as the chat stores a server's reply
    history = History(tmp_path / "h.sqlite3")
    conv = history.record(session.pair, "hi", Message("assistant", turn.text, turn.finish, stats, turn.spans()))
    history.close()
    md = History(tmp_path / "h.sqlite3").export_markdown(conv)
    assert "| 1 | server | not measured | not measured | 100.0 | – | – |" in md
    assert "0.00" not in md and "0%" not in md


async def test_a_branch_of_a_server_reply_with_no_speculation_data_says_not_measured(serve, tmp_path):
    models = chat_models(serve(no_speculation_docs()), pair=None, drafter=None, baseline=False, baseline_server=None)
    app = make_app(tmp_path, models=models)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hi")
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: isinstance(app.screen, BranchScreen))
        app.screen.query_one("OptionList").highlighted = 1  # the reply: ask "hi" again
        await pilot.press("enter")
        await wait_until(pilot, lambda: not isinstance(app.screen, BranchScreen))
        note = "this branch's reply: α not measured · the reply it branched from: α not measured"
        await wait_until(pilot, lambda: note in notices(app))
        saved(app)
        assert not [n for n in notices(app) if "α 0.00" in n]
