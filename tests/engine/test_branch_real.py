"""A reply asked again in a branch, on the default pair at temperature 0.7:
the memory holds the first branch's reply, so the new branch drafts from
its sibling, with α at least twice the n-gram drafter's on the same branch
(which has only the question to copy from)."""

from __future__ import annotations

import pytest

from specchat.decoding.sampling import SamplingParams
from specchat.session.loader import open_session
from specchat.session.options import DecodeOptions, LoadOptions

pytestmark = pytest.mark.real

QUESTION = "Write a Python function that checks whether a string is a palindrome, with a docstring."


def test_a_branch_asked_again_drafts_from_its_sibling(default_pair):
    target, draft = map(str, default_pair)
    s = open_session(
        LoadOptions(target=target, draft=draft, ctx=2048),
        DecodeOptions(drafter="memory", k=32, sampling=SamplingParams(temp=0.7, seed=11), max_tokens=160),
    )
    try:
        s.memory_owner = "first branch"
        first = s.reply(QUESTION)
        alphas = {}
        for drafter in ("memory", "ngram"):
            s.replace_messages([])  # the branch: what came before the question (nothing), then the question again
            s.set_drafter(drafter)
            s.memory_owner = f"{drafter} branch"
            turn = s.reply(QUESTION)
            assert turn.stats.tokens > 40, drafter
            alphas[drafter] = turn.stats.alpha
    finally:
        s.close()
    assert first.stats.tokens > 40
    assert alphas["memory"] >= 2 * alphas["ngram"], alphas
