"""Hybrid: the n-gram drafter when it has a strong match, else the draft model.
While a constraint is on, the tokens the grammar forces come first, and the
n-gram match or the draft model continues after them.

Each draft records which of them proposed it (and how many leading tokens
the grammar forced), so the UI can colour their accepted tokens apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from specchat.drafters.base import Draft, Drafter, DraftModelPart, GrammarPart, NgramPart

if TYPE_CHECKING:
    import numpy as np


class HybridDrafter(Drafter):
    name = "hybrid"

    def __init__(self, ngram: NgramPart, model: DraftModelPart, grammar: GrammarPart | None = None) -> None:
        super().__init__()
        self.ngram, self.model, self.grammar = ngram, model, grammar

    def begin(self, context: Sequence[int]) -> None:
        self.ngram.begin(context)
        self.model.begin(context)

    def propose(self, context: Sequence[int], k: int) -> Draft:
        forced = self.grammar.propose(context, k) if self.grammar is not None else Draft()
        if self.grammar is None or not forced.tokens:
            draft = self.ngram.propose(context, k)
            return draft if draft.tokens else self.model.propose(context, k)
        if len(forced) >= k or self.grammar.constraint.ends:
            return forced
        rest = k - len(forced)
        after = self.ngram.propose(context, rest, pending=forced.tokens)
        if not after.tokens:
            after = self.model.propose(list(context) + forced.tokens, rest, pending=forced.tokens)
        # A forced token is certain: its q is one-hot, which None says (see Draft).
        certain: list[np.ndarray | None] = [None] * len(forced)
        q = None if after.q is None else certain + after.q
        return Draft(forced.tokens + after.tokens, q, source=after.source, forced=len(forced))

    def settle(self, draft: Draft, n_accepted: int) -> None:
        super().settle(draft, n_accepted)
        inner = {d.name: d for d in (self.ngram, self.model, self.grammar) if d is not None}[draft.source]
        inner.settle(draft, n_accepted)

    def observe(self, committed: Sequence[int]) -> None:
        self.ngram.observe(committed)
        self.model.observe(committed)

    def close(self) -> None:
        self.model.close()
