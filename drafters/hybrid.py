"""Hybrid: the strongest copy, else the draft model. The copy is the
conversation's n-gram match or the memory's, whichever is longer (the
memory's only when long enough to draft, memory.budget). While a constraint
is on, the tokens the grammar forces come first, and the copy or the draft
model continues after them.

Each draft records which of them proposed it (and how many leading tokens
the grammar forced), so the UI can colour their accepted tokens apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from specchat.drafters.base import Draft, Drafter, DraftModelPart, GrammarPart, MemoryPart, NgramPart
from specchat.drafters.memory import stronger_copy

if TYPE_CHECKING:
    import numpy as np


class HybridDrafter(Drafter):
    name = "hybrid"

    def __init__(
        self,
        ngram: NgramPart,
        model: DraftModelPart,
        grammar: GrammarPart | None = None,
        memory: MemoryPart | None = None,
    ) -> None:
        super().__init__()
        self.ngram, self.model, self.grammar, self.memory = ngram, model, grammar, memory

    def begin(self, context: Sequence[int]) -> None:
        self.ngram.begin(context)
        if self.memory is not None:
            self.memory.absorb()
        self.model.begin(context)

    def propose(self, context: Sequence[int], k: int) -> Draft:
        forced = self.grammar.propose(context, k) if self.grammar is not None else Draft()
        if self.grammar is None or not forced.tokens:
            draft = self._copy(context, k)
            return draft if draft.tokens else self.model.propose(context, k)
        if len(forced) >= k or self.grammar.constraint.ends:
            return forced
        rest = k - len(forced)
        after = self._copy(context, rest, pending=forced.tokens)
        if not after.tokens:
            after = self.model.propose(list(context) + forced.tokens, rest, pending=forced.tokens)
        # A forced token is certain: its q is one-hot, which None says (see Draft).
        certain: list[np.ndarray | None] = [None] * len(forced)
        q = None if after.q is None else certain + after.q
        return Draft(forced.tokens + after.tokens, q, source=after.source, forced=len(forced))

    def _copy(self, context: Sequence[int], k: int, pending: Sequence[int] = ()) -> Draft:
        return stronger_copy(self.ngram, self.memory, context, k, pending)

    def settle(self, draft: Draft, n_accepted: int) -> None:
        super().settle(draft, n_accepted)
        inner = {d.name: d for d in (self.ngram, self.model, self.grammar) if d is not None}.get(draft.source)
        if inner is not None:  # a memory draft settles nothing: the memory learns no rates
            inner.settle(draft, n_accepted)

    def observe(self, committed: Sequence[int]) -> None:
        self.ngram.observe(committed)
        self.model.observe(committed)

    def close(self) -> None:
        self.model.close()
