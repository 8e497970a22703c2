"""Every drafter that reads the conversation, on conversations hypothesis
makes up: random token streams, loops of every period, copies of earlier
text through edits (ones that remove more than they insert among them),
empty and one-token contexts, k from 0 to 64.

Each conversation is fed as the engine feeds it (engine/loop.py: begin, then
rounds of propose, settle and observe), with the conversation itself as the
target: a draft is accepted as far as it agrees with what comes next.
Whatever the stream, a drafter never raises, never drafts more than k
tokens, and drafts only ids inside the vocabulary.

The spelling below is a small made-up tokenizer (greedy longest match over
a fixed list of pieces): it isolates the text copies and joined lines from
llama.cpp, as tests/support/fake_model.py isolates the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specchat.decoding.costmodel import CostModel
from specchat.drafters.auto import AutoDrafter
from specchat.drafters.base import Draft, Drafter
from specchat.drafters.draft_model import DraftModelDrafter
from specchat.drafters.hybrid import HybridDrafter
from specchat.drafters.memory import Memory, MemoryDrafter
from specchat.drafters.ngram import RESYNC, NgramDrafter

WORDS = ["the", "cat", "sat", "x", "=", "1", "def", "ret", "Scrap", "é"]
PIECES = sorted(
    {*WORDS, *(" " + w for w in WORDS), "(", ")", ":", ".", ",", "\n", " ", "%\n", "\n\n", "- ", "1. ", "\t", '"'}
    | {c for w in WORDS for c in w}
    | {""}  # a token of the template's (a role header, a turn's end): no text of its own
)
V = len(PIECES)
NL = PIECES.index("\n")
TEMPLATE = PIECES.index("")
K = st.integers(0, 64)
EXAMPLES = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Spelling:
    """A made-up tokenizer over PIECES: what the drafters read of the target's."""

    ids = {p: i for i, p in enumerate(PIECES)}

    def piece(self, token: int) -> str:
        return PIECES[token]

    def respace(self, token: int) -> int | None:
        return self.ids.get(" " + PIECES[token])

    def tokenize(self, text: str) -> list[int]:
        out, i = [], 0
        while i < len(text):
            size = next((n for n in range(min(8, len(text) - i), 0, -1) if text[i : i + n] in self.ids), 0)
            if size == 0:
                i += 1  # a character no piece holds (none here, but a tokenizer must not stall)
                continue
            out.append(self.ids[text[i : i + size]])
            i += size
        return out


SPELLING = Spelling()


@st.composite
def conversations(draw) -> list[int]:
    """Chunks of random tokens, loops of some period, and copies of what came
    before with edits in them (spans replaced by shorter, longer or no tokens)."""
    tokens: list[int] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["random", "loop", "copy", "lines"]))
        if kind == "random" or not tokens:
            tokens += draw(st.lists(st.integers(0, V - 1), max_size=24))
        elif kind == "loop":
            period = draw(st.integers(1, 12))
            unit = draw(st.lists(st.integers(0, V - 1), min_size=period, max_size=period))
            tokens += (unit * draw(st.integers(1, 8)))[: draw(st.integers(1, 80))]
        elif kind == "lines":  # a hard-wrapped text, then a reply that joins its lines
            words = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=12))
            text = " ".join(words)
            wrapped = text.replace(" ", "\n", draw(st.integers(0, 3)))
            tokens += SPELLING.tokenize(wrapped + "\n") + SPELLING.tokenize("- " + text)
        else:
            start = draw(st.integers(0, len(tokens) - 1))
            copy = tokens[start : start + draw(st.integers(1, 60))]
            for _ in range(draw(st.integers(0, 3))):
                at = draw(st.integers(0, len(copy)))
                removed = draw(st.integers(0, 4))
                inserted = draw(st.lists(st.integers(0, V - 1), max_size=3))
                copy[at : at + removed] = inserted
            tokens += copy
    return tokens


class ModelPart(DraftModelDrafter):
    """A draft model that drafts the token after the last one, each costing a
    fixed time: it isolates hybrid and auto from llama.cpp."""

    loaded = True

    def __init__(self) -> None:
        super().__init__(load=lambda: None)
        self.seconds_per_token = 0.001

    def begin(self, context):
        pass

    def observe(self, committed):
        pass

    def catch_up_cost(self, context) -> float:
        return 0.0

    def propose(self, context, k, pending=()):
        last = ([*context, *pending] or [0])[-1]
        return Draft([(last + 1 + i) % V for i in range(k)], source=self.name)


def costs(curve) -> CostModel:
    return CostModel.from_points({n: curve(n) for n in range(1, 66)})  # measured whole: no prior


CURVES = {
    "flat": lambda n: 0.030 + 0.001 * n,  # a GPU: every draft may pay
    "cpu": lambda n: 0.030 * (1 + 0.4 * (n - 1)),  # this CPU: only long, likely copies pay
}


def memory_of(stored: Sequence[Sequence[int]]) -> Memory:
    memory = Memory(tokenize=SPELLING.tokenize, capacity=4096)
    for run in stored:
        memory.offer(run)
    return memory


def drafter(name: str, stored: Sequence[Sequence[int]], curve: str) -> Drafter:
    ngram = NgramDrafter(spelling=SPELLING)
    if name == "ngram":
        return ngram
    if name == "ngram-plain":
        return NgramDrafter()  # no tokenizer: no text copies, no joined lines
    if name == "memory":
        return MemoryDrafter(ngram, memory_of(stored))
    if name == "hybrid":
        return HybridDrafter(ngram, ModelPart(), memory=memory_of(stored))
    model = ModelPart() if curve == "flat" else None
    return AutoDrafter(ngram, model, costs(CURVES[curve]), memory=memory_of(stored))


def check(draft: Draft, k: int, reads_text: bool = False) -> None:
    assert len(draft.tokens) <= k, (len(draft.tokens), k)
    assert all(isinstance(t, int) and 0 <= t < V for t in draft.tokens), draft.tokens
    if reads_text and draft.source == "ngram":  # a copy never drafts the template's tokens
        assert TEMPLATE not in draft.tokens, draft.tokens


def replay(d: Drafter, tokens: list[int], prompt: int, ks: list[int], reads_text: bool = False) -> None:
    """Feed `tokens` as the engine would, its first `prompt` as the prompt:
    each round commits the draft's agreeing prefix and the token after it."""
    context = tokens[: max(1, prompt)]
    d.begin(context)
    i = 0
    while len(context) < len(tokens):
        k = ks[i % len(ks)]
        i += 1
        draft = d.propose(context, k)
        check(draft, k, reads_text)
        truth = tokens[len(context) :]
        agree = 0
        while agree < min(len(draft.tokens), len(truth)) and draft.tokens[agree] == truth[agree]:
            agree += 1
        if draft.tokens:
            d.settle(draft, agree)
        committed = truth[: agree + 1]
        context = context + committed
        d.observe(committed)


NAMES = st.sampled_from(["ngram", "ngram-plain", "memory", "hybrid", "auto"])


@EXAMPLES
@given(
    name=NAMES,
    curve=st.sampled_from(sorted(CURVES)),
    tokens=conversations(),
    prompt=st.integers(0, 40),
    ks=st.lists(K, min_size=1, max_size=6),
    stored=st.lists(conversations(), max_size=3),
)
def test_a_drafter_fed_any_conversation_never_raises_and_drafts_at_most_k_ids_of_the_vocabulary(
    name, curve, tokens, prompt, ks, stored
):
    d = drafter(name, stored, curve)
    replay(d, [*tokens, 0] if not tokens else tokens, prompt, ks, reads_text=name != "ngram-plain")


@EXAMPLES
@given(name=NAMES, context=st.lists(st.integers(0, V - 1), max_size=1), k=K)
def test_empty_and_one_token_contexts_draft_nothing_wrong(name, context, k):
    d = drafter(name, [], "flat")
    d.begin(context)
    check(d.propose(context, k), k)


@EXAMPLES
@given(
    unit=st.lists(st.integers(0, V - 1), min_size=1, max_size=16),
    repeats=st.integers(1, 6),
    edits=st.dictionaries(
        st.lists(st.integers(0, V - 1), min_size=1, max_size=3).map(tuple),
        st.lists(st.integers(0, V - 1), max_size=3).map(tuple),
        max_size=4,
    ),
    joins=st.booleans(),
    k=K,
)
def test_a_loop_copied_through_any_edits_drafts_at_most_k(unit, repeats, edits, joins, k):
    """A loop of every period, with edits planted as if learned (ones that
    remove more than they insert, or remove without inserting, among them):
    the copy past the conversation's end loops through what it wrote."""
    d = NgramDrafter(spelling=SPELLING)
    context = unit * repeats
    d.begin(context)
    d.edits = dict(edits)
    d.joins = NL if joins else None
    if d.text is not None:
        d.text.joining = joins
    for start in range(len(context) + 1):
        out = d.continuation(start, k)
        assert len(out) <= k and all(0 <= t < V for t in out) and TEMPLATE not in out
        if start < len(context) and not edits and not joins:
            loop = (context[start:] * (k + 1))[:k]
            assert out == loop[: loop.index(TEMPLATE) if TEMPLATE in loop else k]  # the loop, to the template
    check(d.propose(context, k), k)


@EXAMPLES
@given(
    text=st.lists(st.integers(0, V - 1), min_size=4, max_size=40),
    at=st.integers(0, 40),
    removed=st.integers(0, 3),
    inserted=st.lists(st.integers(0, V - 1), max_size=3),
    after=st.lists(st.integers(0, V - 1), max_size=12),
)
def test_a_match_an_edit_learned_at_its_lookup_lengthens_keeps_its_length_without_it(
    text, at, removed, inserted, after
):
    """A reply that copies the text with one edit, then goes anywhere: where
    a lookup learns an edit that lengthens its match, `before_edit` is the
    match as it stood without it, at least RESYNC tokens and shorter than
    the match; the first such, before any other edit was learned, is the
    match a drafter that learns no edits finds there."""
    at = min(at, len(text))
    reply = [*text[:at], *inserted, *text[at + removed :], *after]
    d, plain = NgramDrafter(), NgramDrafter(learn_edits=False)
    context = [*text, TEMPLATE]
    d.begin(context)
    plain.begin(context)
    for token in reply:
        known = dict(d.edits)
        hit, straight = d.lookup(context), plain.lookup(context)
        if d.before_edit is not None:
            assert hit is not None and RESYNC <= d.before_edit < hit[1]
            if not known:
                assert straight is not None and d.before_edit == straight[1]
        context.append(token)
        d.observe([token])
        plain.observe([token])


@EXAMPLES
@given(turns=st.lists(conversations(), min_size=1, max_size=4), role=st.lists(st.sampled_from(WORDS), max_size=2))
def test_a_match_never_reaches_back_into_a_role_header(turns, role):
    """Turns of any tokens, each after a role header (a template token, a
    role's word or none, a line break): a match at a reply's first token is
    none, and later ones count at most the tokens the reply has written."""
    header = [TEMPLATE, *SPELLING.tokenize(" ".join(role)), NL]
    d = NgramDrafter(spelling=SPELLING)
    context: list[int] = []
    d.begin(context)
    for turn in turns:
        context += header
        d.observe(header)
        for written, token in enumerate([t for t in turn if t != TEMPLATE]):
            found = d.lookup(context)
            assert (found is None) if written < d.n_min else (found is None or found[1] <= written)
            context.append(token)
            d.observe([token])


def test_a_copy_an_edit_makes_shorter_than_its_loop_still_loops():
    """A loop whose copy an edit shortens ([4, 5, 6] written as [7]) drafts
    the copy over and over: it used to index before the copy's start."""
    d = NgramDrafter()
    d.begin([1, 2, 3, 4, 5, 6])
    d.edits = {(4, 5, 6): (7,)}
    assert d.continuation(3, 5) == [7, 7, 7, 7, 7]
    d.edits = {(5, 6): ()}  # removed without a replacement
    assert d.continuation(3, 4) == [4, 4, 4, 4]
    d.edits = {(4, 5, 6): ()}  # the whole copy removed: nothing to loop
    assert d.continuation(3, 4) == []
