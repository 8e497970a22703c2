"""The n-gram index against a brute-force reference, and its proposal rules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from specchat.drafters.ngram import CANDIDATES, MAX_EXTEND, NgramDrafter


def brute_lookup(tokens: list[int], n_min: int, n_max: int):
    """Scan everything: of the latest CANDIDATES earlier occurrences of the
    longest suffix n-gram, the one whose match reaches furthest back (ties:
    the latest)."""
    size = len(tokens)
    for n in range(min(n_max, size), n_min - 1, -1):
        suffix = tokens[size - n :]
        starts = [j for j in range(n, size) if tokens[j - n : j] == suffix]
        if starts:
            best = None
            for start in reversed(starts[-CANDIDATES:]):
                match = n
                while (
                    match < n_max + MAX_EXTEND
                    and start - match - 1 >= 0
                    and size - match - 1 > start - match - 1
                    and tokens[size - match - 1] == tokens[start - match - 1]
                ):
                    match += 1
                if best is None or match > best[1]:
                    best = (start, match)
            return best[0], best[1], len(starts)
    return None


@settings(max_examples=300, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 3), min_size=1, max_size=80),
    cuts=st.lists(st.integers(1, 10), max_size=10),
)
def test_incremental_index_matches_brute_force(tokens, cuts):
    d = NgramDrafter(n_min=2, n_max=4)
    d.begin(tokens[:1])
    i = 1
    for c in cuts + [len(tokens)]:  # feed the rest in chunks, as rounds commit them
        d.observe(tokens[i : i + c])
        i += c
        # After every chunk, the index answers exactly what a full scan would.
        assert d.tokens == tokens[: len(d.tokens)]
        assert d.lookup(d.tokens) == brute_lookup(d.tokens, 2, 4)
    assert d.tokens == tokens


@settings(max_examples=200, deadline=None)
@given(tokens=st.lists(st.integers(0, 5), min_size=2, max_size=60), k=st.integers(1, 16))
def test_a_proposal_copies_the_continuation_and_respects_k(tokens, k):
    d = NgramDrafter(n_min=2, n_max=4, min_match=3)
    d.begin(tokens)
    draft = d.propose(tokens, k)
    hit = brute_lookup(tokens, 2, 4)
    if hit is None or hit[1] < 3:
        assert draft.tokens == []  # weak evidence: no draft
    else:
        start, match, seen = hit
        assert 0 < len(draft.tokens) <= k
        # A copy that reaches the end of the conversation goes on through itself.
        grown = tokens + draft.tokens
        assert draft.tokens == grown[start : start + len(draft.tokens)]


def test_a_loop_of_one_token_still_drafts_k():
    tokens = [7, 8] + [5] * 12
    d = NgramDrafter()
    d.begin(tokens)
    assert d.propose(tokens, 16).tokens == [5] * 16


def test_a_repeated_line_is_copied_across_its_own_end():
    line = [10, 11, 12, 13, 14]  # a table row, say, repeated as the reply goes on
    tokens = [1, 2] + line * 3 + line[:2]
    d = NgramDrafter()
    d.begin(tokens)
    assert d.propose(tokens, 12).tokens == (line[2:] + line * 3)[:12]


def test_the_sighting_with_the_longest_match_wins():
    line = [1, 2, 3, 4, 10, 11, 12, 13]
    # "10 11 12 13" appears twice (→ 50, then → 60); the context copies `line`,
    # whose first sighting matches 8 tokens back, the later one only 4.
    tokens = line + [50] + [8, 9, 10, 11, 12, 13] + [60] + [99] + line
    d = NgramDrafter(n_min=2, n_max=4, min_match=3)
    d.begin(tokens)
    assert d.lookup(tokens) == (8, 8, 2)
    assert d.propose(tokens, 1).tokens == [50]


def test_an_edited_conversation_rebuilds_the_index():
    d = NgramDrafter()
    d.begin([1, 2, 3, 4, 1, 2, 3])
    d.begin([9, 9, 9, 1, 2])  # not an extension: start over
    assert d.tokens == [9, 9, 9, 1, 2]
    assert d.lookup([9, 9, 9, 1, 2]) is None


def test_catch_up_indexes_only_what_the_index_lacks():
    """What auto asks of the n-gram drafter before it looks a context up."""
    d = NgramDrafter()
    d.begin([5, 6, 7, 8])
    d.catch_up([5, 6, 7, 8, 9, 5, 6, 7])  # the rounds since committed 9, 5, 6, 7
    assert d.tokens == [5, 6, 7, 8, 9, 5, 6, 7]
    assert d.lookup(d.tokens) == (3, 3, 1)  # "5 6 7" was followed by 8, at index 3
    assert d.continuation(3, 4) == [8, 9, 5, 6]
    d.catch_up(d.tokens)  # nothing new: the index stays as it is
    assert d.tokens == [5, 6, 7, 8, 9, 5, 6, 7] and d.index[(5, 6, 7)] == ([3], 1)
