"""The chat on a llama.cpp server, end to end: the real app under
Pilot, the real `llama-server` (tests/support/llamaserver.py) on the real
smollm2-135m pair, the same colours, stats line, status bar, legend and
history as a local pair, from the server's own counters."""

from __future__ import annotations

import re

import pytest

from specchat.config import Settings
from specchat.tui.chat.panels import StatusBar
from specchat.tui.chat.widgets import AssistantMessage, PromptInput, ReplyBody, StatsLine
from tests.support.llamaserver import LlamaServer, plain_args, spec_args
from tests.support.server import acceptance_lines
from tests.support.tui import DARK, make_app, rendered_by_colour, saved, spans_text, wait_until

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("specchat_home")]  # settings and history under tmp_path

PROMPT = "Write the numbers from 1 to 30 separated by commas."


@pytest.fixture(scope="module")
def servers(tiny_pair, tmp_path_factory):
    target, draft = tiny_pair
    logs = tmp_path_factory.mktemp("servers")
    spec = LlamaServer(spec_args(target, draft), logs / "spec.log").start()
    plain = LlamaServer(plain_args(target), logs / "plain.log").start()
    yield spec, plain
    spec.stop()
    plain.stop()


def server_models(url: str, **kw):
    from specchat.tui.state.models import chat_models

    return chat_models(url, pair=None, drafter=None, baseline=kw.pop("baseline", False),
                       baseline_server=kw.pop("baseline_server", None))


async def ask(pilot, text: str, timeout: float = 120) -> AssistantMessage:
    app = pilot.app
    app.query_one(PromptInput).text = text
    await pilot.press("enter")
    await wait_until(pilot, lambda: app.query(AssistantMessage) and not app.chat.generating, timeout=timeout)
    await pilot.pause()
    return app.query(AssistantMessage).last()


async def test_chat_colours_each_chunk_from_the_servers_totals(tmp_path, servers, tiny_pair):
    spec, _ = servers
    app = make_app(tmp_path, models=server_models(spec.url), settings=Settings())
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=60)
        status = str(app.query_one(StatusBar).render())
        assert status.startswith(f"{tiny_pair[0].name} @ 127.0.0.1:{spec.port} · drafter server"), status
        reply = await ask(pilot, PROMPT)
        accepted, drafted, mean_len = acceptance_lines(spec)[-1]
        assert (reply.stats["drafted"], reply.stats["accepted"]) == (drafted, accepted)
        assert reply.stats["alpha"] == pytest.approx(mean_len, abs=0.005)
        # Accepted text, and only it, in the theme's accepted colour; its provenance the server's totals.
        accepted_text = spans_text(reply, "accepted", "server totals")
        assert accepted_text and accepted_text == spans_text(reply, "accepted")
        assert rendered_by_colour(reply.query_one(ReplyBody))[(DARK["accepted"], False)] == accepted_text
        line = str(reply.query_one(StatsLine).render())
        assert line.startswith(f"α {mean_len:.2f} · {accepted}/{drafted} drafts accepted "
                               f"({accepted / drafted * 100:.0f}%, server totals) · "), line
        assert re.search(r"[\d.]+ tok/s \(server clock\)$", line), line  # no baseline asked: no speedup
        assert reply.text == app.chat.session.messages[-1]["content"]
        # ctrl+d: this server takes no per-request settings, so its own is the only one.
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert app.chat.drafter == "server"
        assert any("only" in str(n.message) and "server" in str(n.message) for n in app._notifications)
        # The legend explains the provenance.
        await pilot.press("f1")
        await pilot.pause()
        legend = " ".join(str(w.render()) for w in app.screen.query("Static"))
        assert "server totals" in legend and "draft_n_accepted" in legend
        app.chat.session.close()


async def test_chat_baseline_shows_a_measured_speedup(tmp_path, servers):
    spec, plain = servers
    app = make_app(tmp_path, models=server_models(spec.url, baseline=True, baseline_server=plain.url))
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=60)
        reply = await ask(pilot, PROMPT, timeout=180)
        stats = reply.stats
        assert stats["baseline_tok_s"] > 0 and stats["speedup"] == pytest.approx(stats["tok_s"] / stats["baseline_tok_s"])
        line = str(reply.query_one(StatsLine).render())
        assert f"off {stats['baseline_tok_s']:.1f} tok/s (--baseline, measured) · {stats['speedup']:.2f}×" in line
        app.chat.session.close()


async def test_a_server_killed_mid_reply_keeps_the_partial_reply_marked_cut(tmp_path, tiny_pair):
    target, draft = tiny_pair
    server = LlamaServer(spec_args(target, draft), tmp_path / "server.log").start()
    app = make_app(tmp_path, models=server_models(server.url))
    history = app.conversation.history
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: app.chat.session is not None, timeout=60)
            app.query_one(PromptInput).text = "Count from 1 to 500, one number per line."
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.query(AssistantMessage) and app.query(AssistantMessage).last().spans,
                             timeout=60)
            server.kill()
            await wait_until(pilot, lambda: not app.chat.generating, timeout=60)
            await pilot.pause()
            reply = app.query(AssistantMessage).last()
            assert reply.finish == "cut"
            line = str(reply.query_one(StatsLine).render())
            assert line.startswith("cut off: the server closed the stream"), line
            assert reply.text and app.chat.session.messages[-1] == {"role": "assistant", "content": reply.text}
            saved(app)
            stored = history.load(history.list()[0].id).messages[-1]
            assert (stored.role, stored.finish, stored.content) == ("assistant", "cut", reply.text)
            app.chat.session.close()
    finally:
        server.stop()


async def test_escape_during_a_server_stream_cancels_and_keeps_the_partial_reply(tmp_path, servers):
    spec, _ = servers
    app = make_app(tmp_path, models=server_models(spec.url), settings=Settings())
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=60)
        app.query_one(PromptInput).text = "Write the numbers from 1 to 2000 separated by commas."
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.query(AssistantMessage) and app.query(AssistantMessage).last().spans)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.generating, timeout=30)
        await pilot.pause()
        reply = app.query(AssistantMessage).last()
        assert reply.finish == "cancelled" and reply.has_class("-cancelled")
        assert str(reply.query_one(StatsLine).render()).startswith("cancelled · ")
        assert reply.text and reply.text == app.chat.session.messages[-1]["content"]
        assert "2000" not in reply.text  # stopped long before the end
        saved(app)
        stored = app.conversation.history.load(app.conversation.id).messages
        assert stored[1].finish == "cancelled" and stored[1].content == reply.text
        # The server is free again: the next reply comes whole.
        follow = await ask(pilot, "Say hi.")
        assert follow.finish in ("eos", "length") and follow.text
        app.chat.session.close()
