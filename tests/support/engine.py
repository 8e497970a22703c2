"""The engine's test helpers: a prompt, drafters that are always right or random, a KV-cache checker, the exact distribution of a second token."""

from __future__ import annotations

import numpy as np

from specchat.decoding.sampling import SamplingParams, probs
from specchat.drafters.base import Draft, Drafter
from specchat.engine.loop import Engine
from tests.support.fake_model import EOS, FakeModel

PROMPT = [5, 9, 3, 7, 5, 9, 3, 11, 2, 5, 9]


class PerfectDrafter(Drafter):
    """Knows the fake model's greedy choice."""

    name = "perfect"

    def __init__(self, model: FakeModel) -> None:
        super().__init__()
        self.model = model

    def propose(self, context, k):
        ctx, out = list(context), []
        for _ in range(k):
            t = int(np.argmax(self.model.row(ctx)))
            out.append(t)
            ctx.append(t)
        return Draft(out, source=self.name)


class RandomDrafter(Drafter):
    name = "random"

    def __init__(self, n_vocab: int, seed: int = 1) -> None:
        super().__init__()
        self.rng = np.random.default_rng(seed)
        self.n_vocab = n_vocab

    def propose(self, context, k):
        return Draft([int(t) for t in self.rng.integers(0, self.n_vocab, k)], source=self.name)


class KVChecker:
    """After every round, the KV cache holds exactly the committed tokens but the pending one."""

    def __init__(self, model: FakeModel, prompt: list[int]) -> None:
        self.model, self.committed = model, list(prompt)

    def __call__(self, r) -> None:
        self.committed += r.committed
        if not r.eos:
            assert self.model.tokens == self.committed[:-1]


def plain_tokens(seed: int = 0, max_tokens: int = 60) -> list[int]:
    model = FakeModel(seed=seed)
    return Engine(model, Drafter(), k=4).generate(PROMPT, max_tokens).tokens


def exact_second_token_distribution(model: FakeModel, sp: SamplingParams) -> np.ndarray:
    p1 = probs(model.row(PROMPT), sp)
    dist = np.zeros(model.n_vocab)
    for t1 in range(model.n_vocab):
        if p1[t1] > 0 and t1 != EOS:
            dist += p1[t1] * probs(model.row(PROMPT + [t1]), sp)
    return dist
