"""The chat's memory: filled from the history at start, shown in F2, turned
off with its key, emptied of a deleted conversation (fake model, real SQLite,
the real app under Pilot)."""

from __future__ import annotations

from textual.widgets import Static

from specchat.config import read_settings
from specchat.history.database import History, Message
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from specchat.tui.chat.panels import StatsPanel
from tests.support.tui import FakeModels, make_app, notices, ready, send, wait_until
from tests.support.words import QUESTION, WordModel


class WordModels(FakeModels):
    def open(self, pair, drafter, k, settings) -> ChatSession:
        return ChatSession(WordModel(), decode=DecodeOptions(drafter=drafter, k=k, max_tokens=60), pair=pair)


def stored_reply() -> str:
    """What the app's fake pair answers to QUESTION."""
    return ChatSession(WordModel(), decode=DecodeOptions(drafter="off", k=4, max_tokens=60)).reply(QUESTION).text


def stored(tmp_path) -> int:
    history = History(tmp_path / "history.sqlite3")
    conv_id = history.record("fake-pair", QUESTION, Message("assistant", stored_reply()))
    history.close()
    return conv_id


async def test_a_question_from_the_history_is_drafted_from_memory_and_f2_says_so(tmp_path):
    conv_id = stored(tmp_path)
    app = make_app(tmp_path, WordModels(), drafter="memory")
    async with app.run_test(size=(140, 50)) as pilot:
        await ready(pilot)
        session = app.chat.session
        await wait_until(pilot, lambda: session.memory._queue or session.memory.held)  # the fill ran on its thread
        reply = await send(pilot, QUESTION)
        assert reply.stats["memory_accepted"] >= 40  # of 60 tokens
        held = reply.stats["memory_held"]
        assert held >= 2 * 60  # the stored reply and this one, each behind its prompt's tail
        await pilot.press("f2")
        await pilot.pause()
        text = str(app.query_one(StatsPanel).query_one("#panel-numbers", Static).render())
        assert f"memory: {held:,} tokens held · {reply.stats['memory_accepted']} of the last reply's tokens" in text
        # Deleting the stored conversation takes its tokens out at the next turn.
        app.conversation.history.delete(conv_id)
        session.memory.absorb()
        assert conv_id not in session.memory.index.runs


async def test_the_memory_key_turns_it_off_for_this_chat(tmp_path):
    stored(tmp_path)
    app = make_app(tmp_path, WordModels(), drafter="memory")
    async with app.run_test(size=(140, 50)) as pilot:
        await ready(pilot)
        await pilot.press("f10")
        assert "memory off: emptied for this chat" in notices(app)
        reply = await send(pilot, QUESTION)
        assert reply.stats["memory_accepted"] == 0 and reply.stats["memory_held"] is None
        await pilot.press("f10")
        assert "memory on: drafting from your earlier replies" in notices(app)
        await pilot.press("ctrl+n")
        memory = app.chat.session.memory
        await wait_until(pilot, lambda: memory._queue or memory.held)  # the fill ran on its thread
        again = await send(pilot, QUESTION)
        assert again.stats["memory_accepted"] >= 40  # refilled from the history


async def test_memory_false_in_the_settings_starts_every_chat_with_it_off(tmp_path):
    stored(tmp_path)
    (tmp_path / "settings.toml").write_text("memory = false\n")
    loaded = read_settings(tmp_path / "settings.toml")
    assert loaded.errors == [] and loaded.settings.memory is False
    app = make_app(tmp_path, WordModels(), settings=loaded.settings, drafter="memory")
    async with app.run_test(size=(140, 50)) as pilot:
        await ready(pilot)
        assert app.chat.session.memory.on is False
        reply = await send(pilot, QUESTION)
        assert reply.stats["memory_accepted"] == 0 and reply.stats["memory_held"] is None
        await pilot.press("f10")  # on for this chat: filled from the history
        assert "memory on: drafting from your earlier replies" in notices(app)
        await pilot.press("ctrl+n")
        memory = app.chat.session.memory
        await wait_until(pilot, lambda: memory._queue or memory.held)  # the fill ran on its thread
        again = await send(pilot, QUESTION)
        assert again.stats["memory_accepted"] >= 40


def test_a_memory_setting_that_is_not_true_or_false_is_one_line(tmp_path):
    (tmp_path / "settings.toml").write_text('memory = "no"\n')
    loaded = read_settings(tmp_path / "settings.toml")
    assert loaded.settings.memory is True
    assert loaded.errors == [f"{tmp_path / 'settings.toml'}, line 1: memory should be true or false, not 'no'; using True"]
