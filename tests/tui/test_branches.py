"""Branches and the chat's own settings, under Pilot on the fake model:
ctrl+b branches from any message (the old branch stays), alt+← alt+→ step
through the branches, F3 shows them under their conversation and they
reopen after a restart; /system, /temp and /top-p take effect from the next
reply, the system prompt stays with its conversation, and each choice is
kept for the next start."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from specchat import paths
from specchat.config import load_settings
from specchat.history.database import History
from specchat.tui.chat.panels import StatusBar
from specchat.tui.chat.widgets import AssistantMessage, PromptInput, UserMessage
from specchat.tui.parts.branching import BranchScreen
from specchat.tui.parts.screens import HistoryScreen, TextPrompt
from tests.support.tui import enter, make_app, notices, ready, saved, send, wait_until

pytestmark = pytest.mark.usefixtures("specchat_home")


def status(app) -> str:
    return str(app.query_one(StatusBar).render())


def on_screen(app) -> list[str]:
    return [w.text if isinstance(w, AssistantMessage) else str(w.render()) for w in app.query("UserMessage, AssistantMessage")]


async def four_messages(pilot) -> list[str]:
    await ready(pilot)
    first = await send(pilot, "one")
    second = await send(pilot, "two")
    return ["one", first.text, "two", second.text]


async def branch_from(pilot, index: int) -> None:
    app = pilot.app
    await pilot.press("ctrl+b")
    await wait_until(pilot, lambda: isinstance(app.screen, BranchScreen))
    options = app.screen.query_one(OptionList)
    assert [str(options.get_option_at_index(i).prompt) for i in range(2)] == ["  1   you: one", f"  2 reply: {on_screen(app)[1].strip().splitlines()[0][:100]}"]
    options.highlighted = index
    await pilot.press("enter")
    await wait_until(pilot, lambda: not isinstance(app.screen, BranchScreen))


async def test_a_reply_had_again_from_the_second_of_four_messages_is_a_branch_to_step_through_and_reopen(tmp_path):
    app = make_app(tmp_path, drafter="memory")
    async with app.run_test(size=(120, 40)) as pilot:
        before = await four_messages(pilot)
        original = app.conversation.id
        await branch_from(pilot, 1)  # the first reply: ask "one" again
        await wait_until(pilot, lambda: not app.chat.generating and len(app.query(AssistantMessage)) == 1)
        saved(app)
        branch = app.conversation.id
        assert branch != original
        assert on_screen(app) == before[:2]  # greedy: the same reply again, in a branch of its own
        assert "branch 2/2" in status(app)
        assert any(n.startswith("this branch's reply: α ") and "the reply it branched from: α " in n for n in notices(app))
        history = app.conversation.history
        assert [m.content for m in history.load(original).messages] == before  # the old branch stays
        assert [m.content for m in history.load(branch).messages] == before[:2]
        assert history.load(branch).parent == original

        await pilot.press("alt+left")
        await wait_until(pilot, lambda: app.conversation.id == original)
        assert on_screen(app) == before and "branch 1/2" in status(app)
        await pilot.press("alt+left")  # round the family
        await wait_until(pilot, lambda: app.conversation.id == branch)
        assert "branch 2/2" in status(app)

    again = make_app(tmp_path)  # a restart, on the same history
    async with again.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(again.screen, HistoryScreen))
        options = again.screen.query_one(OptionList)
        lines = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert [line.split("  ·  ")[0] for line in lines] == ["one", "└ branch: one"]  # under the one it came from
        options.highlighted = 1
        await pilot.press("e")  # export writes the branch
        exported = paths.data_dir() / "exports" / f"conversation-{branch}.md"
        await wait_until(pilot, lambda: exported.is_file())
        assert before[1].strip()[:40] in exported.read_text() and "two" not in exported.read_text()
        await pilot.press("enter")
        await wait_until(pilot, lambda: again.conversation.id == branch)
        assert on_screen(again) == before[:2] and "branch 2/2" in status(again)


async def test_a_message_of_yours_branches_into_the_prompt_to_edit_and_send(tmp_path):
    app = make_app(tmp_path, drafter="ngram")
    async with app.run_test(size=(120, 40)) as pilot:
        before = await four_messages(pilot)
        original = app.conversation.id
        await branch_from(pilot, 2)  # "two"
        assert app.query_one(PromptInput).text == "two"
        assert on_screen(app) == before[:2] and not app.chat.generating  # nothing sent yet
        await send(pilot, "two, again")
        history = app.conversation.history
        assert [m.content for m in history.load(app.conversation.id).messages][:3] == [*before[:2], "two, again"]
        assert [m.content for m in history.load(original).messages] == before
        assert [str(u.render()) for u in app.query(UserMessage)] == ["one", "two, again"]


async def test_nothing_to_branch_from_and_no_branches_to_step_are_said(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+b", "alt+right")
        await pilot.pause()
        assert "nothing to branch from yet: send a message first" in notices(app)
        assert "this conversation has no branches (ctrl+b makes one)" in notices(app)


async def test_the_system_prompt_is_the_conversations_and_survives_a_restart(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path))
    app = make_app(tmp_path, save_settings=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await enter(pilot, "/system Answer in French.")
        await wait_until(pilot, lambda: "system prompt: Answer in French., from the next reply" in notices(app))
        assert app.chat.session.system == "Answer in French." and "system prompt" in status(app)
        await send(pilot, "hello")
        first = app.conversation.id
        await pilot.press("ctrl+n")
        await enter(pilot, "/system")  # none for the next conversation
        await wait_until(pilot, lambda: app.chat.session.system is None)
        await send(pilot, "bonjour")
        saved(app)
        history = app.conversation.history
        assert (history.load(first).system, history.load(app.conversation.id).system) == ("Answer in French.", None)
    assert load_settings().system_prompt == ""  # the last one chosen: none

    again = make_app(tmp_path, settings=load_settings())
    async with again.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        again.screen.load_conversation(first)
        assert again.chat.session.system == "Answer in French."  # the conversation's own
        prompt = [m for m in again.chat.session.prompt_tokens()]
        assert prompt  # the prompt is built with it
        again.screen.load_conversation(History(tmp_path / "history.sqlite3").list()[0].id)
        assert again.chat.session.system is None


async def test_temperature_and_top_p_set_in_the_chat_survive_a_restart(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path))
    app = make_app(tmp_path, save_settings=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await enter(pilot, "/temp hot")
        await wait_until(pilot, lambda: any("/temp needs a number, not 'hot'" in n for n in notices(app)))
        assert app.chat.session.sampling.temp == 0.0  # nothing changed
        await enter(pilot, "/temp 0.7")
        await enter(pilot, "/top-p 0.9")
        await wait_until(pilot, lambda: app.chat.session.sampling.top_p == 0.9)
        assert app.chat.session.sampling.temp == 0.7 and "temp 0.7" in status(app)
        assert "temperature 0.7 · top-p 0.9, from the next reply" in notices(app)
        reply = await send(pilot, "hello")
        assert reply.stats["tokens"] > 0
    kept = load_settings()
    assert (kept.temperature, kept.top_p) == (0.7, 0.9)
    again = make_app(tmp_path, settings=kept)
    async with again.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert (again.chat.session.sampling.temp, again.chat.session.sampling.top_p) == (0.7, 0.9)
        assert "temp 0.7" in status(again)


async def test_the_palette_sets_the_system_prompt_and_esc_leaves_it(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.screen.action_ask("/system")
        await wait_until(pilot, lambda: isinstance(app.screen, TextPrompt))
        await pilot.press(*"Be brief.", "enter")
        await wait_until(pilot, lambda: app.chat.session.system == "Be brief.")
        app.screen.action_ask("/system")
        await wait_until(pilot, lambda: isinstance(app.screen, TextPrompt))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, TextPrompt))
        assert app.chat.session.system == "Be brief."  # Esc changes nothing


async def test_the_branch_list_starts_on_the_last_question(tmp_path):
    """Enter right away edits the last question (the usual wish), not re-asks the last reply."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await four_messages(pilot)
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: isinstance(app.screen, BranchScreen))
        assert app.screen.query_one(OptionList).highlighted == 2  # "two", not its reply
        await pilot.press("escape")
