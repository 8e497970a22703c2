"""What a verify costs in plain steps at different places in the context.

    python -m tools.context_cost                          # the default pair, 30 to 700 tokens, twice over
    python -m tools.context_cost --contexts 100,1500 --sizes 1,8,17,33 --repeats 9

auto prices a draft on one cost curve, measured at whatever context the
chat held when it was measured (between replies; `tools.native_compare`
measures it after a one-word prompt). This times, at each context in turn,
the sizes the curve holds the way the curve is measured (costmodel's
`time_decodes`: a plain step, then a batch, rolled back), and prints each
size's cost in plain steps at that context: the fastest of the repeats over
the fastest plain step, and the median over the median. The contexts are
visited in the order given, so a list that comes back to a context shows
how far two passes at the same place differ on this machine.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)
from specchat.decoding.costmodel import time_decodes
from specchat.errors import SpecchatError
from specchat.session.loader import open_session
from specchat.session.options import DecodeOptions, LoadOptions

FILLER = Path(__file__).resolve().parent.parent / "tests" / "data" / "inventory.py"  # any text: its tokens fill the context


def numbers(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.context_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default=None, help="a pulled pair (default: the configured one)")
    ap.add_argument("--target", default=None, help="a target GGUF (instead of --pair)")
    ap.add_argument("--contexts", type=numbers, default=numbers("30,300,700,30,700"), help="tokens before each batch")
    ap.add_argument("--sizes", type=numbers, default=numbers("1,16,32,64"), help="positions per batch (1 first)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    sizes = sorted(set(args.sizes) | {1})
    if min(args.contexts, default=0) < 1 or sizes[0] < 1 or args.repeats < 1:
        ap.error("contexts, sizes and repeats are counts: 1 or more each (--contexts 30,700 --sizes 1,16 --repeats 5)")
    try:
        session = open_session(LoadOptions(args.pair, target=args.target, threads=args.threads),
                               DecodeOptions(drafter="off", k=4))
    except SpecchatError as err:  # no such pair or file, not a model
        ap.error(err.one_line())
    try:
        target = session.target
        if max(args.contexts) + max(sizes) + 1 > target.n_ctx:
            ap.error(f"a context of {max(args.contexts)} tokens and a batch of {max(sizes)} pass the model's window "
                     f"of {target.n_ctx} tokens: give smaller --contexts or --sizes")
        tokens = target.tokenize(FILLER.read_text("utf-8"), special=False)
        tokens = (tokens * (max(args.contexts) // max(1, len(tokens)) + 1))[: max(args.contexts)]
        print("context  " + "  ".join(f"{n:>11}" for n in sizes[1:]) + "   plain step (fastest)")
        for ctx in args.contexts:
            target.truncate(0)
            target.eval(tokens[:ctx], n_logits=1)
            got = time_decodes(target, sizes, args.repeats)
            fastest, median = min(got[1]), statistics.median(got[1])
            cells = [f"{min(got[n]) / fastest:5.2f}/{statistics.median(got[n]) / median:5.2f}" for n in sizes[1:]]
            print(f"{ctx:>7}  " + "  ".join(f"{c:>11}" for c in cells) + f"   {fastest * 1e3:.1f} ms")
        print("each cell: steps, the fastest of the repeats over the fastest plain step / the median over the median")
    finally:
        session.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
