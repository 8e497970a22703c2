"""Measure what the chat UI costs decoding: the same ChatSession and prompt,
once without any UI (like `specchat run`), once inside the app (headless
Textual: layout and rendering run, only the terminal write is skipped).

    python -m tools.tui_overhead                      # the fake model, 20 ms per step
    python -m tools.tui_overhead --pair smollm2-135m  # a real pulled pair

(from the repository root: it uses the fakes in tests/support)
    ... --mode unfed    # the app runs, but no round is ever sent to it
    ... --baseline-on-main   # the no-UI replies decode on the main thread (see below)

Greedy decoding makes both runs produce the same tokens, so decode time per
round compares like with like. Prints per-round overhead and the tok/s ratio.

Both arms load and decode off the main thread, as the app does. libgomp
(llama.cpp's OpenMP) keeps a team of threads for every thread that has
decoded, and once the teams hold more threads than there are cores it stops
spinning at barriers and sleeps instead: hundreds of sleeps per token. The
app and `specchat run` each have one team; a harness that decoded on the
main thread as well would have two (--baseline-on-main shows what that
does). The decoding thread's sleeps per token are printed, to show which
arm pays it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)

PROMPT = "Write a Python function that reverses a list, then explain it."  # thread_vs_main uses it too


def fake_factory(step: float, drafter: str, k: int, max_tokens: int):
    from specchat.session.chat import ChatSession
    from specchat.session.options import DecodeOptions
    from tests.support.tui import long_model, noisy_draft

    return lambda: ChatSession(
        long_model(step_seconds=step),
        noisy_draft,
        DecodeOptions(drafter=drafter, k=k, max_tokens=max_tokens),
        pair="fake",
    )


def real_factory(pair: str, drafter: str, k: int, max_tokens: int):
    from specchat.session.loader import open_session

    return lambda: open_session(LoadOptions(pair), DecodeOptions(drafter=drafter, k=k, max_tokens=max_tokens))


def on_a_thread(fn):
    """fn() on a fresh thread that ends with it, as the app's workers run."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def count_sleeps(session) -> None:
    """Record on the session how often the decoding thread slept during its last reply."""
    reply = session.reply

    def counted(*args, **kwargs):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        turn = reply(*args, **kwargs)
        session.last_sleeps = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before
        return turn

    session.reply = counted


def run_plain(session, prompt: str) -> dict:
    session.clear()
    s = session.reply(prompt).stats
    return {"tokens": s.tokens, "rounds": s.verify_rounds + s.plain_steps, "t": s.t_decode,
            "sleeps": session.last_sleeps}


async def ui_replies(session, prompt: str):
    """Replies to `prompt` inside one app (headless), each in a new chat, one
    per step of this async generator; the app stays up between steps."""
    from specchat.config import Settings
    from specchat.history.database import History
    from specchat.tui.app import SpecchatApp
    from specchat.tui.chat.widgets import AssistantMessage, PromptInput

    class One:
        remembers_pair = True
        legend_note = ""

        def pairs(self):
            return []

        def default_pair(self):
            return "p"

        def is_pulled(self, name):
            return True

        def open(self, pair, drafter, k, settings):
            return session

    with tempfile.TemporaryDirectory() as tmp:
        app = SpecchatApp(One(), Settings(), history=History(Path(tmp) / "h.sqlite3"), save_settings=False)
        async with app.run_test(size=(120, 40)) as pilot:
            while app.chat.session is None:
                await pilot.pause(0.05)
            while True:
                await pilot.press("ctrl+n")
                prompt_input = app.query_one(PromptInput)
                prompt_input.text = prompt
                cpu0 = time.thread_time()  # this coroutine runs on the UI thread
                await pilot.press("enter")
                # Plain sleeps on one attribute: Pilot's own polling, or a DOM
                # query every few ms, would cost the UI thread CPU the app never spends.
                while not app.query(AssistantMessage):
                    await asyncio.sleep(0.05)
                reply = app.query(AssistantMessage).last()
                while reply.stats is None:
                    await asyncio.sleep(0.25)
                ui_cpu = time.thread_time() - cpu0
                prompt_input.cursor_blink = False  # no repaints while something else decodes
                s = reply.stats
                yield {"tokens": s["tokens"], "rounds": s["verify_rounds"] + s["plain_steps"],
                       "t": s["t_decode"], "ui_cpu": ui_cpu, "wait": app.pacer.drawing_wait,
                       "sleeps": session.last_sleeps}


async def run_ui(session, prompt: str, n: int) -> list[dict]:
    """n replies inside one app."""
    out = []
    async with contextlib.aclosing(ui_replies(session, prompt)) as replies:
        async for r in replies:
            out.append(r)
            if len(out) == n:
                break
    return out


def summary(name: str, runs: list[dict]) -> tuple[float, float]:
    per_round = statistics.median(r["t"] / r["rounds"] for r in runs)
    tok_s = statistics.median(r["tokens"] / r["t"] for r in runs)
    print(f"{name:>8}: {runs[0]['tokens']} tokens in {runs[0]['rounds']} rounds; "
          f"median {per_round * 1000:.2f} ms/round, {tok_s:.1f} tok/s over {len(runs)} replies")
    return per_round, tok_s


def spread(costs: list[float]) -> str:
    """Relative costs as their median and middle half, in percent."""
    quart = statistics.quantiles(costs, n=4) if len(costs) > 1 else costs * 3
    return f"median {statistics.median(costs) * 100:+.1f}%, middle half {quart[0] * 100:+.1f}% to {quart[2] * 100:+.1f}%"


def paired(label: str, base: list[dict], runs: list[dict]) -> None:
    """Each reply against the base reply decoded just before it: drift that
    outlasts a reply cancels, and the spread shows how far to trust the median."""
    costs = sorted((r["t"] / r["tokens"]) / (b["t"] / b["tokens"]) - 1 for b, r in zip(base, runs))
    print(f"{label}, reply by reply: " + " ".join(f"{c * 100:+.1f}%" for c in costs))
    print(f"  {spread(costs)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", help="a pulled pair (default: the fake model)")
    ap.add_argument("--step", type=float, default=0.02, help="fake model: seconds per target pass")
    ap.add_argument("--drafter", default="ngram")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--replies", type=int, default=5)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--mode", choices=["ui", "unfed"], default="ui",
                    help="ui: the app as it is; unfed: the app runs but is never sent a round")
    ap.add_argument("--baseline-on-main", action="store_true",
                    help="decode the no-UI replies on the main thread, as `specchat run` does; that leaves "
                         "a second OpenMP team, and the app's worker sleeps at every barrier")
    args = ap.parse_args()
    if args.mode == "unfed":
        from specchat.tui.chat.stream import RoundFeed

        RoundFeed.__call__ = lambda self, r: None
        RoundFeed.flush = lambda self, now=None: None
    factory = (real_factory(args.pair, args.drafter, args.k, args.max_tokens) if args.pair
               else fake_factory(args.step, args.drafter, args.k, args.max_tokens))
    session = on_a_thread(factory)  # one session for both, so both decode on the same warm model
    count_sleeps(session)

    def no_ui() -> dict:
        return run_plain(session, args.prompt)

    on_a_thread(no_ui)  # warm up (page cache, first-call costs)
    plain, ui = [], []
    for _ in range(args.replies):  # interleaved, so drifting machine load hits both alike
        plain.append(no_ui() if args.baseline_on_main else on_a_thread(no_ui))
        ui += asyncio.run(run_ui(session, args.prompt, 1))
    session.close()
    if [r["tokens"] for r in plain] != [r["tokens"] for r in ui]:
        print("note: token counts differ between runs", [r["tokens"] for r in plain], [r["tokens"] for r in ui])
    p_round, p_tok_s = summary("no UI", plain)
    u_round, u_tok_s = summary(args.mode, ui)
    paired(f"{args.mode} vs no UI", plain, ui)
    for name, runs in (("no UI", plain), (args.mode, ui)):
        sleeps = statistics.median(r["sleeps"] / r["tokens"] for r in runs)
        print(f"{name:>8}: the decoding thread slept {sleeps:.2f} times per token (OpenMP throttled: hundreds)")
    if args.mode == "ui":
        wait = statistics.median(r["wait"] / r["t"] for r in ui)
        print(f"the worker waited for drawing (CPU-bound machines only): {wait * 100:.2f}% of decode time")
    ui_cpu = statistics.median(r.get("ui_cpu", 0.0) / r["t"] for r in ui)
    print(f"UI thread CPU: {ui_cpu * 100:.1f}% of one core while decoding "
          f"({statistics.median(r.get('ui_cpu', 0.0) / r['rounds'] for r in ui) * 1000:.2f} ms per round)")
    print(f"UI overhead: {(u_round - p_round) * 1000:+.2f} ms per round; "
          f"decode speed {u_tok_s / p_tok_s * 100:.1f}% of no-UI ({(1 - u_tok_s / p_tok_s) * 100:+.1f}% cost)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
