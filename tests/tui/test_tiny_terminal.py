"""A terminal squeezed to a few columns (a split pane, a phone's shell) is a
layout to draw, not an error: the chat, each of its dialogs and a reply
that streams through the squeeze all go on, and the reply ends whole.
Textual wraps text to a widget's width, and a width of 0 was a ValueError
from deep inside the drawing that ended the chat and lost the reply."""

from __future__ import annotations

import pytest

from tests.support.tui import FakeModels, enter, make_app, ready, send, wait_until

DIALOGS = ("f1", "f3", "f4", "f6", "f8", "ctrl+b", "ctrl+p", "@")  # legend, history, pairs, copy, schema, branch, palette, files


@pytest.mark.parametrize("width", [1, 3, 5, 8, 10])
async def test_the_chat_and_its_dialogs_draw_in_a_terminal_a_few_columns_wide(tmp_path, width):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello there")
        await pilot.resize_terminal(width, 5)
        await pilot.pause()
        for key in DIALOGS:
            await pilot.press(key)
            await pilot.pause()
            await pilot.press("escape")
            await pilot.pause()
        assert app.is_running and app.return_code is None


async def test_a_reply_streams_through_a_squeeze_to_five_columns_and_ends_whole(tmp_path):
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.01, max_tokens=120))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await enter(pilot, "a long one")
        await wait_until(pilot, lambda: app.chat.generating)
        await pilot.resize_terminal(5, 5)
        await pilot.pause(0.2)
        await pilot.resize_terminal(120, 40)
        await wait_until(pilot, lambda: not app.chat.generating)
        reply = app.query("AssistantMessage").last()
        assert app.is_running and reply.stats and reply.finish == "length"
