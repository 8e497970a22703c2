"""End to end: the real app on the real smollm2-135m pair (draft = target),
driven by Pilot through the real loader and llama.cpp."""

from __future__ import annotations

import re

import pytest

from specchat.config import Settings
from specchat.tui.chat.panels import StatusBar
from specchat.tui.chat.widgets import AssistantMessage, PromptInput, ReplyBody, StatsLine
from tests.support.tui import DARK, TinyPair, make_app, rendered_by_colour, spans_text, wait_until

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("specchat_home")]  # settings and history under tmp_path


async def test_real_pair_streams_accepted_drafts_and_alpha(tmp_path, tiny_pair):
    target, draft = tiny_pair
    app = make_app(tmp_path, models=TinyPair(target, draft), settings=Settings(), drafter="draft", k=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=120)
        assert str(app.query_one(StatusBar).render()).startswith(f"{target.stem} · drafter draft · k 4")
        app.query_one(PromptInput).text = "List three colours, one per line."
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.query(AssistantMessage) and not app.chat.generating, timeout=300)
        await pilot.pause()
        reply = app.query_one(AssistantMessage)
        assert reply.stats["tokens"] > 10
        # Draft = target: nearly everything drafted is accepted, so α is near k+1.
        assert reply.stats["acceptance_rate"] > 0.8
        assert reply.stats["alpha"] > 3.0
        assert spans_text(reply, "accepted")
        assert rendered_by_colour(reply.query_one(ReplyBody))[(DARK["model"], False)] == spans_text(reply, "accepted")
        line = str(reply.query_one(StatsLine).render())
        assert re.match(rf"α {reply.stats['alpha']:.2f} · \d+% accepted · [\d.]+ tok/s · off [\d.]+ tok/s \(measured\) · ", line), line
        assert reply.text == app.chat.session.messages[-1]["content"]
        app.chat.session.close()
