"""Search every stored message (SQLite FTS5): `specchat history search
TEXT`, and s in F3, which opens the conversation a match is in."""

from __future__ import annotations

import json
import sqlite3

from typer.testing import CliRunner

from specchat import paths
from specchat.cli.main import app
from specchat.history.database import SCHEMA, History, Message
from tests.support.tui import make_app, ready, wait_until


def stored(history: History) -> tuple[int, int]:
    cats = history.record("p", "Tell me about cats", Message("assistant", "The quick brown cat sleeps all day."))
    code = history.record("p", "Rename x", Message("assistant", "def f(count):\n    return count"))
    return cats, code


def test_search_finds_the_words_in_order_and_marks_them(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    cats, code = stored(history)
    (hit,) = history.search("quick  BROWN")
    assert (hit.conversation, hit.role, hit.title) == (cats, "assistant", "Tell me about cats")
    assert hit.snippet == "The «quick brown» cat sleeps all day."
    assert [f.conversation for f in history.search("count")] == [code]
    assert history.search("brown quick") == []  # in order
    assert history.search('"') == [] and history.search("AND (") == [] and history.search("   ") == []
    history.delete(cats)
    assert history.search("quick brown") == []  # a deleted conversation's messages leave the index


def test_a_history_stored_before_the_index_is_indexed_when_opened(tmp_path):
    db = sqlite3.connect(tmp_path / "h.sqlite3")
    db.executescript(SCHEMA)
    db.execute("INSERT INTO conversations VALUES (1, 'old chat', '', 0, 0)")
    db.execute("INSERT INTO messages (conversation_id, seq, role, content, created) VALUES (1, 0, 'user', 'an old word: zephyr', 0)")
    db.commit()
    db.close()
    assert [f.conversation for f in History(tmp_path / "h.sqlite3").search("zephyr")] == [1]


def test_the_search_command(specchat_home):
    history = History(paths.history_db())
    cats, _ = stored(history)
    history.close()
    r = CliRunner().invoke(app, ["history", "search", "quick brown"])
    assert r.exit_code == 0 and r.stdout.splitlines() == [
        f"{cats:>5}  Tell me about cats · assistant: The «quick brown» cat sleeps all day."]  # fmt: skip
    as_json = json.loads(CliRunner().invoke(app, ["history", "search", "cat", "--json"]).stdout)
    assert [(f["conversation"], f["role"]) for f in as_json] == [(cats, "assistant")]  # "cat", not "cats"
    r = CliRunner().invoke(app, ["history", "search", "walrus"])
    assert r.exit_code == 1 and r.stdout.strip() == "no stored message holds “walrus”"


async def search_in_f3(pilot, words: str) -> None:
    """F3, then s, the words typed and Enter: the history lists what it found."""
    app_ = pilot.app
    await pilot.press("f3")
    await wait_until(pilot, lambda: app_.screen.__class__.__name__ == "HistoryScreen")
    await pilot.press("s")
    await wait_until(pilot, lambda: app_.screen.__class__.__name__ == "TextPrompt")
    await pilot.press(*words, "enter")
    await wait_until(pilot, lambda: app_.screen.__class__.__name__ == "HistoryScreen")


async def test_f3_searches_and_opens_the_conversation_of_a_match(tmp_path):
    app_ = make_app(tmp_path)
    cats, _ = stored(app_.conversation.history)
    async with app_.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await search_in_f3(pilot, "sleeps")
        options = app_.screen.query_one("OptionList")
        await wait_until(pilot, lambda: options.option_count == 1)
        assert "«sleeps»" in str(options.get_option_at_index(0).prompt)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app_.screen.__class__.__name__ == "ChatScreen")
        await wait_until(pilot, lambda: app_.conversation.id == cats)
        assert [m["content"] for m in app_.chat.session.messages][-1] == "The quick brown cat sleeps all day."


async def test_f3_says_when_no_message_holds_the_words(tmp_path):
    app_ = make_app(tmp_path)
    stored(app_.conversation.history)
    async with app_.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await search_in_f3(pilot, "walrus")
        title = app_.screen.query_one("#history-title")
        await wait_until(pilot, lambda: str(title.render()).startswith("No message holds “walrus”"))
        assert app_.screen.query_one("OptionList").option_count == 0


def test_a_message_a_branch_copied_is_found_once_in_the_conversation_it_was_written_in(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    cats, _ = stored(history)
    branch = history.tree.fork(cats, 2)
    history.add_message(branch, Message("user", "and a quick brown dog?"))
    hits = history.search("quick brown")
    assert sorted((h.conversation, h.role) for h in hits) == [(cats, "assistant"), (branch, "user")]
    history.close()


def test_a_branch_is_titled_by_its_first_message_of_its_own_unless_renamed(tmp_path):
    """The root keeps its title; a branch takes the first line of the first
    message it did not copy (an edited question, or a reply had again, code
    fences passed over), once; a title the user gave is kept."""
    history = History(tmp_path / "h.sqlite3")
    cats, _ = stored(history)
    edited = history.tree.fork(cats, 0)
    history.add_message(edited, Message("user", "Tell me about dogs\nin two lines"))
    history.add_message(edited, Message("assistant", "Dogs bark."))
    again = history.tree.fork(cats, 1)
    history.add_message(again, Message("assistant", "```\nCats purr.\n```"))
    named = history.tree.fork(cats, 1)
    history.rename(named, "mine")
    history.add_message(named, Message("assistant", "Cats nap."))
    titles = {c.id: c.title for c in history.list()}
    assert (titles[cats], titles[edited], titles[again], titles[named]) == (
        "Tell me about cats", "Tell me about dogs", "Cats purr.", "mine")  # fmt: skip
    history.close()
