"""What does the chat app cost against `specchat run`, and what does decoding
on a worker thread cost by itself? Runs one process of each kind side by
side, on the same pair and prompt (drafting off):

    main:    loads and decodes on the main thread, as `specchat run` does;
    thread:  loads and decodes on fresh threads that end, as the chat app does;
    app:     the chat app itself (headless), one app for the whole process.

The processes take turns: each decodes one reply while the others wait
idle, so replies of different kinds alternate every few seconds and drift
in the machine's speed hits them alike. Each reply is compared with the
main process's reply in the same turn. Whole processes differ (up to ±10%
here), so this repeats with fresh processes (--procs) and prints each
set's median too. One process per kind, because a thread that has decoded
keeps its OpenMP team for good (see tools/tui_overhead.py).

    python -m tools.thread_vs_main --pair qwen2.5-coder-1.5b --arms app --procs 8 --replies 6
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)
from tools.tui_overhead import PROMPT, count_sleeps, on_a_thread, run_plain, spread, ui_replies


def serve(kind: str, pair: str, max_tokens: int) -> None:
    """One process's part: load, then decode one reply per line on stdin and
    print its tok/s, the way `kind` says."""
    from specchat.session.loader import open_session
    from specchat.session.options import DecodeOptions, LoadOptions

    def call(fn):
        return fn() if kind == "main" else on_a_thread(fn)  # main: as `specchat run`

    session = call(lambda: open_session(LoadOptions(pair), DecodeOptions(drafter="off", k=4, max_tokens=max_tokens)))
    count_sleeps(session)
    answer("ready")
    if kind == "app":
        asyncio.run(serve_app(session))
        return
    for _ in sys.stdin:
        r = call(lambda: run_plain(session, PROMPT))
        answer(r["tokens"] / r["t"])


async def serve_app(session) -> None:
    async with contextlib.aclosing(ui_replies(session, PROMPT)) as replies:
        while await asyncio.to_thread(sys.stdin.readline):
            r = await anext(replies)
            answer(r["tokens"] / r["t"])


def answer(value) -> None:
    """One line to the parent (sys.__stdout__: a running app captures sys.stdout)."""
    sys.__stdout__.write(f"{value}\n")
    sys.__stdout__.flush()


class Process:
    def __init__(self, kind: str, args) -> None:
        self.kind = kind
        self.proc = subprocess.Popen([sys.executable, "-m", "tools.thread_vs_main", "--serve", kind, "--pair", args.pair,
                                      "--max-tokens", str(args.max_tokens)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._read()  # "ready": loaded, and idle from here on

    def _read(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.kind} process ended early (exit code {self.proc.wait()})")
        return line

    def reply(self) -> float:
        """tok/s of one reply."""
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return float(self._read())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="qwen2.5-coder-1.5b")
    ap.add_argument("--arms", nargs="+", choices=["thread", "app"], default=["app"],
                    help="what to compare with the main thread")
    ap.add_argument("--procs", type=int, default=8, help="sets of fresh processes")
    ap.add_argument("--replies", type=int, default=6, help="measured replies per process")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--serve", choices=["main", "thread", "app"], help=argparse.SUPPRESS)  # one process's part
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.pair, args.max_tokens)
        return 0
    kinds = ["main", *args.arms]
    costs: dict[str, list[float]] = {kind: [] for kind in args.arms}
    per_set: dict[str, list[float]] = {kind: [] for kind in args.arms}
    for i in range(args.procs):
        procs = [Process(kind, args) for kind in kinds]
        for p in procs:
            p.reply()  # warm-up: first-call costs, the app's first renders
        set_costs: dict[str, list[float]] = {kind: [] for kind in args.arms}
        for turn in range(args.replies):
            shift = (i + turn) % len(procs)  # who goes first rotates
            tok_s = {p.kind: p.reply() for p in procs[shift:] + procs[:shift]}
            for kind in args.arms:
                set_costs[kind].append(tok_s["main"] / tok_s[kind] - 1)
        for p in procs:
            p.close()
        for kind, c in set_costs.items():
            costs[kind] += c
            per_set[kind].append(statistics.median(c))
        print(f"processes {i + 1}: " + ", ".join(
            f"{kind} {spread(c)}" for kind, c in set_costs.items()), flush=True)
    for kind in args.arms:
        print(f"{kind} vs main, slower per token, {len(costs[kind])} replies: {spread(costs[kind])}")
        print(f"  the {args.procs} sets' medians: " + " ".join(f"{x * 100:+.1f}%" for x in sorted(per_set[kind])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
