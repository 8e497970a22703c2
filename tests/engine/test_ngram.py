"""The n-gram index against a brute-force reference, and its proposal rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specchat.drafters.ngram import CANDIDATES, MAX_EXTEND, NgramDrafter
from specchat.llamacpp.llama import Model
from specchat.session.chat import ChatSession, TargetSpelling
from specchat.session.options import DecodeOptions


def brute_lookup(tokens: list[int], n_min: int, n_max: int):
    """Scan everything: of the latest CANDIDATES earlier occurrences of each
    suffix n-gram, the one whose match reaches furthest back (ties: the
    longer n-gram, then the latest)."""
    size = len(tokens)
    best = None
    for n in range(min(n_max, size), n_min - 1, -1):
        suffix = tokens[size - n :]
        starts = [j for j in range(n, size) if tokens[j - n : j] == suffix]
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
                best = (start, match, len(starts))
    return best


@settings(max_examples=300, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 3), min_size=1, max_size=80),
    cuts=st.lists(st.integers(1, 10), max_size=10),
)
def test_incremental_index_matches_brute_force(tokens, cuts):
    d = NgramDrafter(n_min=2, n_max=4, learn_edits=False)  # the plain index (edits: below)
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
    d = NgramDrafter(n_min=2, n_max=4, min_match=3, learn_edits=False)
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


# --- edits: a reply that changes a word of the text it copies -----------------------

ITEMS, STOCK = 50, 60  # a word of the copied text, and what the reply writes instead
FILE = [1, 2, 3, ITEMS, 4, 5, 6, 7, 8, 9, ITEMS, 10, 11, 12, 13, 14, ITEMS, 15, 16, 17, 18]


def test_a_renamed_word_is_learned_and_written_at_its_next_occurrences():
    context = FILE + [99] + [1, 2, 3, STOCK, 4, 5, 6]  # the reply renamed the first ITEMS
    plain = NgramDrafter(learn_edits=False)
    plain.begin(context)
    assert plain.lookup(context) == (7, 3, 1)
    assert plain.continuation(7, 8) == [7, 8, 9, ITEMS, 10, 11, 12, 13]  # rejected at ITEMS

    d = NgramDrafter()
    d.begin(context)
    # The match stopped at the rename, learned it, and now reads through it,
    # back to where the reply began: a longer match, so a longer draft.
    assert d.lookup(context) == (7, 7, 1)
    assert d.edits == {(ITEMS,): (STOCK,)}
    assert d.continuation(7, 14) == [7, 8, 9, STOCK, 10, 11, 12, 13, 14, STOCK, 15, 16, 17, 18]
    assert len(d.propose(context, 64).tokens) == d.budget(7, 1) == 14


def test_a_match_through_an_edit_beats_a_longer_n_gram_the_reply_wrote():
    # Two definitions share their tail; the reply renamed ITEMS in the first and
    # is now writing the second, whose name (21) tells them apart.
    file = [30, 31, 20, 1, ITEMS, 2, 3, 4, 5, 99, 21, 1, ITEMS, 2, 3, 4, 6, 99]
    reply = [30, 31, 20, 1, STOCK, 2, 3, 4, 5, 99, 21, 1, STOCK, 2, 3, 4]
    d = NgramDrafter()
    d.begin(file + [98] + reply[:8])
    d.propose(file + [98] + reply[:8], 1)  # the reply's first definition taught the edit
    assert d.edits == {(ITEMS,): (STOCK,)}
    d.observe(reply[8:])
    # "STOCK 2 3 4" occurs only in the reply's first definition (then 5); through
    # the edit, the file's second definition matches further back (then 6).
    assert d.propose(file + [98] + reply, 1).tokens == [6]
    assert NgramDrafter(learn_edits=False).propose(file + [98] + reply, 1).tokens == [5]


def test_an_inserted_token_goes_before_the_token_it_preceded_and_is_not_written_twice():
    file = [1, 2, 3, 70, 4, 5, 6, 7, 8, 3, 70, 9, 10, 11]  # "list [ Item ]" ... "[ Item"
    context = file + [99] + [1, 2, 3, 80, 70, 4, 5, 6]  # the reply wrote "[ Stock Item ]"
    d = NgramDrafter()
    d.begin(context)
    assert d.propose(context, 6).tokens == [7, 8, 3, 80, 70, 9]
    assert d.edits == {(70,): (80, 70)}
    # Copying the reply's own text, which holds the insertion already, adds nothing.
    reply_start = len(file) + 1
    assert d.continuation(reply_start, 6) == [1, 2, 3, 80, 70, 4]


def test_an_edit_the_reply_declines_is_dropped_and_one_it_keeps_stays():
    context = FILE + [99] + [1, 2, 3, STOCK, 4, 5, 6]
    for written, kept in (([7, 8, 9, STOCK, 10, 11], True), ([7, 8, 9, ITEMS], False)):
        d = NgramDrafter()
        d.begin(context)
        assert d.propose(context, 8).tokens[3] == STOCK
        d.observe(written)  # what the target committed
        assert d.edits == ({(ITEMS,): (STOCK,)} if kept else {})
        assert d.propose(context + written, 3).tokens == ([12, 13, 14] if kept else [10, 11, 12])


def test_text_that_parts_ways_for_good_learns_no_edit():
    context = FILE + [99] + [31, 32, 33, 34, 4, 5, 6]  # nothing agrees before the match
    d = NgramDrafter()
    d.begin(context)
    d.propose(context, 8)
    assert d.edits == {}


def test_an_edited_conversation_forgets_its_edits():
    context = FILE + [99] + [1, 2, 3, STOCK, 4, 5, 6]
    d = NgramDrafter()
    d.begin(context)
    d.propose(context, 4)
    d.begin([5, 5])
    assert d.edits == {}


# --- joined lines: a reply that reflows the hard-wrapped text it copies -------------

NL = 5  # a line break
SPACED = {10: 110, 11: 111, 12: 112}  # a word -> the one token that reads as a space and it


def test_a_reply_that_joins_a_line_has_every_line_joined_in_its_copies():
    file = [1, 2, 3, NL, 10, 4, 6, 7, 8, NL, 11, 9, 13, NL, 12, 14, 15, NL, 9, 16]
    context = file + [99] + [1, 2, 3, SPACED[10], 4, 6, 7]  # the reply wrote " 10" where the text broke the line
    d = NgramDrafter(respace=SPACED.get)
    d.begin(context)
    # The match reads through the joined line, back to where the reply began.
    assert d.lookup(context) == (8, 7, 1) and d.joins == NL and d.edits == {}
    # Every later break before a word is joined: a word with no spaced token (9) keeps its break.
    assert d.continuation(8, 12) == [8, SPACED[11], 9, 13, SPACED[12], 14, 15, NL, 9, 16, 99, 1]
    plain = NgramDrafter(learn_edits=False, respace=SPACED.get)
    plain.begin(context)
    assert plain.lookup(context) == (8, 3, 1) and plain.continuation(8, 3) == [8, NL, 11]


def test_a_reply_that_keeps_a_line_break_turns_joining_off():
    file = [1, 2, 3, NL, 10, 4, 6, 7, 8, NL, 11, 9, 13]
    context = file + [99] + [1, 2, 3, SPACED[10], 4, 6, 7]
    d = NgramDrafter(respace=SPACED.get)
    d.begin(context)
    assert d.propose(context, 4).tokens == [8, SPACED[11], 9, 13]
    d.observe([8, NL])  # the reply broke the line where the text did
    assert d.joins is None
    assert d.propose(context + [8, NL], 2).tokens == [11, 9]


@pytest.mark.real
def test_the_chat_s_spelling_reads_the_target_s_tokenizer(tiny_pair):
    model = Model(tiny_pair[0], n_ctx=256, n_threads=1, n_gpu_layers=0)
    try:
        respace = TargetSpelling(model).respace
        (the,) = model.tokenize("the", special=False)
        (spaced,) = model.tokenize(" the", special=False)
        assert respace(the) == spaced != the
        assert respace(spaced) is None  # it starts with a space already
        (newline,) = model.tokenize("\n", special=False)
        assert respace(newline) is None
        session = ChatSession(model, decode=DecodeOptions("ngram", 4, max_tokens=4))  # the chat's n-gram drafter has it
        assert session.drafters.get("ngram").respace(the) == spaced
    finally:
        model.close()


def test_an_edit_a_reply_declined_is_not_learned_again():
    context = FILE + [99] + [1, 2, 3, STOCK, 4, 5, 6]
    d = NgramDrafter()
    d.begin(context)
    d.propose(context, 8)
    d.observe([7, 8, 9, ITEMS, 10, 11])  # the reply kept ITEMS where the edit wrote STOCK
    assert d.edits == {} and d.declined == {((ITEMS,), (STOCK,))}
    # The match still stops at the first rename, where the edit would be learned again.
    assert d.lookup(context + [7, 8, 9, ITEMS, 10, 11])[1] == 9 and d.edits == {}
