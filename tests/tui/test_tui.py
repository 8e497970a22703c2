"""The chat app under Pilot, on the real engine with the fake model.

Replies are checked as the user sees them: the rendered segments of the
reply (text, colour, strike-through), the stats line's text, the status bar.
"""

from __future__ import annotations

import re
import threading

import pytest

from specchat.config import Settings
from specchat.session.chat import ChatSession
from specchat.tui.chat.panels import StatusBar
from specchat.tui.chat.widgets import AssistantMessage, PromptInput, ReplyBody, ReplyChunk, StatsLine
from tests.support.fake_model import FakeModel
from tests.support.tui import (
    DARK,
    FakeModels,
    enter,
    hexcolor,
    make_app,
    noisy_draft,
    ready,
    rendered_by_colour,
    segments,
    send,
    spans_text,
    squash,
    start_reply,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("specchat_home")  # settings, themes and history under tmp_path


async def test_reply_colours_accepted_rejected_target(tmp_path):
    app = make_app(tmp_path, drafter="draft", k=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        reply = await send(pilot, "hello")
        kinds = {s["kind"] for s in reply.spans}
        assert kinds == {"accepted", "rejected", "target"}
        await pilot.press("ctrl+t")  # the rejected drafts, once the reply ended, are one key away
        await pilot.pause()
        by_colour = rendered_by_colour(reply.query_one(ReplyBody))
        assert by_colour[(DARK["model"], False)] == spans_text(reply, "accepted")  # the draft model's colour
        assert by_colour[(DARK["rejected"], True)] == spans_text(reply, "rejected")
        assert by_colour[(DARK["fg"], False)] == spans_text(reply, "target")
        # The reply is the target's text: rejected drafts are not part of it.
        assert reply.text == app.chat.session.messages[-1]["content"]
        assert squash(reply.text) == squash("".join(s["text"] for s in reply.spans if s["kind"] != "rejected"))
        # A rejected draft sits right before the target's correction.
        for i, s in enumerate(reply.spans):
            if s["kind"] == "rejected":
                assert reply.spans[i + 1]["kind"] == "target"


async def test_hybrid_tells_ngram_from_model(tmp_path):
    app = make_app(tmp_path, models=FakeModels(max_tokens=80), drafter="hybrid", k=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        reply = await send(pilot, "hello")
        sources = {s["drafter"] for s in reply.spans if s["kind"] == "accepted"}
        assert sources == {"hybrid:ngram", "hybrid:draft"}
        by_colour = rendered_by_colour(reply.query_one(ReplyBody))
        assert by_colour[(DARK["model"], False)] == spans_text(reply, "accepted", "hybrid:draft")
        # In the dark theme n-gram accepted shares the accepted colour; target text is plain.
        assert spans_text(reply, "accepted", "hybrid:ngram") in by_colour[(DARK["ngram"], False)]


async def test_rejected_drafts_show_while_streaming_and_go_once_the_reply_ends(tmp_path):
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.01, max_tokens=400), drafter="draft", k=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await start_reply(pilot)
        await wait_until(pilot, lambda: app.query(AssistantMessage) and app.query(ReplyBody))
        reply = app.query(AssistantMessage).last()
        body = reply.query_one(ReplyBody)
        # While it streams, the struck drafts are the show.
        await wait_until(pilot, lambda: app.chat.generating and any(style.strike for _, style in segments(body)), 30)
        await wait_until(pilot, lambda: not app.chat.generating, 60)
        await pilot.pause()
        # Once it ends, what the screen holds (and a mouse selects) is the reply alone.
        assert any(s["kind"] == "rejected" for s in reply.spans)
        assert not any(style.strike for _, style in segments(body))
        assert "".join(squash(t) for t, _ in segments(body)) == squash(reply.text)
        await pilot.press("ctrl+t")  # one key brings them back, in every reply, and takes them away again
        await pilot.pause()
        assert any(style.strike for _, style in segments(body))
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert not any(style.strike for _, style in segments(body))


# --- numbers ---------------------------------------------------------------------------------


async def test_stats_line_matches_the_engine(tmp_path):
    app = make_app(tmp_path, drafter="draft", k=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        reply = await send(pilot, "hello")
        # The same conversation without the UI: alpha and acceptance are deterministic.
        headless = FakeModels().open("fake-pair", "draft", 4, Settings()).reply("hello").stats
        line = str(reply.query_one(StatsLine).render())
        assert f"α {headless.alpha:.2f}" in line
        assert f"{headless.acceptance_rate * 100:.0f}% accepted" in line
        s = reply.stats
        assert re.fullmatch(
            rf"α {s['alpha']:.2f} · \d+% accepted · {s['tok_s']:.1f} tok/s · "
            rf"off {s['baseline_tok_s']:.1f} tok/s \(measured\) · {s['speedup']:.2f}×( \([\d.]+–[\d.]+×\))?", line)
        speed = next(style for text, style in segments(reply.query_one(StatsLine)) if "×" in text)
        assert hexcolor(speed) == (DARK["accepted"] if s["speedup"] > 1 else DARK["rejected"])


async def test_speedup_colour_green_above_one_red_below(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        for speedup, colour in ((1.4, DARK["accepted"]), (0.6, DARK["rejected"])):
            stats = {"alpha": 2.0, "acceptance_rate": 0.5, "tok_s": 10.0, "baseline_tok_s": 8.0, "speedup": speedup,
                     "drafted": 10, "drafters": ["ngram"]}
            reply = AssistantMessage([{"text": "hi", "kind": "target", "drafter": "target"}], stats, "eos")
            await app.query_one("#chat").mount(reply)
            await pilot.pause()
            speed = next(style for text, style in segments(reply.query_one(StatsLine)) if "×" in text)
            assert hexcolor(speed) == colour


async def test_drafter_off_shows_just_tok_s(tmp_path):
    app = make_app(tmp_path, drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        reply = await send(pilot, "hello")
        line = str(reply.query_one(StatsLine).render())
        assert re.fullmatch(r"\d+\.\d tok/s · drafter off", line), line
        assert {s["kind"] for s in reply.spans} == {"target"}


async def test_status_bar_and_k_keys(tmp_path):
    app = make_app(tmp_path, drafter="ngram", k=5)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        bar = app.query_one(StatusBar)
        assert str(bar.render()) == "fake-pair · drafter ngram · k 5 · temp 0 · ctx 0/4096"
        await pilot.press("ctrl+up", "ctrl+up")
        assert app.chat.session.k == 7
        await pilot.press("ctrl+down")
        assert app.chat.session.k == 6
        assert "k 6" in str(bar.render())
        await send(pilot, "hi")
        used = app.chat.session.context_used
        assert used > 0 and f"ctx {used}/4096" in str(bar.render())


async def test_an_80_column_status_bar_keeps_pair_drafter_k_and_ctx_whole(tmp_path):
    """What does not fit gives way (temp, a note cut short, then gone, auto's
    choice, the live tok/s); pair, drafter, k and ctx stay whole."""
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.02, max_tokens=4000), drafter="auto")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        bar = app.query_one(StatusBar)
        app.chat_screen.set_status(note="a note far too long to fit beside everything else on an 80-column line")
        await pilot.pause()
        shown = str(bar.render())
        assert shown.startswith("fake-pair · drafter auto · k 64 · ctx 0/4096 · a note far") and shown.endswith("…")
        assert bar.render().cell_length <= 80 and "temp" not in shown
        await enter(pilot, "hello")
        await wait_until(pilot, lambda: (app.chat.live_tok_s or 0) > 0)
        app.chat.auto_choice = "ngram k=15"
        app.chat_screen.set_status()
        await pilot.pause()
        shown = str(bar.render())
        assert re.match(r"fake-pair · drafter auto( → ngram k=15)? · k 64 · ctx \d+/4096", shown), shown
        assert bar.render().cell_length <= 80
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.generating)


async def test_live_tok_s_while_generating(tmp_path):
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.02, max_tokens=4000), drafter="ngram")
    async with app.run_test(size=(120, 40)) as pilot:
        await start_reply(pilot)
        await wait_until(pilot, lambda: (app.chat.live_tok_s or 0) > 0)
        assert re.search(r" · \d+\.\d tok/s$", str(app.query_one(StatusBar).render()))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.generating)
        assert "tok/s" not in str(app.query_one(StatusBar).render())


async def test_a_long_prompt_shows_how_much_of_it_is_read(tmp_path):
    """The status bar says how far the prompt's reading is, chunk by chunk,
    then the live tok/s once the reply decodes."""
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.2, max_tokens=3), drafter="ngram")
    async with app.run_test(size=(160, 40)) as pilot:
        await start_reply(pilot, "word " * 200)  # 1,000 characters: the fake reads one token each
        bar = app.query_one(StatusBar)
        await wait_until(pilot, lambda: re.search(r"reading the prompt: 256 of 1,\d{3} tokens", str(bar.render())))
        await wait_until(pilot, lambda: re.search(r"reading the prompt: 768 of 1,\d{3} tokens", str(bar.render())))
        await wait_until(pilot, lambda: not app.chat.generating)
        assert "reading the prompt" not in str(bar.render())


async def test_streaming_chunk_reserves_lines_and_gives_them_back(tmp_path):
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.02, max_tokens=4000), drafter="ngram")
    async with app.run_test(size=(120, 40)) as pilot:
        await start_reply(pilot)
        await wait_until(pilot, lambda: app.query(ReplyChunk) and app.query(ReplyChunk).last().reserved > 0, 30)
        live = app.query(ReplyChunk).last()
        # While streaming, the live chunk holds lines ahead of its text (once the screen has laid it out)...
        assert live.styles.min_height.value == live.reserved
        await wait_until(pilot, lambda: 0 < live.reserved <= live.size.height)
        await pilot.press("escape")  # a cancelled reply gives its lines back as a finished one does
        await wait_until(pilot, lambda: not app.chat.generating)
        await pilot.pause()
        # ...and once the reply ends every chunk is exactly as tall as its text.
        for chunk in app.query(ReplyChunk):
            assert chunk.reserved == 0 and chunk.styles.min_height is None
        last, reply = app.query(ReplyChunk).last(), app.query(AssistantMessage).last()
        assert last.size.height == reply._live.get_height(last.styles, last.content_size.width)  # no blank lines left


async def test_cpu_bound_worker_waits_until_each_batch_is_shown(tmp_path, monkeypatch):
    """Where decoding keeps every core busy, the UI draws between rounds: the
    worker's flush returns only once the reply holds everything it posted."""
    from specchat.tui.chat import stream as app_mod

    records = []  # (characters posted so far, characters the reply held when flush returned)
    posted = {"chars": 0}
    flush = app_mod.RoundFeed.flush

    def recording_flush(self, now=None):
        posted["chars"] += sum(len(s["text"]) for s in self.pending)
        flush(self, now)
        records.append((posted["chars"], len(self.reply.text)))

    monkeypatch.setattr(app_mod.RoundFeed, "flush", recording_flush)
    monkeypatch.setattr(app_mod, "SHOW_WAIT_SECONDS", 30)  # a slow machine's drawing is waited for, never timed out
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.005, max_tokens=200, cpu_bound=True), drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.pacer.cpu_bound and app.pacer.ui_share == app_mod.UI_SHARE_CPU_BOUND
        reply = await send(pilot, "hello")
        assert len(records) >= 2 and records[-1][0] == len(reply.text) > 0
        assert all(held == sent for sent, held in records), records
        assert 0 < app.pacer.drawing_wait < len(records) * app_mod.SHOW_WAIT_SECONDS


async def test_models_load_and_decode_only_on_workers(tmp_path):
    """llama.cpp's OpenMP keeps a team of threads for every thread that has
    decoded; once the teams hold more threads than there are cores, libgomp
    sleeps at every barrier.
    So the app loads and decodes on its workers only, never on the main thread."""
    seen: list[tuple[str, threading.Thread]] = []

    def recorded(model: FakeModel, name: str) -> FakeModel:
        seen.append((f"{name} load", threading.current_thread()))
        eval_ = model.eval

        def eval(*args, **kwargs):
            seen.append((f"{name} eval", threading.current_thread()))
            return eval_(*args, **kwargs)

        model.eval = eval
        return model

    class Recording(FakeModels):
        def open(self, *args) -> ChatSession:
            session = super().open(*args)
            recorded(session.target, "target")
            return session

    models = Recording(draft=lambda: recorded(noisy_draft(), "draft"))
    app = make_app(tmp_path, models, Settings(drafter="draft"))
    async with app.run_test() as pilot:
        await ready(pilot)
        await send(pilot, "hello")
    assert {what for what, _ in seen} == {"target load", "target eval", "draft load", "draft eval"}
    assert [what for what, thread in seen if thread is threading.main_thread()] == []


def test_pacing_spaces_batches_by_what_the_ui_costs(tmp_path, monkeypatch):
    from specchat.tui.chat import stream as app_mod

    app = make_app(tmp_path)
    clock = {"wall": 100.0, "cpu": 5.0}
    monkeypatch.setattr(app_mod.time, "perf_counter", lambda: clock["wall"])
    monkeypatch.setattr(app_mod.time, "thread_time", lambda: clock["cpu"])

    def batches(cpu_bound: bool, n: int = 12) -> float:
        app.pacer.cpu_bound, app.pacer._mark, app.pacer.batch_seconds = cpu_bound, (0.0, 0.0), app_mod.BATCH_SECONDS
        for _ in range(n):  # each batch costs the UI 6 ms of CPU
            app.pacer.pace()
            clock["wall"] += app.pacer.batch_seconds
            clock["cpu"] += 0.006
        return app.pacer.batch_seconds

    # A CPU-bound decode: 6 ms per batch within 0.75% of a core means a batch every 0.8 s.
    assert batches(cpu_bound=True) == pytest.approx(0.006 / 0.0075, rel=0.01)
    # Spare cores: within 10% of a core, every 60 ms.
    assert batches(cpu_bound=False) == pytest.approx(0.006 / 0.10, rel=0.01)
    app.pacer.cpu_bound = True
    clock["cpu"] += 1.0  # a very slow render: batches come at the longest spacing allowed
    app.pacer.pace()
    assert app.pacer.batch_seconds == app_mod.MAX_BATCH_SECONDS


async def test_a_rejected_line_end_keeps_the_code_on_its_line(tmp_path):
    """A struck-through draft that holds a line end shows it as ⏎, so the
    target's correction stays on the line it belongs to: a one-line list
    comprehension stays one line, with the rejected draft struck through inside it."""
    from textual.geometry import Region

    from specchat.tui.chat.chatlog import ChatLog
    from specchat.tui.chat.widgets import AssistantMessage, ReplyChunk

    spans = [{"text": "squares = [x * x", "kind": "accepted", "drafter": "ngram"},
             {"text": "\n    for", "kind": "rejected", "drafter": "ngram"},
             {"text": " for x in xs]", "kind": "target", "drafter": "target"}]  # fmt: skip
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        reply = AssistantMessage(show_rejected=True)
        await app.query_one(ChatLog).mount(reply)
        reply.add_spans(spans)
        await pilot.pause()
        lines = []
        for chunk in reply.query(ReplyChunk):
            w, h = chunk.size
            lines += ["".join(seg.text for seg in strip).rstrip() for strip in chunk.render_lines(Region(0, 0, w, h))]
        assert [line for line in lines if line] == ["squares = [x * x⏎    for for x in xs]"]
        struck = rendered_by_colour(reply.query_one(ReplyBody))[(DARK["rejected"], True)]
        assert struck == "⏎for"  # whitespace squashed: the line end and the word, struck through


async def test_enter_while_the_model_loads_keeps_the_message_and_says_so(tmp_path):
    """A message sent before the pair has loaded is not sent and not lost:
    it stays in the prompt, one line says why, and Enter sends it once loaded."""

    class Slow(FakeModels):
        def __init__(self) -> None:
            super().__init__()
            self.go = threading.Event()

        def open(self, *args) -> ChatSession:
            self.go.wait(30)
            return super().open(*args)

    models = Slow()
    app = make_app(tmp_path, models=models)
    async with app.run_test(size=(120, 40)) as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = "hello"
        prompt.focus()
        await pilot.press("enter")
        assert app.chat.session is None and prompt.text == "hello" and not app.query(AssistantMessage)
        assert [n.message for n in app._notifications][-1] == (
            "the model is still loading: your message stays here, Enter sends it once it has loaded")
        models.go.set()
        await ready(pilot)
        reply = await send(pilot, "hello")
        assert reply.text and prompt.text == ""
