"""Hybrid: the n-gram drafter when it has a strong match, else the draft model.

Each draft records which of the two proposed it, so the UI can colour
n-gram-accepted and model-accepted tokens apart.
"""

from __future__ import annotations

from typing import Sequence

from specchat.drafters.base import Draft, Drafter
from specchat.drafters.draft_model import DraftModelDrafter
from specchat.drafters.ngram import NgramDrafter


class HybridDrafter(Drafter):
    name = "hybrid"

    def __init__(self, ngram: NgramDrafter, model: DraftModelDrafter) -> None:
        super().__init__()
        self.ngram, self.model = ngram, model

    def begin(self, context: Sequence[int]) -> None:
        self.ngram.begin(context)
        self.model.begin(context)

    def propose(self, context: Sequence[int], k: int) -> Draft:
        draft = self.ngram.propose(context, k)
        return draft if draft.tokens else self.model.propose(context, k)

    def settle(self, draft: Draft, n_accepted: int) -> None:
        super().settle(draft, n_accepted)
        inner = self.ngram if draft.source == self.ngram.name else self.model
        inner.settle(draft, n_accepted)

    def observe(self, committed: Sequence[int]) -> None:
        self.ngram.observe(committed)
        self.model.observe(committed)

    def close(self) -> None:
        self.model.close()
