"""specchat's own cost at a GPU's speed, measured without a GPU.

The real engine and drafters run over stand-in models that take exactly
what the H200 took to decode (docs/measurements/h200-curves-2026-11-30.json: the 1.5B's
curve, its bare-loop step of 2.19 ms for one position, the 0.5B's step for
a drafted token) by waiting on the clock, as a CUDA sync spins, and answer
with real logits rows of Qwen2.5's 151,936 floats. Greedy reads only
argmax tokens, and on a GPU llama.Model has llama.cpp take them in its
graph, so the stand-ins hand each token back from the "device" as
llama_get_sampled_token_ith does (the argmax kernel's few microseconds on
the GPU are not in the curve); with --host-argmax every row read is
scanned on the host instead, as on the CPU. Everything else is
specchat's, run for real: drafting, rollback bookkeeping, the stats. The
model's time is counted apart (timed around each call, as `llama.Model`
does for t_llama), so what is left is specchat's own, against a GPU's
step. A prediction from a stand-in, not a GPU measurement:
tools/gpu_probe.py measures the same share on the device.

    python -m tools.engine_overhead [--tokens 512] [--repeat 5] [--costs docs/measurements/h200-curves-2026-11-30.json] [--no-wait] [--host-argmax]

The reply the stand-in target gives copies spans of its prompt between new
tokens (as a code edit does), so copying drafters find work; the stand-in
draft model agrees with it 70% of the time.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import time
import timeit
from pathlib import Path
from statistics import median

import numpy as np

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)
from specchat.decoding.costmodel import interpolate
from specchat.decoding.sampling import SamplingParams
from specchat.decoding.target import K_MAX
from specchat.drafters.registry import Drafters
from specchat.engine.loop import Engine
from tools.replay import probe_costs

ROOT = Path(__file__).resolve().parent.parent
N_VOCAB = 151_936  # Qwen2.5's vocabulary: every row read is this long
ROWS = K_MAX + 1  # logits rows: row j of every decode in one place, as llama.cpp's output buffer


def script(seed: int, prompt_len: int, reply_len: int) -> tuple[list[int], list[int]]:
    """A prompt of random tokens and a reply that copies spans of it between new tokens."""
    rng = random.Random(seed)
    prompt = [rng.randrange(100, N_VOCAB) for _ in range(prompt_len)]
    reply: list[int] = []
    while len(reply) < reply_len:
        start = rng.randrange(prompt_len - 40)
        reply += prompt[start : start + rng.randint(5, 40)]
        reply += [rng.randrange(100, N_VOCAB) for _ in range(rng.randint(1, 8))]
    return prompt, reply[:reply_len]


@functools.cache
def random_rows() -> np.ndarray:
    """ROWS logits rows of random floats, made once: every stand-in starts from them."""
    return np.random.default_rng(0).normal(size=(ROWS, N_VOCAB)).astype(np.float32)


class StandIn:
    """A model that decodes in the time a curve gives and whose greedy token
    after the first p + 1 tokens is text[p + 1] (with `agree` < 1, sometimes another)."""

    def __init__(self, text: list[int], seconds: dict[int, float], agree: float = 1.0, n_ctx: int = 8192,
                 graph_argmax: bool = True):
        self.text, self.seconds, self.agree = text, seconds, agree
        self.graph_argmax = graph_argmax  # greedy reads answered by the "device", as llama.Model on a GPU
        self.tokens_only = False
        self.known = sorted(seconds)
        self.n_ctx, self.n_vocab = n_ctx, N_VOCAB
        self.max_draft = K_MAX  # a KV cache: it takes back a draft of any length
        self.tokens: list[int] = []
        self.llama_seconds = 0.0  # the stand-in's own time, apart from specchat's
        self.reads = 0  # logits rows specchat took the argmax of
        self.rows = random_rows().copy()  # changed by eval: each stand-in has its own
        self.winner = [0] * ROWS  # the column each row currently makes the argmax
        self._first = 0  # position of the first logits row of the last eval

    def eval(self, tokens, n_logits: int = 1) -> None:
        t0 = time.perf_counter()
        self.tokens += tokens
        self._first = len(self.tokens) - n_logits
        for row, p in enumerate(range(self._first, len(self.tokens))):
            answer = self.answer(p)
            self.rows[row, self.winner[row]] = 0.0
            self.rows[row, answer], self.winner[row] = 50.0, answer
        until = t0 + interpolate(self.seconds, len(tokens), self.known)
        while time.perf_counter() < until:  # the device's time, waited out as a CUDA sync spins
            pass
        self.llama_seconds += time.perf_counter() - t0

    def answer(self, p: int) -> int:
        """The token after position p (p + 1 tokens of context)."""
        t = self.text[p + 1] if p + 1 < len(self.text) else 7
        if self.agree < 1.0 and random.Random(p).random() > self.agree:
            t = (t * 31 + 1) % N_VOCAB
        return t

    def argmax_only(self, on: bool) -> None:
        self.tokens_only = on

    def logits(self, j: int) -> np.ndarray:
        assert not self.tokens_only
        return self.rows[j]

    def argmax(self, j: int) -> int:
        self.reads += 1
        if self.tokens_only and self.graph_argmax:  # llama_get_sampled_token_ith: one int from the device
            t0 = time.perf_counter()
            t = self.winner[j]
            self.llama_seconds += time.perf_counter() - t0
            return t
        return int(np.argmax(self.rows[j]))

    def truncate(self, n: int) -> None:
        del self.tokens[n:]

    def is_eog(self, t: int) -> bool:
        return False

    def piece(self, t: int) -> bytes:
        return b" w%d" % t

    def detokenize(self, tokens) -> str:
        return "".join(f" w{t}" for t in tokens)


def turn_at_costs(name: str, k: int, prompt, text, target_curve, draft_step: float, tokens: int,
                  graph_argmax: bool = True):
    """One reply of `drafter` over fresh stand-ins: (its stats, its rounds, the rows it read)."""
    target = StandIn(text, target_curve, graph_argmax=graph_argmax)
    draft = StandIn(text, {1: draft_step, 2: draft_step * 1.1}, agree=0.7, graph_argmax=graph_argmax)
    drafters = Drafters(lambda: draft, SamplingParams())
    engine = Engine(target, drafters.get(name), k=k, costs=drafters.costs,
                    llama_clock=lambda: target.llama_seconds + draft.llama_seconds)
    turn = engine.generate(prompt, tokens)
    return turn.stats, len(turn.rounds), target.reads + draft.reads


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=512, help="reply length per drafter")
    ap.add_argument("--costs", default=str(ROOT / "docs" / "measurements" / "h200-curves-2026-11-30.json"))
    ap.add_argument("--repeat", type=int, default=5, help="replies per drafter (medians are shown: the CPU is noisy)")
    ap.add_argument("--no-wait", action="store_true", help="stand-ins answer at once: specchat's time with nothing between")
    ap.add_argument("--host-argmax", action="store_true", help="scan every row read on the host (the CPU's way)")
    args = ap.parse_args()
    costs = probe_costs(json.loads(Path(args.costs).read_text()), "target", "draft", args.costs)
    target_curve, draft_step = costs.points, costs.draft_step
    if args.no_wait:
        target_curve, draft_step = {n: 0.0 for n in target_curve}, 0.0
    prompt, reply = script(0, 600, args.tokens + 64)
    text = prompt + reply
    row = random_rows()[0]
    per_row = min(timeit.repeat(lambda: np.argmax(row), number=200, repeat=5)) / 200
    print(f"stand-ins at {Path(args.costs).name}: a target step {target_curve[1] * 1e3:.2f} ms, "
          f"a draft step {draft_step * 1e3:.2f} ms; {args.tokens} tokens per drafter; "
          f"the argmax of one row here {per_row * 1e6:.1f} µs, taken "
          f"{'on the host' if args.host_argmax else 'in the graph (on the device)'}\n")
    print(f"{'drafter':>10} {'tok/s':>7} {'α':>6} {'rounds':>6} {'rows read/round':>15} {'specchat µs/round':>18} "
          f"{'share of decode':>16}   (medians of {args.repeat})")
    for name, k in (("off", 1), ("ngram", 16), ("draft", 4), ("auto", 16)):
        runs = [turn_at_costs(name, k, prompt, text, target_curve, draft_step, args.tokens, not args.host_argmax)
                for _ in range(args.repeat)]
        own = [(s.t_decode - s.t_llama) / rounds for s, rounds, _ in runs]
        share = [(s.t_decode - s.t_llama) / s.t_decode for s, _, _ in runs]
        s, rounds, reads = runs[0]
        print(f"{name:>10} {median(s.tok_s for s, _, _ in runs):7.1f} {s.alpha:6.2f} {rounds:6d} {reads / rounds:15.1f} "
              f"{median(own) * 1e6:18.0f} {median(share) * 100:15.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
