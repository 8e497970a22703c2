"""What a model's KV cache holds, and how to make it hold a context: keep
what it already shares with the context, roll back the rest, and feed only
what it lacks. The engine prefills the target this way and the draft model
catches up this way; both models keep the list of tokens their cache holds
(`model.tokens`, see llama.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from specchat.decoding.stats import common_prefix


def sync(model, tokens: Sequence[int], *, logits: bool, one_by_one: int = 0) -> int:
    """Make the cache hold exactly `tokens`. With `logits`, the last token is
    (re-)fed so its logits row is fresh. Up to `one_by_one` tokens are fed as
    single-token decodes (one decode shape, so a GPU keeps its CUDA graph);
    more go in one batch. Returns how many tokens were fed."""
    keep = common_prefix(model.tokens, tokens[:-1] if logits else tokens)
    model.truncate(keep)
    keep = len(model.tokens)  # a recurrent state that could not roll back that far starts over
    todo = list(tokens[keep:])
    if len(todo) <= one_by_one:
        for t in todo:
            model.eval([t], n_logits=1)
    elif todo:
        model.eval(todo, n_logits=1 if logits else 0)
    return len(todo)
