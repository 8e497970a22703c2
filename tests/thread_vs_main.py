"""Does decoding on a worker thread cost anything by itself, and what does
the whole app cost against `specchat run`? Alternates kinds of process on
the same pair and prompt (drafting off):

    main:    load and decode on the main thread, as `specchat run` does;
    thread:  load and decode on fresh threads that end, as the chat app does;
    app:     the chat app itself (headless), loading and decoding on its workers.

Each process decodes a warm-up reply and then two measured ones; each arm's
process is compared with the main one just before it, so drift across the
run cancels. One process per arm, because a thread that has decoded keeps
its OpenMP team for good (see tests/tui_overhead.py).

    python tests/thread_vs_main.py --pair qwen2.5-coder-1.5b --pairs 10
    python tests/thread_vs_main.py --pair qwen2.5-coder-1.5b --pairs 6 --arms app
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.tui_overhead import count_sleeps, on_a_thread, run_plain, run_ui, spread  # noqa: E402

PROMPT = "Write a Python function that reverses a list, then explain it."


def arm(kind: str, pair: str, max_tokens: int) -> float:
    """Median tok/s of two replies, decoded the way `kind` says."""
    from specchat.loader import open_session

    def call(fn):
        return fn() if kind == "main" else on_a_thread(fn)  # main: as `specchat run`

    session = call(lambda: open_session(pair, drafter="off", k=4, max_tokens=max_tokens))
    count_sleeps(session)
    call(lambda: run_plain(session, PROMPT))  # warm up
    if kind == "app":
        runs = [asyncio.run(run_ui(session, PROMPT, 1))[0] for _ in range(2)]
    else:
        runs = [call(lambda: run_plain(session, PROMPT)) for _ in range(2)]
    return statistics.median(r["tokens"] / r["t"] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="qwen2.5-coder-1.5b")
    ap.add_argument("--pairs", type=int, default=10, help="pairs of processes")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--arms", nargs="+", choices=["thread", "app"], default=["thread"],
                    help="what to compare with the main thread")
    ap.add_argument("--arm", choices=["main", "thread", "app"], help=argparse.SUPPRESS)  # one process's part
    args = ap.parse_args()
    if args.arm:
        print(arm(args.arm, args.pair, args.max_tokens))
        return 0
    costs: dict[str, list[float]] = {kind: [] for kind in args.arms}
    for i in range(args.pairs):
        tok_s = {}
        for kind in ["main", *args.arms]:
            out = subprocess.run([sys.executable, __file__, "--arm", kind, "--pair", args.pair,
                                  "--max-tokens", str(args.max_tokens)], capture_output=True, text=True, check=True)
            tok_s[kind] = float(out.stdout.split()[-1])
        for kind in args.arms:
            costs[kind].append(tok_s["main"] / tok_s[kind] - 1)
        print(f"pair {i + 1}: " + ", ".join(f"{kind} {v:.2f} tok/s" for kind, v in tok_s.items()), flush=True)
    for kind, c in costs.items():
        c.sort()
        print(f"{kind} vs main, slower per token: {spread(c)} ({' '.join(f'{x * 100:+.1f}%' for x in c)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
