"""The counting rule of a llama.cpp server's running totals, on sequences of
totals (no server): accepted drafts are spent on the round's tokens."""

from __future__ import annotations


def test_totals_spend_accepted_drafts_on_the_rounds_tokens():
    from specchat.server.counts import Totals

    t = Totals()
    # A round drafting 3 with 2 accepted: its counters come with its first token, then 2 more tokens.
    seq = [("a", 1, 0, 0), ("b", 2, 3, 2), ("c", 3, 3, 2), ("d", 4, 3, 2), ("e", 5, 3, 2), ("f", 6, 6, 2)]
    chunks = [t.chunk(text, {"predicted_n": p, "draft_n": d, "draft_n_accepted": a}) for text, p, d, a in seq]
    assert [c.kind for c in chunks] == ["target", "accepted", "accepted", "target", "target", "target"]
    assert (t.rounds, t.exact, t.accepted, t.drafted) == (2, True, 2, 6)
    # Two tokens in one chunk, one of them accepted: the chunk stays plain and α is not given.
    t2 = Totals()
    mixed = t2.chunk("xy", {"predicted_n": 2, "draft_n": 4, "draft_n_accepted": 1})
    assert (mixed.tokens, mixed.accepted, mixed.kind, t2.exact) == (2, 1, "target", False)
