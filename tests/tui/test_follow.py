"""A streaming reply under Pilot: the view follows the end of its text, the
rows the reply reserves ahead (widgets.RESERVE_LINES) stay below the view,
no empty stats line sits under it, and a user who scrolled up stays put."""

from __future__ import annotations

import pytest

from specchat.tui.chat.chatlog import ChatLog
from specchat.tui.chat.widgets import AssistantMessage, ReplyChunk, StatsLine
from tests.support.tui import FakeModels, make_app, start_reply, wait_until

pytestmark = pytest.mark.usefixtures("specchat_home")


async def test_the_view_shows_the_last_line_of_a_streaming_reply_not_blank_rows(tmp_path):
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.004, max_tokens=3500), drafter="off")
    async with app.run_test(size=(80, 20)) as pilot:
        await start_reply(pilot, "tell me a long story")
        chat = app.query_one(ChatLog)
        await wait_until(pilot, lambda: chat.max_scroll_y > 10 and app.query(ReplyChunk).last().blank > 0, 30)
        reply = app.query(AssistantMessage).last()
        assert not reply.query_one(StatsLine).display  # no empty stats rows under the text
        seen = 0
        while app.chat.generating and seen < 20:
            blank = reply.blank_rows
            if blank and chat.scroll_y == chat.max_scroll_y - blank:
                seen += 1  # the view ends where the text ends
            await pilot.pause(0.01)
        assert seen >= 5  # seen over several rounds, as the reserved rows came and went
        for size in ((60, 20), (100, 24)):  # narrower (more rows) and wider (fewer): it keeps following
            await pilot.resize_terminal(*size)
            grown = chat.max_scroll_y
            await wait_until(pilot, lambda: chat.max_scroll_y > grown + 3, 30)
            await wait_until(pilot, lambda: chat.scroll_y == chat.max_scroll_y - reply.blank_rows, 10)
        app.chat.cancel()
        await wait_until(pilot, lambda: not app.chat.generating)


async def test_a_user_scrolled_up_stays_put_while_the_reply_streams(tmp_path):
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.004, max_tokens=3500), drafter="off")
    async with app.run_test(size=(80, 20)) as pilot:
        await start_reply(pilot, "tell me a long story")
        chat = app.query_one(ChatLog)
        await wait_until(pilot, lambda: chat.max_scroll_y > 20, 30)
        chat.scroll_to(y=2, animate=False)
        await wait_until(pilot, lambda: chat.scroll_y == 2)
        grown = chat.max_scroll_y
        await wait_until(pilot, lambda: chat.max_scroll_y > grown + 5, 30)
        assert chat.scroll_y == 2
        app.chat.cancel()
        await wait_until(pilot, lambda: not app.chat.generating)
        await pilot.pause(0.05)
        assert chat.scroll_y == 2  # nor when the reply ends


async def test_the_view_following_the_reply_never_undoes_a_scroll_the_user_makes_after(tmp_path):
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.004, max_tokens=3500), drafter="off")
    async with app.run_test(size=(80, 20)) as pilot:
        await start_reply(pilot, "tell me a long story")
        chat = app.query_one(ChatLog)
        await wait_until(pilot, lambda: chat.max_scroll_y > 20, 30)
        chat.scroll_to(y=chat.scroll_y - 1, animate=False, immediate=True)  # near the end: still following
        chat._follow()  # the view follows the reply...
        chat.scroll_to(y=2, animate=False, immediate=True)  # ...and the user's wheel scrolls up right after
        for _ in range(5):
            await pilot.pause(0.02)
            assert chat.scroll_y == 2
        app.chat.cancel()
        await wait_until(pilot, lambda: not app.chat.generating)
