"""The cost model and auto's policy, with scripted costs and acceptance."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specchat.decoding.costmodel import PRIOR_SLOPE, CostModel
from specchat.drafters import auto as auto_module
from specchat.drafters.auto import (
    EXPLORE_EVERY,
    TRUST_RANGE,
    WHOLE_PRIOR,
    Acceptance,
    AutoDrafter,
    CopyRate,
    CopyTrust,
    copy_rates,
    self_copy_rates,
)
from specchat.drafters.base import Draft
from specchat.drafters.draft_model import DraftModelDrafter
from specchat.drafters.ngram import NgramDrafter
from specchat.engine.loop import Engine
from tests.support.engine import PROMPT, KVChecker, plain_tokens
from tests.support.fake_model import FakeModel


def costs(fn, up_to=33) -> CostModel:
    c = CostModel()
    for n in range(1, up_to + 1):
        c.observe(n, fn(n))
    return c


LINEAR = lambda n: 0.030 * n  # noqa: E731  k+1 positions cost k+1 steps: speculation can't pay


def CPU(n: int) -> float:
    """The default pair on this 2-core CPU (DESIGN.md): 2 positions 1.9 steps,
    5 positions 3.9, 16 positions 6.3."""
    points = [(1, 1.0), (2, 1.9), (5, 3.9), (16, 6.3), (33, 12.0)]
    for (a, ta), (b, tb) in zip(points, points[1:]):
        if n <= b:
            return 0.030 * (ta + (tb - ta) * (n - a) / (b - a))
    return 0.030 * 12.0


FLAT = lambda n: 0.030 + 0.001 * n  # noqa: E731  a GPU: verifying is nearly free


class ScriptedModel(DraftModelDrafter):
    """A draft model that proposes fixed tokens and costs a fixed time per token."""

    def __init__(self) -> None:
        super().__init__(load=lambda: None)
        self.calls = 0

    loaded = True  # as if begin had loaded it

    def begin(self, context):
        pass

    def propose(self, context, k):
        self.calls += 1
        return Draft([7] * k, source="draft")


def auto(curve, draft_step: float | None = 0.3 * 0.030) -> tuple[AutoDrafter, ScriptedModel]:
    model = ScriptedModel()
    a = AutoDrafter(NgramDrafter(), model, costs(curve))
    a.draft_step = draft_step
    return a, model


def test_cost_model_interpolates_and_extrapolates():
    c = CostModel()
    for n, t in [(1, 1.0), (3, 2.0), (5, 4.0)]:
        c.observe(n, t)
    assert c.step(2) == pytest.approx(1.5)
    # Past the sizes seen: the prior (1 + 0.5 (n - 1) steps), and 5's cost at least.
    assert c.step(6) == pytest.approx(4.0) and c.step(11) == pytest.approx(6.0)
    c.observe(9, 7.0)  # a live verify of 9 times its size: between 5 and 9, the line through them
    assert c.step(9) == pytest.approx(7.0) and c.step(7) == pytest.approx(5.5)
    assert c.relative(5) == pytest.approx(4.0)
    c.observe(5, 6.0)  # live rounds refine the estimate
    assert c.step(5) == pytest.approx(4.0 + 0.2 * 2.0)


@pytest.mark.parametrize("warmup, steady", [(2, [False, False, True, True]), (0, [True, True, True, True])])
def test_a_plain_step_is_a_baseline_sample_only_after_the_warm_up_steps(warmup, steady):
    """On a GPU (2 warm-up steps) the first plain steps after a batch are not
    samples; on the CPU (none) every plain step is."""
    from specchat.drafters.base import Drafter

    turn = Engine(FakeModel(seed=1), Drafter(), k=4, costs=CostModel(warmup_steps=warmup)).generate(PROMPT, 6)
    assert [r.steady for r in turn.rounds[:4]] == steady


def test_a_warm_up_steps_extra_seconds_are_what_leaving_plain_steps_costs():
    c = CostModel(warmup_steps=2)
    c.observe_warming(0.050)  # no plain step measured yet: nothing to compare with
    assert c.warming == 0.0
    c.observe(1, 0.030)
    c.observe_warming(0.050)
    assert c.warming == pytest.approx(0.2 * 0.020)
    c.observe_warming(0.010)  # faster than a step: no extra
    assert c.warming == pytest.approx(0.8 * 0.2 * 0.020)


def test_calibration_measures_real_decodes_and_restores_the_cache():
    model = FakeModel(seed=1, step_seconds=0.001)
    model.eval(PROMPT, n_logits=1)
    c = CostModel()
    c.calibrate(model, sizes=(1, 2, 4))
    assert model.tokens == PROMPT
    assert c.calibrated and set(c.seconds) == {1, 2, 4}
    assert all(t >= 0.001 for t in c.seconds.values())


@pytest.mark.parametrize("curve", [LINEAR, CPU])
def test_linear_verify_and_weak_evidence_mean_plain_steps(curve):
    a, model = auto(curve)
    context = [1, 2, 3, 4, 5, 9, 9, 4, 5]  # "4 5" seen once: a 2-token match
    a.begin(context)
    draft = a.propose(context, 8)
    assert draft.tokens == [] and a.choice == "off"
    assert model.calls == 0  # the draft model never even ran


def test_where_nothing_pays_one_round_in_explore_every_tries_a_single_token():
    a, model = auto(CPU)
    context = [1, 2, 3, 4, 5, 6, 9, 9, 2, 3, 4, 5]  # "2 3 4 5" seen once: a 4-token match, priced below a step
    a.begin(context)
    drafts = [a.propose(context, 8) for _ in range(EXPLORE_EVERY)]
    assert [d.tokens for d in drafts[:-1]] == [[]] * (EXPLORE_EVERY - 1)
    # Judged optimistically, the copy would draft 3; a trial drafts one token.
    assert drafts[-1].tokens == [6] and a.choice == "ngram k=1" and model.calls == 0
    a.settle(drafts[-1], 0)
    assert a.ngram_acc[4].rate(0) < 0.75  # the prior, lowered by the rejected trial


def test_never_drafts_on_a_linear_curve_even_when_always_right():
    a, model = auto(LINEAR)
    for _ in range(30):
        a.model_acc.update(8, 8)
    assert a.propose([1, 2, 3], 8).tokens == [] and a.choice == "off"


def test_flat_verify_makes_the_draft_model_pay_and_lengthen_with_acceptance():
    a, model = auto(FLAT)
    first = a.propose([1, 2, 3], 8)
    assert first.source == "draft" and a.choice == f"draft k={len(first.tokens)}"
    for _ in range(30):  # the draft model turns out to be right almost always
        a.model_acc.update(8, 8)
    longer = a.propose([1, 2, 3], 8)
    assert len(longer.tokens) == 8 > len(first.tokens)


def test_long_copy_match_wins_on_a_linear_curve():
    text = list(range(10, 60))
    context = text + [1, 2] + text[:20]  # now copying `text` again: a 20-token match
    a, _ = auto(CPU)
    for bucket in a.ngram_acc.values():  # acceptance learned on copy-heavy text
        for _ in range(30):
            bucket.update(16, 16)
    a.begin(context)
    draft = a.propose(context, 16)
    assert draft.source == "ngram" and draft.tokens == text[20:36]


def test_auto_drafts_only_to_sizes_whose_cost_was_measured():
    text = list(range(10, 60))
    context = text + [1, 2] + text[:20]  # a 20-token match, copy-heavy acceptance
    measured = {n: CPU(n) for n in (1, 2, 3, 4, 5, 8, 12, 16)}
    measured[12] = CPU(11) * 1.3  # 12 positions cost more than the line from 8 to 16 says
    a = AutoDrafter(NgramDrafter(), None, CostModel.from_points(measured))
    for bucket in a.ngram_acc.values():
        for _ in range(30):
            bucket.update(16, 16)
    a.begin(context)
    assert a.costs.priced(16) and not a.costs.priced(10) and not a.costs.priced(17)
    lengths = {len(a.propose(context, k).tokens) for k in range(1, 17)}
    assert lengths - {0} <= {1, 2, 3, 4, 7, 11, 15} and 15 in lengths  # each verify is a measured size: length + 1
    assert len(a.propose(context, 14).tokens) == 11  # 15 positions were never measured: 12 were
    assert len(a.propose(context, 10).tokens) == 7  # 9 to 11 positions would be priced by the line: not drafted
    assert CostModel().priced(10)  # before a curve is measured, every size is priced the same way


def test_auto_adapts_when_acceptance_drops():
    a, model = auto(FLAT)
    assert a.propose([1, 2, 3], 8).source == "draft"
    for _ in range(40):  # the text changed: the draft model is now always wrong
        d = a.propose([1, 2, 3], 8)
        if d.tokens:
            a.settle(d, 0)
    assert a.choice == "off"
    assert a.model_acc.rate(0) < 0.3  # from the prior 0.6, halved by the evidence


def test_acceptance_expected_tokens():
    acc = Acceptance(prior=0.5, weight=1.0)
    assert acc.expected_tokens(3) == pytest.approx([1.0, 1.5, 1.75, 1.875])
    acc.update(drafted=3, accepted=1)  # position 0 accepted, 1 rejected, 2 never judged
    assert acc.rate(0) > 0.5 and acc.rate(1) < 0.5 and acc.rate(2) == 0.5


def test_a_copy_rate_learned_on_short_drafts_prices_long_ones():
    rate = CopyRate(prior=0.7)
    for _ in range(20):  # short n-gram drafts, always right
        rate.update(drafted=3, accepted=3)
    assert rate.rate(0) == rate.rate(15) > 0.95  # one rate for every position
    assert rate.expected_tokens(16)[-1] > 12  # so a 16-token draft now looks worth it
    before = rate.rate(0)
    rate.update(drafted=16, accepted=2)  # two agreed, the third did not; the rest were never judged
    assert rate.rate(0) < before


def test_auto_lengthens_n_gram_drafts_while_a_copy_keeps_agreeing():
    text = list(range(10, 70))
    copied = 9
    context = text + [1, 2] + text[:copied]  # copying `text` again has begun: a 9-token match
    a, _ = auto(CPU)
    a.begin(context)
    lengths = []
    for _ in range(3):
        draft = a.propose(context, 16)
        assert draft.source == "ngram" and draft.tokens == text[copied : copied + len(draft.tokens)]
        lengths.append(len(draft.tokens))
        a.settle(draft, len(draft.tokens))  # every drafted token agreed
        new = text[copied : copied + len(draft.tokens) + 1]  # plus the target's own token
        context += new
        a.observe(new)
        copied += len(new)
    assert 0 < lengths[0] < lengths[1] < lengths[2]  # each success earns a longer draft


def restating(a: AutoDrafter, prompt: list[int], reply: list[int], k: int = 32) -> tuple[float, list[tuple[int, int]]]:
    """auto writing `reply` after `prompt`, the target agreeing with a draft up to the reply's next token:
    the verifies' cost in CPU steps, and each draft's (length, accepted)."""
    a.begin(prompt)
    pos, steps, drafts = 0, 0.0, []
    while pos < len(reply) - k - 1:
        draft = a.propose(prompt + reply[:pos], k)
        n = next((i for i, t in enumerate(draft.tokens) if t != reply[pos + i]), len(draft.tokens))
        a.settle(draft, n)
        a.observe(reply[pos : pos + n + 1])
        pos += n + 1
        steps += CPU(len(draft.tokens) + 1) / CPU(1)
        drafts += [(len(draft.tokens), n)] if draft.tokens else []
    return steps / pos, drafts


def test_copies_that_part_every_few_words_stop_the_drafting_sooner_than_each_length_alone(monkeypatch):
    """A reply that says the earlier one again with a new word in every nine
    ("I don't have personal opinions" again, then "preferences"): each miss
    comes at another match length, and each length's rate learns only its
    own. The trust in copies learns from the first misses at every length."""
    text = list(range(10, 200))
    reply = [t if i % 9 != 8 else 1000 + i for i, t in enumerate(text)]
    trusting, drafts = restating(auto(CPU)[0], text + [1, 2], reply)
    assert len(drafts) <= 3 and all(n < length for length, n in drafts)
    monkeypatch.setattr(auto_module, "TRUST_RANGE", (1.0, 1.0))  # each copy rate on its own
    alone, more = restating(auto(CPU)[0], text + [1, 2], reply)
    assert len(more) > len(drafts) and trusting < alone


def test_a_reply_that_copies_one_place_from_its_first_token_is_priced_as_a_whole_copy():
    text = list(range(10, 90))
    prompt = text + [1, 2]
    a, _ = auto(CPU)
    a.begin(prompt)
    whole = prompt + text[:12]  # the reply so far: the text's first 12 tokens
    draft = a.propose(whole, 32)
    assert a._last is a.whole_acc and a.whole_acc.rate(0) == pytest.approx(WHOLE_PRIOR)
    assert draft.tokens == text[12:27]  # 15: at 0.97 each, longer drafts add less than their verify costs
    late = prompt + [5, 6] + text[:12]  # the same match, after two tokens that copy nothing
    a.begin(prompt)  # each a reply of its own
    assert a.propose(late, 32).tokens and a._last is a.ngram_acc[12]  # priced by its length
    short = prompt + text[:6]  # too short a reply to tell
    a.begin(prompt)
    a.propose(short, 32)
    assert a._last is not a.whole_acc
    for _ in range(3):  # whole copies went wrong here: the match length's own estimate is higher now
        a.whole_acc.update(16, 0)
    a.begin(prompt)
    a.propose(whole, 32)
    assert a._last is a.ngram_acc[12]


def test_a_match_an_edit_learned_just_now_lengthens_is_priced_by_what_agrees_since():
    question = list(range(10, 50))
    prompt = question + [1, 2]
    a, _ = auto(CPU)
    for _ in range(30):  # 15-token matches have agreed all along
        a.ngram_acc[15].update(16, 16)
    a.begin(prompt)
    # The reply restates the question, leaves out two of its tokens, and
    # agrees again for three: an edit, learned here, reads the match back 15.
    context = prompt + question[:12] + question[14:17]
    assert not a.propose(context, 16).tokens and a.ngram.edits == {(22, 23): ()}
    assert a.ngram.before_edit == 3 and a.ngram.lookup(context)[1] == 15
    # Known before this lookup, the edit is part of the match like any token.
    assert a.propose(context, 16).tokens == question[17:33] and a._last is a.ngram_acc[15]


def test_auto_on_the_engine_keeps_greedy_output():
    expected = plain_tokens(2, 80)
    model = FakeModel(seed=2)
    costs = CostModel.from_points({1: 1.0, 2: 1.05, 3: 1.1, 4: 1.15, 5: 1.2, 6: 1.25, 7: 1.3})  # flat: auto drafts
    drafter = AutoDrafter(NgramDrafter(), DraftModelDrafter(lambda: FakeModel(seed=2)), costs)
    engine = Engine(model, drafter, k=6, costs=costs)
    turn = engine.generate(PROMPT, 80, on_round=KVChecker(model, PROMPT))
    assert turn.tokens == expected
    assert sum(r.drafted for r in turn.rounds) > 0


def test_the_engine_measures_nothing_before_a_reply_and_auto_prices_by_the_prior():
    """No cost curve yet: the first round is a plain step, which gives the
    prior its scale; the engine times no batch of its own (live rounds only)."""
    expected = plain_tokens(2, 80)
    model = FakeModel(seed=2)
    costs = CostModel()
    drafter = AutoDrafter(NgramDrafter(), None, costs)
    engine = Engine(model, drafter, k=16, costs=costs)
    turn = engine.generate(PROMPT, 80, on_round=KVChecker(model, PROMPT))
    assert turn.tokens == expected
    assert turn.rounds[0].plain
    assert costs.measured == {} and not costs.covers  # nothing was measured, only live rounds seen
    assert set(costs.seconds) == {1, *(r.drafted + 1 for r in turn.rounds if r.drafted)}


def counting_model():
    loads = []

    def load():
        loads.append(1)
        return FakeModel(seed=2)

    return DraftModelDrafter(load), loads


def test_auto_leaves_the_draft_model_unloaded_where_it_cannot_pay():
    model, loads = counting_model()
    a = AutoDrafter(NgramDrafter(), model, costs(CPU), draft_cost_prior=0.4)
    a.begin([1, 2, 3])
    choices = {a.propose([1, 2, 3, 4, 5, 6], 16).source for _ in range(64)}  # exploration rounds included
    assert not loads and not model.loaded
    assert choices == {"off"}


def test_auto_loads_the_draft_model_before_the_turn_where_it_can_pay():
    model, loads = counting_model()
    a = AutoDrafter(NgramDrafter(), model, costs(FLAT), draft_cost_prior=0.3)
    a.begin([1, 2, 3])  # before the decode clock starts: load and prefill
    assert loads == [1] and model.model.tokens == [1, 2, 3]
    assert a.propose([1, 2, 3], 8).source == "draft"
    assert loads == [1]


def test_falling_behind_makes_the_draft_model_pay_for_its_catch_up():
    model, _ = counting_model()
    a = AutoDrafter(NgramDrafter(), model, costs(FLAT), draft_cost_prior=0.3)
    context = list(range(1, 40))
    a.begin(context[:3])
    model.seconds_per_token, model.sync_per_token = 0.009, 0.004
    assert model.catch_up_cost(context[:5]) == pytest.approx(2 * 0.009)  # short: token by token
    assert model.catch_up_cost(context) == pytest.approx(36 * 0.004)  # long: one batch
    a.draft_step = 0.003  # drafting is cheap: a draft one token behind pays by the edge auto asks
    assert a.propose(context[:4], 8).source == "draft"
    assert a.propose(context, 8).source == "off"  # 36 tokens behind: the catch-up costs more than drafting wins


def test_the_drafters_hybrid_and_auto_draft_through_have_what_base_names():
    """drafters/base.py names what one drafter may ask of another; the
    registry's drafters answer all of it (and a plain drafter none of it)."""
    from specchat.decoding.sampling import SamplingParams
    from specchat.drafters.base import Drafter, DraftModelPart, GrammarPart, NgramPart
    from specchat.drafters.registry import Drafters

    made = Drafters(lambda: FakeModel(seed=2), SamplingParams())
    assert isinstance(made.get("ngram"), NgramPart)
    assert isinstance(made.get("draft"), DraftModelPart) and not made.get("draft").loaded  # asking loads nothing
    assert isinstance(made.get("grammar"), GrammarPart)
    assert not isinstance(Drafter(), (NgramPart, DraftModelPart, GrammarPart))
    # What the engine and the status read of any drafter, with the base's defaults.
    assert (Drafter().needs_costs, Drafter().chosen) == (False, None)
    assert (made.get("auto").needs_costs, made.get("auto").chosen) == (True, {})


def test_every_drafter_in_the_table_is_built_by_the_registry_as_its_own_kind():
    """A row in drafters.SPECS is a drafter the registry builds, named as the
    row (a forgotten case in Drafters._make is an error, never a hybrid),
    with the MTP head and the draft model both on offer."""
    from specchat.decoding.sampling import SamplingParams
    from specchat.drafters import SPECS
    from specchat.drafters.registry import Drafters

    made = Drafters(lambda: FakeModel(seed=2), SamplingParams(), load_mtp_head=lambda: FakeModel(seed=3))
    for spec in SPECS:
        assert made.get(spec.name).name == spec.name
    made.close()


def test_the_names_and_the_table_hold_the_same_drafters_in_the_same_order():
    """drafters.Name is the one spelling of each name: a drafter added to one
    and not the other fails here."""
    from specchat.drafters import NAMES, SPECS, Name

    assert list(Name) == [s.name for s in SPECS] == list(NAMES)
    assert all(isinstance(s.name, Name) for s in SPECS)


def test_before_a_curve_is_measured_a_whole_copy_is_priced_by_the_prior():
    """Only live plain steps so far: a size not measured costs the prior
    (PRIOR_SLOPE plain steps a position) at least; a whole copy still pays on
    it, and a size verified once is priced as it cost."""
    text = list(range(10, 90))
    prompt = text + [1, 2]
    costs = CostModel()
    costs.observe(1, 0.03)  # one live plain step
    assert costs.priced(17) and costs.step(17) == pytest.approx(0.03 * (1 + PRIOR_SLOPE * 16))
    a = AutoDrafter(NgramDrafter(), None, costs)
    a.begin(prompt)
    draft = a.propose(prompt + text[:12], 32)
    assert a._last is a.whole_acc and len(draft.tokens) >= 4
    positions = len(draft.tokens) + 1
    costs.observe(positions, 0.03 * 20)  # the verify cost far more than the prior said
    assert costs.step(positions) == pytest.approx(0.6)
    short = prompt + text[:3]  # a short match: no draft pays on the prior
    assert not a.propose(short, 32).tokens


@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(1, 64), st.integers(0, 64)), max_size=40),
       st.floats(0.0, 1.0), st.integers(1, 64))  # fmt: skip
def test_the_copy_trust_only_ever_makes_a_copy_dearer(updates, rate, n):
    """Whatever the copies did, the factor stays within TRUST_RANGE, never
    below 1, and a copy priced with it expects no more tokens than without."""
    trust = CopyTrust()
    for priced, drafted, accepted in updates:
        trust.update(priced, drafted, min(accepted, drafted))
        assert TRUST_RANGE[0] <= trust.factor() <= TRUST_RANGE[1] and trust.factor() >= 1.0
    acc = CopyRate(prior=rate)
    with_trust, alone = acc.expected_tokens(n, 0.0, trust.factor()), acc.expected_tokens(n)
    assert all(a <= b + 1e-12 for a, b in zip(with_trust, alone)) and with_trust[0] == 1.0


def test_a_match_in_the_replys_own_words_is_priced_on_rates_of_its_own():
    """A reply that repeats itself (a formula's terms, a phrase of a line
    before) parts from its own words sooner than a copy of the question
    does, so the same match length is priced lower there."""
    assert all(r.rate(0) < q.rate(0) for r, q in zip(self_copy_rates().values(), copy_rates().values()))
    question, own = list(range(10, 30)), list(range(40, 46))
    prompt = question + [1, 2]
    a = AutoDrafter(NgramDrafter(), None, costs(FLAT))
    a.begin(prompt)
    assert a.propose(prompt + question[:5], 8).source == "ngram" and a._last is a.ngram_acc[5]
    a.begin(prompt)  # another reply
    reply = own + [3] + own[:5]  # the reply says its first five tokens again
    assert a.propose(prompt + reply, 8).tokens[:3] == [45, 3, 40] and a._last is a.self_acc[5]
