"""The n-gram drafter's text copies, on the real 135M tokenizer: a reply that
spells the text it quotes with other tokens (a joined line, a break glued to
a word) is drafted from the text, and auto prices those copies on their own."""

from __future__ import annotations

import pytest

from specchat.decoding.costmodel import CostModel
from specchat.drafters.auto import LINE_PRIOR, AutoDrafter, copy_rates
from specchat.drafters.ngram import NgramDrafter
from specchat.drafters.textcopy import TextCopy
from specchat.llamacpp.llama import Model
from specchat.session.chat import TargetSpelling

pytestmark = pytest.mark.real

REPORT = (
    "Report.\n\nThroughput rose over the quarter, driven by the\n"
    "second packing line that came online in week three. Scrap fell\n"
    "after the die change on the old press. Overtime hours rose in\n"
    "weeks six to nine while the night shift was short.\n\n"
)


@pytest.fixture(scope="module")
def spelling(tiny_pair):
    model = Model(tiny_pair[0], n_ctx=512, n_threads=1, n_gpu_layers=0)
    yield TargetSpelling(model)
    model.close()


def conversation(spelling, reply: str) -> list[int]:
    return spelling.tokenize(REPORT) + spelling.tokenize("- " + reply)


def text(spelling, tokens: list[int]) -> str:
    return "".join(spelling.piece(t) for t in tokens)


def test_a_line_quoted_as_one_is_copied_from_the_text_where_its_tokens_part(spelling):
    context = conversation(spelling, "Throughput rose over the quarter, driven by the second")
    d = NgramDrafter(spelling=spelling)
    d.begin(context)
    assert d.lookup(context) is None  # " second" follows no token of the text: "\nsecond" is two others
    match, tokens = d.text_copy(context, 8)
    assert text(spelling, tokens).startswith(" packing line that came online")
    assert match >= 12  # "driven by the second" and more, in tokens of about four characters
    assert d.text.joining is True  # the reply joined the line the text broke
    assert d.joins == spelling.tokenize("\n")[0]  # and the copies of tokens join lines from now on
    assert text(spelling, d.propose(context, 6).tokens) == text(spelling, tokens[:6])  # ngram drafts it too


def test_a_joined_line_is_written_as_a_space_in_later_text_copies(spelling):
    context = conversation(spelling, "after the die change on the old press. Overtime hours rose")
    d = NgramDrafter(spelling=spelling)
    d.begin(context)
    _, tokens = d.text_copy(context, 12)
    assert d.text.joining is None and text(spelling, tokens).startswith(" in\nweeks six")  # no join seen: kept
    d.text.joining = True  # as where a reply joined one before
    _, tokens = d.text_copy(context, 12)
    assert text(spelling, tokens).startswith(" in weeks six to nine while the")


def test_no_text_copy_where_the_reply_broke_off_or_matches_too_little(spelling):
    d = NgramDrafter(spelling=spelling)
    broke = conversation(spelling, "Throughput rose over the quarter,\n")  # a new line where the text goes on
    d.begin(broke)
    assert d.text_copy(broke, 8) is None
    short = conversation(spelling, "and then Scrap")  # "then Scrap" is nowhere in the text
    d.begin(short)
    assert d.text_copy(short, 8) is None
    assert NgramDrafter().text_copy(short, 8) is None  # no tokenizer: no text


def test_a_line_that_starts_as_one_sentence_of_the_text_copies_it(spelling):
    d = NgramDrafter(spelling=spelling)
    for reply, copied in (("Scrap", " fell\nafter the die"), ("Overtime", " hours rose in\nweeks")):
        context = conversation(spelling, reply)  # a bullet: its first word is spelled with other tokens
        d.begin(context)
        match, tokens = d.text_copy(context, 8)
        assert match == 0 and text(spelling, tokens).startswith(copied)  # length 0: a line's start
    for reply in ("quarter", "Scra"):  # the text runs "quarter" on mid-sentence; "Scra" is too little
        context = conversation(spelling, reply)
        d.begin(context)
        assert d.text_copy(context, 8) is None
    twice = spelling.tokenize("Scrap fell. Scrap rose.\n\n- Scrap")  # two sentences start so: no copy
    d.begin(twice)
    assert d.text_copy(twice, 8) is None


def test_the_text_follows_an_edited_conversation(spelling):
    copy = TextCopy(spelling)
    copy.extend(spelling.tokenize("one  two\n\nthree"))
    assert "".join(copy.flat) == "one two three" and "".join(copy.raw) == "one  two\n\nthree"
    d = NgramDrafter(spelling=spelling)
    d.begin(spelling.tokenize("first words"))
    d.begin(spelling.tokenize("other words"))  # not a continuation: the index and the text start again
    assert "".join(d.text.raw) == "other words"


def test_auto_prices_text_copies_on_their_own_estimate(spelling):
    context = conversation(spelling, "Throughput rose over the quarter, driven by the second")
    costs = CostModel.from_points({1: 1.0, 2: 1.2, 4: 1.5, 8: 2.0, 17: 3.0, 65: 8.0})  # verifying is cheap
    auto = AutoDrafter(NgramDrafter(spelling=spelling), None, costs)
    auto.begin(context)
    draft = auto.propose(context, 16)
    assert draft.source == "ngram" and text(spelling, draft.tokens).startswith(" packing line")
    estimate = auto._last
    assert estimate is auto.text_acc[min(auto.ngram.text_copy(context, 16)[0], 16)]
    before = estimate.rate(0)
    auto.settle(draft, 0)  # rejected at once: text copies pay less here, token copies are untouched
    assert estimate.rate(0) < before
    assert auto.ngram_acc[16].rate(0) == pytest.approx(copy_rates()[16].rate(0))  # the prior still


def test_auto_prices_a_copy_from_a_line_start_on_its_own_estimate(spelling):
    context = conversation(spelling, "Scrap")
    costs = CostModel.from_points({1: 1.0, 2: 1.2, 4: 1.5, 8: 2.0, 17: 3.0, 65: 8.0})
    auto = AutoDrafter(NgramDrafter(spelling=spelling), None, costs)
    auto.begin(context)
    draft = auto.propose(context, 16)
    assert draft.source == "ngram" and text(spelling, draft.tokens).startswith(" fell\nafter the die change")
    assert auto._last is auto.text_acc[0] and auto.text_acc[0].rate(0) == pytest.approx(LINE_PRIOR)
    auto.settle(draft, 2)
    assert auto.text_acc[0].rate(0) < LINE_PRIOR and auto.text_acc[4].rate(0) == pytest.approx(copy_rates()[4].rate(0))


def test_a_bullet_at_a_sentence_end_is_not_learned_as_an_edit(spelling):
    # The text's "three. Scrap" quoted as "three.\n- Scrap": punctuation and layout, not a renamed word.
    context = conversation(spelling, "line that came online in week three.\n- Scrap fell\nafter the die")
    d = NgramDrafter(spelling=spelling)
    d.begin(context)
    d.lookup(context)
    assert d.edits == {}
    # A renamed word is still learned: "old press" quoted as "new press".
    renamed = conversation(spelling, "after the die change on the new press. Overtime hours rose in")
    d.begin(renamed)
    d.lookup(renamed)
    assert [(text(spelling, a), text(spelling, b)) for a, b in d.edits.items()] == [(" old", " new")]


@pytest.fixture(scope="module")
def qwen_spelling(default_pair):
    model = Model(default_pair[0], n_ctx=256, n_threads=1, n_gpu_layers=0)
    yield TargetSpelling(model)
    model.close()


def test_a_break_glued_to_a_word_is_joined_once_replies_join_lines(qwen_spelling):
    spelling = qwen_spelling  # the default pair's tokenizer glues a break to what precedes it: "%\n", ",\n"
    copy = TextCopy(spelling)
    tokens = spelling.tokenize("rose 4.2%\nafter the die change,\n42,000 in all\n\nNext")
    glued = [t for t in tokens if "\n" in spelling.piece(t) and spelling.piece(t) != "\n"]
    assert glued  # this tokenizer glues some breaks to what precedes them
    kept, respelled = copy.respell(tokens)
    assert text(spelling, respelled).startswith("rose 4.2% after the die change, 42,000 in all")
    assert text(spelling, respelled[:kept]) == text(spelling, tokens[:kept]) and kept < len(tokens)
    assert len(respelled) <= len(tokens)
    plain = spelling.tokenize("no break here")
    assert copy.respell(plain) == (len(plain), plain)


def test_a_reply_that_restates_the_request_is_never_drafted_past_the_template(spelling):
    """The request copied from its start: the copy (by tokens and by text)
    stops where the user's message ends, never drafting the template's turn
    end and the next role's header ("<|im_end|>\\n<|im_start|>assistant")."""
    request = "Why does the sky look blue on a clear day, and red at sunset?"
    prompt = f"<|im_start|>user\n{request}<|im_end|>\n<|im_start|>assistant\n"
    context = spelling.target.tokenize(prompt, special=True) + spelling.tokenize("Why does the sky look blue")
    d = NgramDrafter(spelling=spelling)
    d.begin(context)
    draft = d.propose(context, 32)
    assert text(spelling, draft.tokens) == " on a clear day, and red at sunset?"
    assert all(spelling.piece(t) for t in draft.tokens)  # no token of the template's
    restated = spelling.tokenize(" Why does the sky look blue on a clear")  # spelled with other tokens: a text copy
    context = spelling.target.tokenize(prompt, special=True) + restated
    d.begin(context)
    copied = d.text_copy(context, 32)
    assert copied is not None and text(spelling, copied[1]) == " day, and red at sunset?"


def test_a_reply_never_starts_by_copying_how_the_last_one_started(spelling):
    """A second turn's reply follows the same role header as the first: a
    match through the header is the template's, not the reply's, so the
    n-gram drafter drafts nothing there, and once the reply has written a
    few tokens of its own a match counts only those."""
    model = spelling.target
    first = "Superposition is a fundamental concept in quantum mechanics."
    messages = [{"role": "user", "content": "What is superposition?"}, {"role": "assistant", "content": first}]
    context = model.tokenize(model.apply_template([*messages, {"role": "user", "content": "Is that right?"}]))
    d = NgramDrafter(spelling=spelling)
    d.begin(context)
    assert d.lookup(context) is None and d.propose(context, 8).tokens == []
    reply = spelling.tokenize(" I think a fundamental concept in")
    d.observe(reply)
    found = d.lookup([*context, *reply])
    assert found is not None and found[1] <= len(reply)
    assert text(spelling, d.continuation(found[0], 3)).startswith(" quantum")
