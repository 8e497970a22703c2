"""What a grammar's size costs llama.cpp: where decoding/schema.py's limits come from.

    python tools/grammar_size.py                    # enums on the tiny pair's vocabulary
    python tools/grammar_size.py --enums 2000x8,8000x8,1000x200

For each enum (COUNT members of LENGTH random letters) this turns the
schema into GBNF as specchat does, then times, on the pair's target:
- bind: llama_sampler_init_grammar (parse, build the first parse stacks);
- copy: one copy of the grammar state (each reply starts with one, each
  forced-text probe makes one): llama.cpp compares every parse stack with
  every element of the grammar, so it grows with alternatives × size;
- probe: the grammar drafter's first forced-text probe;
- first: the three together, a constrained reply's first step.
decoding/schema.py's limits are lifted for the run. A measurement, printed; never a test.
"""

from __future__ import annotations

import argparse
import random
import string
import time

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", default="smollm2-135m")
    ap.add_argument("--enums", default="1000x40,2000x8,2000x40,4000x40,8000x8,2000x200",
                    help="comma-separated COUNTxLENGTH")
    args = ap.parse_args()

    from specchat.decoding import schema
    from specchat.decoding.constraint import Constraint
    from specchat.llamacpp.grammar import Grammar
    from specchat.llamacpp.llama import Model
    from specchat.store.pairs import resolve_pair

    schema.MAX_ALTERNATIVES = schema.MAX_GBNF_BYTES = 10**12  # measure past the limits
    model = Model(resolve_pair(args.pair)[0], n_ctx=512)
    rng = random.Random(1)
    print(f"{'members':>8} {'length':>6} {'alternatives':>12} {'GBNF bytes':>10} {'alt×bytes':>9} "
          f"{'bind s':>7} {'copy s':>7} {'probe s':>7} {'first s':>7}")
    for item in args.enums.split(","):
        count, length = map(int, item.split("x"))
        values = ["".join(rng.choice(string.ascii_lowercase) for _ in range(length)) for _ in range(count)]
        spec = schema.schema_spec({"enum": values}, "enum.json")
        t0 = time.perf_counter()
        c = Constraint()
        c.set(Grammar(spec, model))
        t1 = time.perf_counter()
        c.begin()
        t2 = time.perf_counter()
        c.forced(16)
        t3 = time.perf_counter()
        c.set(None)
        n, size = schema.alternatives(spec.gbnf), len(spec.gbnf.encode())
        print(f"{count:>8} {length:>6} {n:>12,} {size:>10,} {n * size:>9.1e} "
              f"{t1 - t0:>7.3f} {t2 - t1:>7.3f} {t3 - t2:>7.3f} {t3 - t0:>7.2f}", flush=True)
    model.close()


if __name__ == "__main__":
    main()
