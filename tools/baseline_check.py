"""Is auto's shown baseline what plain decoding does? Checked in one process.

    python -m tools.baseline_check                  # the default pair, the held-out prompts, 3 rounds
    python -m tools.baseline_check --rounds 5 --max-tokens 128
    python -m tools.baseline_check --target T.gguf --draft D.gguf --prompt my_prompt.txt

The speedup auto's stats line shows divides its reply's speed by the speed
of the same turn's plain steps (the baseline). `tools.native_compare` sets
it beside the speedup over a separate `--drafter off` process, run just
before; that one carries the spread between two processes run seconds
apart. Here one session, as the chat holds one, decodes each prompt with
drafting off and then with auto, round after round, without a history and
with the memory off (a reply it had seen would copy itself). Per prompt it
prints the median, over rounds, of auto's baseline over the off turn just
before it, which is 1.00 where the baseline is what off does, and the
rounds' lowest and highest.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.baseline_check", description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default=None, help="a pulled pair (default: the catalog's default)")
    ap.add_argument("--target", default=None, help="a target model file instead of a pair")
    ap.add_argument("--draft", default=None, help="its draft model file")
    ap.add_argument("--prompt", action="append", type=Path, help="a prompt file (repeatable; default: held-out prompts)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    from specchat.session.loader import open_session, pair_files
    from specchat.session.options import DecodeOptions, LoadOptions
    from tools.native_compare import held_out

    _, target, draft = pair_files(args.pair, args.target, args.draft)
    prompts = {p.stem: p.read_text() for p in args.prompt or []} or {n: t[0] for n, t in held_out().items()}
    session = open_session(
        LoadOptions(target=str(target), draft=str(draft) if draft else None, threads=args.threads),
        DecodeOptions(drafter="auto", max_tokens=args.max_tokens),
    )
    session.set_memory(False)
    ratios: dict[str, list[float]] = {name: [] for name in prompts}
    try:
        for rnd in range(args.rounds):
            for name, text in prompts.items():
                off = turn(session, "off", text)
                auto = turn(session, "auto", text)
                base = auto.baseline_tok_s
                if base and off.tok_s > 0:
                    ratios[name].append(base / off.tok_s)
                said = f"baseline {base:.1f} tok/s" if base else "no plain steps"
                print(f"round {rnd + 1} · {name}: off {off.tok_s:.1f} tok/s · auto {auto.tok_s:.1f}, {said}",
                      file=sys.stderr)
    finally:
        session.close()
    print("| prompt | auto's baseline over off, same process | lowest–highest | rounds with plain steps |")
    print("|---|---|---|---|")
    for name, got in ratios.items():
        if got:
            print(f"| {name} | {statistics.median(got):.3f} | {min(got):.3f}–{max(got):.3f} | {len(got)} of {args.rounds} |")
        else:
            print(f"| {name} | – | – | 0 of {args.rounds} |")
    return 0


def turn(session, drafter: str, text: str):
    """One reply to `text` with this drafter, without a history: its stats."""
    session.set_drafter(drafter)
    session.replace_messages([])
    return session.reply(text).stats


if __name__ == "__main__":
    sys.exit(main())
