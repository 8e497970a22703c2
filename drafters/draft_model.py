"""Drafting with a small model that shares the target's tokenizer.

The draft model runs in its own llama.cpp context. Before each proposal it
syncs its KV cache to the committed tokens (feeding only what it lacks),
then decodes k tokens one at a time: greedy, or sampled with the same chain
as the target, keeping each q row for exact acceptance.

A short catch-up (the usual one to three tokens after a verify) is fed one
token at a time, so every decode the draft model sees has the same shape
and a GPU keeps replaying its CUDA graph; a long one goes in one batch. Its
cost per token is measured, for auto to price falling behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from specchat.decoding import kvcache
from specchat.decoding.constraint import Constraint
from specchat.decoding.sampling import SamplingParams, probs, sample
from specchat.drafters.base import Draft, Drafter

if TYPE_CHECKING:
    from specchat.decoding.target import DraftingModel

SINGLE_STEP_CATCH_UP = 4  # catch-ups this short are fed token by token


class DraftModelDrafter(Drafter):
    name = "draft"

    def __init__(
        self,
        load: Callable[[], DraftingModel],
        sampling: SamplingParams = SamplingParams(),
        constraint: Constraint | None = None,
    ) -> None:
        super().__init__()
        self._load = load  # the model loads on first use
        self.constraint = constraint  # while on, greedy drafts take the grammar's best token
        self._model: DraftingModel | None = None
        self.sampling = sampling
        self.rng = np.random.default_rng(sampling.seed + 1)
        self.seconds_per_token: float | None = None  # drafting time of the last proposal, sync excluded
        self.sync_per_token: float | None = None  # seconds per token of the last batched catch-up
        self._synced = 0  # context length at the last sync

    @property
    def model(self) -> DraftingModel:
        """The draft model, loaded on first use."""
        if self._model is None:
            self._model = self._load()
        return self._model

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def begin(self, context: Sequence[int]) -> None:
        """Prefill the draft model with the prompt now, outside the timed rounds."""
        self._sync(self.model, context)

    def propose(self, context: Sequence[int], k: int, pending: Sequence[int] = ()) -> Draft:
        """Up to k tokens after `context`, whose last tokens `pending` were
        proposed by another drafter (hybrid) and are not committed yet."""
        if k <= 0:
            return Draft(source=self.name)
        m = self.model
        self._sync(m, context, len(pending))
        t0 = time.perf_counter()
        # Under a constraint: greedy drafts take the best allowed token (cheap);
        # a sampled draft ends before a token the grammar refuses.
        g = self.constraint.state_after(pending) if self.constraint is not None and self.constraint.on else None
        tokens: list[int] = []
        qs: list[np.ndarray | None] = []  # one row per sampled token; none when greedy (q is one-hot)
        for i in range(k):
            if self.sampling.greedy:
                t = m.argmax(0) if g is None else g.argmax(m.logits(0))
            else:
                q = probs(m.logits(0), self.sampling)
                t = sample(q, self.rng)
                if g is not None and not m.is_eog(t) and not g.allowed(np.array([t], dtype=np.int32))[0]:
                    break
                qs.append(q)
            tokens.append(t)
            if m.is_eog(t) or len(m.tokens) + 1 >= m.n_ctx:
                break
            if g is not None:
                g.accept(t)
            if i < k - 1:
                m.eval([t], n_logits=1)
        if tokens:
            self.seconds_per_token = (time.perf_counter() - t0) / len(tokens)
        return Draft(tokens=tokens, q=None if self.sampling.greedy else qs, source=self.name)

    def catch_up_cost(self, context: Sequence[int]) -> float:
        """Estimated seconds to feed the tokens the model has not seen yet."""
        behind = len(context) - self._synced
        if behind <= SINGLE_STEP_CATCH_UP:
            return behind * (self.seconds_per_token or 0.0)
        return behind * (self.sync_per_token or self.seconds_per_token or 0.0)

    def _sync(self, m, context: Sequence[int], n_pending: int = 0) -> None:
        """Make the draft KV hold exactly `context`, with logits for its last
        position (the draft model reads pending tokens like committed ones)."""
        t0 = time.perf_counter()
        m.argmax_only(self.sampling.greedy and not (self.constraint is not None and self.constraint.on))
        fed = kvcache.sync(m, context, logits=True, one_by_one=SINGLE_STEP_CATCH_UP)
        if fed > SINGLE_STEP_CATCH_UP:
            self.sync_per_token = (time.perf_counter() - t0) / fed
        self._synced = len(context)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
        self._model = None
