"""Drafting with the MTP (NextN) head a target ships (Qwen3.5, GLM-4.5, MiMo).

The head is a layer or two trained beside the trunk: from the target's
hidden state at one position and the next token, it predicts the token
after. It drafts like a draft model (draft_model.py: greedy, or sampled with
its q rows kept for exact acceptance, a grammar followed), but it reads the
target's own state, so it needs no second model, no second tokenizer and
almost no memory, and it follows the target closely where a small model
would not.

Before each proposal the head catches up with the committed tokens, paired
with the hidden states the target computed for them (llamacpp/mtp.py), in
one decode. Its rows for the last proposal's drafts read its own guesses,
so they go first. A token another drafter proposed and the target has not
judged yet (hybrid: the grammar's forced run) is chained like a draft.
Models with several heads draft with the first one, step after step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from specchat.decoding.constraint import Constraint
from specchat.decoding.sampling import SamplingParams
from specchat.decoding.stats import common_prefix
from specchat.drafters.draft_model import DraftModelDrafter

if TYPE_CHECKING:
    from specchat.decoding.target import MtpHeadModel


class MtpDrafter(DraftModelDrafter):
    name = "mtp"

    def __init__(
        self,
        load: Callable[[], MtpHeadModel],
        sampling: SamplingParams = SamplingParams(),
        constraint: Constraint | None = None,
    ) -> None:
        super().__init__(load, sampling, constraint)

    def _sync(self, head: MtpHeadModel, context: Sequence[int], n_pending: int = 0) -> None:  # type: ignore[override]
        """Feed the head the committed tokens it lacks, re-feeding the last
        one for a fresh output row (the target holds all but that token),
        then chain the pending ones."""
        t0 = time.perf_counter()
        committed = len(context) - n_pending
        keep = min(common_prefix(head.tokens[: head.followed], context[:committed]), committed - 1)
        head.truncate(keep)
        head.follow(context[keep:committed])
        head.eval(context[committed:])
        self.sync_per_token = (time.perf_counter() - t0) / (len(context) - keep)
        self._synced = len(context)
