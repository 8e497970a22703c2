"""Filling a llama_batch: the target's decodes (llama.py) and the MTP head's (mtp.py)."""

from __future__ import annotations

from collections.abc import Sequence


def fill(b, tokens: Sequence[int], pos0: int, logits_from: int) -> None:
    """Put tokens in a llama_batch at positions pos0 on, one sequence, with
    logits for those from index `logits_from` on."""
    b.n_tokens = len(tokens)
    for i, t in enumerate(tokens):
        b.token[i] = t
        b.pos[i] = pos0 + i
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = 0
        b.logits[i] = i >= logits_from
