"""The chat app under Pilot, on the real engine with the fake model: the
keys and what they change (drafters, cancel, regenerate, edit), the history,
the first run, pairs and settings. test_tui.py has the reply's colours and
numbers, streaming and pacing.
"""

from __future__ import annotations

import re

import pytest

from specchat import paths
from specchat.config import Settings
from specchat.drafters import NAMES
from specchat.themes import SPEC_DEFAULTS
from specchat.tui.chat.panels import StatusBar
from specchat.tui.chat.widgets import AssistantMessage, PromptInput, ReplyBody, StatsLine, UserMessage
from tests.support.tui import (
    DARK,
    FakeModels,
    hexcolor,
    make_app,
    ready,
    rendered_by_colour,
    saved,
    segments,
    send,
    start_reply,
    user_themes,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("specchat_home")  # settings, themes and history under tmp_path


# --- drafters, cancel, regenerate, edit ---------------------------------------------------------


async def test_status_bar_shows_what_auto_picks_while_generating(tmp_path):
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.02, max_tokens=4000), drafter="auto")
    async with app.run_test(size=(160, 40)) as pilot:
        await start_reply(pilot)
        await wait_until(pilot, lambda: app.chat.auto_choice != "")
        status = str(app.query_one(StatusBar).render())
        assert re.search(r"drafter auto → (off|ngram k=\d+|draft k=\d+) · ", status), status
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.generating)
        assert "→" not in str(app.query_one(StatusBar).render())


async def test_cycle_drafter_mid_reply(tmp_path):
    models = FakeModels(step_seconds=0.02, max_tokens=2000)
    app = make_app(tmp_path, models=models, drafter="off", k=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await start_reply(pilot)
        await wait_until(pilot, lambda: app.query(AssistantMessage) and app.query(AssistantMessage).last().spans)
        reply = app.query(AssistantMessage).last()
        await pilot.press("ctrl+d")  # off -> ngram, from the next round
        assert "drafter ngram" in str(app.query_one(StatusBar).render())
        await wait_until(pilot, lambda: any(s["drafter"] == "ngram" for s in reply.spans))
        await pilot.press("ctrl+d")  # ngram -> draft
        await wait_until(pilot, lambda: any(s["drafter"] == "draft" for s in reply.spans))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.generating)
        assert reply.stats["drafters"] == ["off", "ngram", "draft"]
        assert str(reply.query_one(StatsLine).render()).startswith("cancelled · off→ngram→draft · α ")
        sources = [s["drafter"] for s in reply.spans if s["kind"] != "target"]
        assert reply.spans[0]["kind"] == "target"  # off: the target's own tokens first
        assert sources == sorted(sources, key=["ngram", "draft"].index)  # n-gram drafts, then the model's
        assert app.chat.session.drafter_name == "draft"


async def test_each_drafter_runs_at_its_own_k_until_one_is_chosen(tmp_path):
    """The chat's k rule is run's and bench's (drafters.default_k): draft and
    hybrid at 4, the copying drafters and auto at 16, shown in the status bar;
    a k from the keys holds for the drafter it was picked under alone, and
    is not saved in the settings."""
    app = make_app(tmp_path, drafter="draft")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        bar = app.query_one(StatusBar)
        assert app.chat.session.k == 4 and "drafter draft · k 4 ·" in str(bar.render())
        await pilot.press("ctrl+d")  # draft -> hybrid
        assert app.chat.session.k == 4 and "drafter hybrid · k 4 ·" in str(bar.render())
        await pilot.press("ctrl+d")  # hybrid -> grammar
        assert app.chat.session.k == 16 and "drafter grammar · k 16 ·" in str(bar.render())
        await pilot.press("ctrl+down")  # picked for grammar: 15
        await pilot.press("ctrl+d")  # grammar -> memory, at its own 64
        assert app.chat.session.k == 64 and "drafter memory · k 64 ·" in str(bar.render())
        await pilot.press("ctrl+d", "ctrl+d", "ctrl+d", "ctrl+d")  # memory -> auto -> off -> ngram -> draft
        assert app.chat.session.drafter_name == "draft" and app.chat.session.k == 4
        assert "drafter draft · k 4 ·" in str(bar.render())
        await pilot.press("ctrl+d", "ctrl+d")  # draft -> hybrid -> grammar: the k picked for it
        assert app.chat.session.k == 15 and "drafter grammar · k 15 ·" in str(bar.render())
        assert app.settings.k is None


async def test_cycle_order_and_skips_without_draft_model(tmp_path):
    app = make_app(tmp_path, models=FakeModels(draft=None), drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        seen = []
        for _ in range(3):
            await pilot.press("ctrl+d")
            seen.append(app.chat.drafter)
        # No draft model and no MTP head: draft, mtp and hybrid are skipped.
        runnable = [n for n in NAMES if n not in ("draft", "mtp", "hybrid")]
        assert seen == (runnable[1:] + runnable)[:3]
    app = make_app(tmp_path, drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        seen = []
        for _ in range(len(NAMES) - 1):
            await pilot.press("ctrl+d")
            seen.append(app.chat.drafter)
        assert seen[:3] == ["ngram", "draft", "hybrid"]  # no MTP head in the fake pair: mtp is skipped
        assert seen == [n for n in NAMES[1:] if n != "mtp"] + ["off"]  # auto, when the registry has it, comes last
        # The draft model was never used, so switching to it says it loads on first use.
        messages = [n.message for n in app._notifications]
        assert "drafter: draft; the draft model loads on its first use" in messages


async def test_escape_cancels_and_keeps_partial_reply(tmp_path):
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.03, max_tokens=4000), drafter="ngram")
    async with app.run_test(size=(120, 40)) as pilot:
        await start_reply(pilot)
        await wait_until(pilot, lambda: app.query(AssistantMessage) and app.query(AssistantMessage).last().spans)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.generating)
        reply = app.query(AssistantMessage).last()
        assert reply.finish == "cancelled"
        assert reply.has_class("-cancelled")
        line = str(reply.query_one(StatsLine).render())
        # what it drafted before Esc: α and the rest; nothing drafted yet: no speedup to claim
        assert line.startswith("cancelled · α ") if reply.stats["drafted"] else line.endswith(" · no drafts this turn")
        assert 0 < reply.stats["tokens"] < 4000
        assert reply.text and reply.text == app.chat.session.messages[-1]["content"]
        saved(app)  # the history's writes run on a thread of their own
        stored = app.conversation.history.load(app.conversation.id).messages
        assert [m.role for m in stored] == ["user", "assistant"]
        assert stored[1].finish == "cancelled" and stored[1].content == reply.text


async def test_regenerate_replaces_the_last_reply(tmp_path):
    app = make_app(tmp_path, drafter="ngram")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        first = await send(pilot, "hello")
        text = first.text
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: not app.chat.generating and app.query(AssistantMessage).last() is not first)
        await wait_until(pilot, lambda: not app.chat.generating)
        replies = app.query(AssistantMessage)
        assert len(replies) == 1
        assert replies.last().text == text  # greedy: the same reply again
        assert [m["role"] for m in app.chat.session.messages] == ["user", "assistant"]
        saved(app)
        assert [m.role for m in app.conversation.history.load(app.conversation.id).messages] == ["user", "assistant"]


async def test_edit_last_resends(tmp_path):
    app = make_app(tmp_path, drafter="ngram")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await pilot.press("ctrl+l")
        prompt = app.query_one(PromptInput)
        assert prompt.text == "hello"
        await send(pilot, "goodbye")
        users = [u.text for u in app.query(UserMessage)]
        assert users == ["goodbye"]
        assert len(app.query(AssistantMessage)) == 1
        assert [m["content"] for m in app.chat.session.messages][0] == "goodbye"
        assert [m.content for m in app.conversation.history.load(app.conversation.id).messages][0] == "goodbye"


async def test_new_chat_clears(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        first = app.conversation.id
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert not app.query(AssistantMessage) and app.chat.session.messages == [] and app.conversation.id is None
        await send(pilot, "again")
        assert app.conversation.id != first
        assert len(app.conversation.history.list()) == 2


async def test_markdown_view_and_copy(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        reply = await send(pilot, "hello")
        await pilot.press("f5")
        await pilot.pause()
        assert reply.markdown_view and not reply.query_one(ReplyBody).display
        await pilot.press("f5")
        assert reply.query_one(ReplyBody).display
        await pilot.press("f6", "enter")  # the copy list opens on the last reply
        assert app.clipboard == reply.text
        reply.spans.append({"text": "\n```python\nprint(1)\n```\n", "kind": "target", "drafter": "target"})
        await pilot.press("f7")
        assert app.clipboard == "print(1)\n"
        reply.spans.append({"text": "then\n```sh\nmake\n```\n", "kind": "target", "drafter": "target"})
        await pilot.press("f7")
        assert app.clipboard == "print(1)\n\nmake\n"  # every block of the reply, not only the last
        kept = paths.data_dir() / "copied.txt"  # OSC 52 may never arrive: the file is sure to hold it
        assert [n.message for n in app._notifications][-1] == (
            f"2 code blocks went to the terminal's clipboard (if it takes OSC 52) and to {kept}")
        assert kept.read_text() == "print(1)\n\nmake\n"
        kept.unlink()
        kept.mkdir()  # a folder where the copy belongs: the clipboard still gets it, and one line says so
        await pilot.press("f6", "enter")
        assert app.clipboard == reply.text and kept.is_dir()
        assert [n.message for n in app._notifications][-1].startswith(
            "the reply went to the terminal's clipboard (if it takes OSC 52); not saved: ")


# --- history ---------------------------------------------------------------------------------------


async def test_history_reload_shows_same_colours_and_numbers(tmp_path):
    app = make_app(tmp_path, drafter="draft", k=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        reply = await send(pilot, "hello")
        spans, line = [dict(s) for s in reply.spans], str(reply.query_one(StatsLine).render())
        colours = rendered_by_colour(reply.query_one(ReplyBody))
    app2 = make_app(tmp_path)  # a restart: same database
    async with app2.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await pilot.pause()
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app2.query(AssistantMessage)) == 1)
        await pilot.pause()
        again = app2.query_one(AssistantMessage)
        assert again.spans == spans
        assert str(again.query_one(StatsLine).render()) == line
        assert rendered_by_colour(again.query_one(ReplyBody)) == colours
        # The session continues the reopened conversation.
        assert [m["role"] for m in app2.chat.session.messages] == ["user", "assistant"]
        await send(pilot, "more")
        assert [m.role for m in app2.conversation.history.load(app2.conversation.id).messages] == ["user", "assistant"] * 2


# --- first run, pairs, settings --------------------------------------------------------------------------


async def test_first_run_offers_to_pull(tmp_path):
    models = FakeModels(pulled=False)
    app = make_app(tmp_path, models=models)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "PullScreen" and app.screen.query("#pull-yes"))
        assert "not pulled" in str(app.query_one(StatusBar).render())
        question = str(app.screen.query_one("#pull-question").render())
        assert "'fake-pair'" in question and "2.0 GB" not in question  # size from pairs(): 2 MB
        await pilot.click("#pull-yes")
        await wait_until(pilot, lambda: app.chat.session is not None)
        assert models.pull_calls == 1
        assert str(app.query_one(StatusBar).render()).startswith("fake-pair · drafter auto")


async def test_first_run_not_now_leaves_a_clear_status(tmp_path):
    app = make_app(tmp_path, models=FakeModels(pulled=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "PullScreen" and app.screen.query("#pull-yes"))
        await pilot.click("#pull-no")
        await pilot.pause()
        assert app.chat.session is None
        assert str(app.query_one(StatusBar).render()) == "no model: 'fake-pair' is not pulled (F4 picks or pulls a pair)"
        app.query_one(PromptInput).text = "hi"
        await pilot.press("enter")
        assert not app.query(AssistantMessage)


async def test_pair_picker_switches_and_keeps_the_conversation(tmp_path):
    models = FakeModels()
    app = make_app(tmp_path, models=models)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await pilot.press("f4")
        await pilot.pause()
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: app.chat.session.pair == "other-pair")
        assert len(app.chat.session.messages) == 2
        assert str(app.query_one(StatusBar).render()).startswith("other-pair · ")


async def test_keymap_remaps_a_binding(tmp_path):
    app = make_app(tmp_path, settings=Settings(keymap={"cycle_drafter": "f9"}), drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+d")
        assert app.chat.drafter == "off"
        await pilot.press("f9")
        assert app.chat.drafter == "ngram"


async def test_config_errors_are_shown(tmp_path):
    app = make_app(tmp_path, config_errors=["settings.toml, line 3: k should be a whole number"])
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert any("line 3" in n.message for n in app._notifications)


async def test_theme_choice_persists(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path))
    from specchat.config import load_settings

    app = make_app(tmp_path, save_settings=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.theme = "specchat-colorblind"
        await pilot.pause()
    assert load_settings().theme == "specchat-colorblind"
    assert load_settings().pair == "fake-pair"


async def test_command_palette_lists_every_action(tmp_path):
    from specchat.tui.chat.keys import ACTIONS, SETTINGS_COMMANDS, SpecchatCommands

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        commands = {t: run for t, run, _ in SpecchatCommands(app.screen)._commands()}
        assert list(commands) == [a.title for a in ACTIONS] + [title for title, _, _ in SETTINGS_COMMANDS]
        ids = {b.id for bindings in app.screen._bindings.key_to_bindings.values() for b in bindings}
        assert {a.id for a in ACTIONS} <= ids
        # Each command runs its action where the key would: the chat's own, and the app's (F3, F4).
        app.call_later(commands["Drafter"])  # as the palette calls it, from the app's loop
        await wait_until(pilot, lambda: app.chat.drafter == "off")  # auto → off, the cycle's next
        app.call_later(commands["History"])
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "HistoryScreen")


async def test_legend_shows_the_colours(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "LegendScreen"
        runs = [(t, hexcolor(s), bool(s.strike)) for w in app.screen.query("Static") for t, s in segments(w)]
        assert ("rejected draft", DARK["rejected"], True) in runs
        # One colour per drafter, each named once, in every mode: auto's and hybrid's tokens keep theirs.
        assert ("n-gram", DARK["ngram"], False) in runs and ("draft model", DARK["model"], False) in runs
        assert ("memory", SPEC_DEFAULTS["spec-memory"], False) in runs
        assert ("MTP head", SPEC_DEFAULTS["spec-mtp"], False) in runs
        assert ("grammar-forced", SPEC_DEFAULTS["spec-grammar"], False) in runs
        assert any("auto and hybrid" in t for t, _, _ in runs)
        # Every drafter that proposes tokens of its own has a colour of its own, and the legend shows it.
        from specchat.drafters import SPECS, Name
        from specchat.themes import SOURCES

        assert set(SOURCES) == {s.name for s in SPECS} - {Name.OFF, Name.AUTO, Name.HYBRID}  # these draft with the rest
        colours = app.get_css_variables()
        shown = {c for _, c, strike in runs if not strike}
        assert all(colours[var].lower() in shown for var in SOURCES.values())
        assert len({colours[var] for var in SOURCES.values()}) == len(SOURCES)
        await pilot.press("escape")
        assert app.screen.__class__.__name__ != "LegendScreen"


async def test_a_drafter_picked_in_the_chat_is_the_next_chats_and_a_k_picked_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path))
    from specchat.config import load_settings

    app = make_app(tmp_path, save_settings=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+d")  # auto -> off
        await pilot.press("ctrl+d", "ctrl+down")  # off -> ngram, then k 16 -> 15
        await pilot.pause()
    kept = load_settings()
    assert (kept.drafter, kept.k) == ("ngram", None)  # a k belongs to the drafter and the chat it was picked in
    assert "k =" not in (tmp_path / "config" / "settings.toml").read_text()
    again = make_app(tmp_path, settings=kept)
    async with again.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert "drafter ngram · k 16 ·" in str(again.query_one(StatusBar).render())


async def test_the_legend_names_every_key_and_scrolls_to_the_last(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "LegendScreen")
        keys = str(app.screen.query_one("#legend-keys").render())
        for key in ("f8", "f10", "ctrl+p", "shift+enter", "tab"):
            assert any(line.split()[0].lower() == key for line in keys.splitlines()), key
        legend = app.screen.query_one("#legend")
        assert legend.max_scroll_y > 0  # 30 rows do not hold it all...
        await pilot.press("end")  # ...and the keyboard reaches the last line (once its animation lands)
        await wait_until(pilot, lambda: legend.scroll_y == legend.max_scroll_y)


async def test_ctrl_c_says_how_to_quit_in_plain_text(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.screen.query_one("#chat").focus()  # the prompt's own ctrl+c copies
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert [n.message for n in app._notifications][-1] == "Press ctrl+q to quit the app"


async def test_the_stats_panel_scrolls_to_its_totals_by_keyboard(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await pilot.press("f2")
        await pilot.pause()
        panel = app.screen.query_one("#stats-panel")
        assert panel.max_scroll_y > 0  # 24 rows do not hold the totals
        panel.focus()
        await pilot.press("end")  # scrolls with an animation: wait for it to land
        await wait_until(pilot, lambda: panel.scroll_y == panel.max_scroll_y)


async def test_keys_typed_while_the_conversation_has_focus_go_to_the_prompt(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        app.screen.query_one("#chat").focus()  # tab to scroll the conversation
        await pilot.press("h", "i")
        prompt = app.screen.query_one(PromptInput)
        await wait_until(pilot, lambda: prompt.text == "hi")  # typed keys go in a burst, a frame later
        assert prompt.has_focus


async def test_a_user_theme_without_token_colours_gets_its_lights_or_darks(tmp_path, monkeypatch):
    from specchat.themes import LIGHT

    user_themes(tmp_path, monkeypatch, paper='primary = "#335577"\ndark = false\n', night='primary = "#88aacc"\n')
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.theme = "paper"
        await wait_until(pilot, lambda: app.theme_variables["spec-accepted"] == LIGHT.variables["spec-accepted"])
        assert app.theme_variables["spec-rejected"] == LIGHT.variables["spec-rejected"]
        app.theme = "night"
        await wait_until(pilot, lambda: app.theme_variables["spec-accepted"] == SPEC_DEFAULTS["spec-accepted"])


async def test_the_status_bar_says_when_a_switch_waits_for_the_draft_model(tmp_path):
    import threading

    from tests.support.tui import noisy_draft

    loaded = threading.Event()  # the draft model loads when the test says so, not after a fixed time

    def slow_draft():
        loaded.wait(30)
        return noisy_draft()

    # A reply that cannot end before the switch: the key lands mid-reply on the slowest machine.
    app = make_app(tmp_path, models=FakeModels(draft=slow_draft, step_seconds=0.05, max_tokens=4000), drafter="ngram")
    async with app.run_test(size=(140, 40)) as pilot:
        try:
            await start_reply(pilot)
            await wait_until(pilot, lambda: app.chat.generating)
            bar = app.screen.query_one(StatusBar)
            await pilot.press("ctrl+d")  # ngram -> draft, mid-reply
            await wait_until(pilot, lambda: "loading the draft model" in str(bar.render()))
        finally:
            loaded.set()
        await wait_until(pilot, lambda: app.chat.session.draft_model_loaded)
        await wait_until(pilot, lambda: "loading the draft model" not in str(bar.render()))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.generating)


async def test_the_first_screen_says_how_to_start_attach_get_help_and_quit(tmp_path):
    """An empty prompt shows the hint line, whole at 80 columns; typed text replaces it."""
    from specchat.tui.chat.widgets import HINT

    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        prompt = app.screen.query_one(PromptInput)
        assert HINT in prompt.render_line(0).text and "ctrl+q quits" in HINT and "@ attaches" in HINT
        prompt.text = "hello"
        await pilot.pause()
        assert "hello" in prompt.render_line(0).text and HINT not in prompt.render_line(0).text


async def test_notices_never_cover_the_prompt_or_the_status_bar(tmp_path):
    """A toast lands over the conversation, at the top: the prompt being typed
    and the status bar stay whole under several notices, at 80 columns too."""
    from textual.widgets._toast import Toast

    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:  # run_test hides toasts by default
        await ready(pilot)
        for i in range(3):
            app.notify(f"notice {i}: " + "a long line of text " * 4, timeout=30)
        await wait_until(pilot, lambda: len(app.screen.query(Toast)) == 3)
        await pilot.pause()
        kept = [app.screen.query_one(PromptInput).region, app.screen.query_one(StatusBar).region]
        for toast in app.screen.query(Toast):
            assert toast.region.area and not any(toast.region.overlaps(r) for r in kept), toast.region
