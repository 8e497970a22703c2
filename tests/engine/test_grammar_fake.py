"""Constrained decoding and the grammar drafter on the fake model: exact invariants."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from specchat.decoding.constraint import Constraint
from specchat.decoding.sampling import SamplingParams, probs
from specchat.drafters.base import Drafter
from specchat.drafters.grammar import GrammarDrafter
from specchat.drafters.hybrid import HybridDrafter
from specchat.drafters.ngram import NgramDrafter
from specchat.engine.loop import Engine
from tests.support.engine import KVChecker, PerfectDrafter, RandomDrafter
from tests.support.fake_grammar import END, MACHINE, FakeGrammar, matches
from tests.support.fake_model import EOS, FakeModel

PROMPT = [5, 9, 3, 7, 5, 9, 3, 11, 2, 5, 9]


def constrained(model: FakeModel) -> Constraint:
    c = Constraint()
    c.set(FakeGrammar(model))
    return c


def drafter(name: str, model: FakeModel, c: Constraint) -> Drafter:
    return {
        "off": lambda: Drafter(),
        "grammar": lambda: GrammarDrafter(c),
        "ngram": lambda: NgramDrafter(min_match=1),
        "random": lambda: RandomDrafter(model.n_vocab),
        "perfect": lambda: PerfectDrafter(model),  # knows the unconstrained argmax: often refused
    }[name]()


def plain(seed: int, max_tokens: int = 80, sampling: SamplingParams = SamplingParams()) -> list[int]:
    model = FakeModel(seed=seed)
    return Engine(model, Drafter(), k=4, sampling=sampling, constraint=constrained(model)).generate(PROMPT, max_tokens).tokens


@pytest.mark.parametrize("name", ["off", "grammar", "ngram", "random", "perfect"])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_constrained_greedy_output_is_the_same_for_every_drafter(name, seed, k):
    expected = plain(seed)
    assert matches(expected) and len(expected) >= 12  # past a line's forced runs and choices
    model = FakeModel(seed=seed)
    c = constrained(model)
    turn = Engine(model, drafter(name, model, c), k=k, constraint=c).generate(PROMPT, 80, on_round=KVChecker(model, PROMPT))
    assert turn.tokens == expected
    # The grammar followed the committed tokens only: its state is where they lead.
    s = 0
    for t in turn.tokens:
        s = MACHINE[s][t]
    assert c.state.s == s


def test_the_constraint_changes_the_reply_and_every_reply_matches_the_grammar():
    free = Engine(FakeModel(seed=0), Drafter(), k=4).generate(PROMPT, 80).tokens
    assert not matches(free)  # the fake model alone does not follow the grammar
    for seed in range(6):
        assert matches(plain(seed))


def test_grammar_drafter_proposes_the_forced_run_and_it_is_all_accepted():
    model = FakeModel(seed=0)
    c = constrained(model)
    turn = Engine(model, GrammarDrafter(c), k=8, baseline_every=0, constraint=c).generate(PROMPT, 80)
    verify = [r for r in turn.rounds if not r.plain]
    # The first round drafts " it was" (states 0 and 1 allow one word each).
    assert turn.rounds[0].accepted == [8, 14] and turn.rounds[0].drafter == "grammar"
    # A forced word is the only one the target may take: nothing is ever rejected.
    assert verify and all(not r.rejected for r in verify)
    # " and then it" (3) and " to see" (2) are forced on every line, "\n it was" (3) on the next.
    assert {len(r.accepted) for r in verify} >= {2, 3}
    assert turn.stats.alpha > 2.5
    # Choices and the free run take plain steps: nothing is proposed there.
    plain_rounds = [r for r in turn.rounds if r.plain]
    assert plain_rounds and all(r.drafter == "grammar" for r in plain_rounds)


def test_forced_text_is_probed_once_per_run_while_commits_eat_into_it():
    model = FakeModel(seed=0)
    c = constrained(model)
    c.begin()
    assert c.forced(8) == [8, 14]
    c.commit(8, b" it", False)  # one token of the run: the rest is still forced, no new probe
    assert c.forced(8) == [14] and c.grammar.probes == 1
    c.commit(14, b" was", False)  # the run is used up: the next call probes again
    assert c.forced(8) == [] and c.grammar.probes == 2
    assert c.forced(1) == [] and c.grammar.probes == 2  # nothing forced at a choice: asked once


def test_hybrid_drafts_forced_tokens_first_then_the_ngram_continuation():
    model = FakeModel(seed=0)
    c = constrained(model)
    ngram = NgramDrafter(min_match=1)
    hybrid = HybridDrafter(ngram, None, GrammarDrafter(c))
    # A context that already holds "… . and then it ran" once: after the forced
    # " and then it", the n-gram index continues with what followed last time.
    history = [8, 14, 1, 17, 6, 7, 8, 9, 10, 11, 21, 18]
    context = PROMPT + history + [8, 14, 1, 17]
    ngram.begin(context)
    c.begin()
    for t in history + [8, 14, 1, 17]:
        c.commit(t, model.piece(t), False)
    d = hybrid.propose(context, 6)
    assert d.tokens[:3] == [6, 7, 8] and d.forced == 3
    assert d.tokens[3:] == [9, 10, 11] and d.source == "ngram"


def test_grammar_drafter_without_a_constraint_proposes_nothing():
    model = FakeModel(seed=0)
    c = Constraint()
    turn = Engine(model, GrammarDrafter(c), k=8, constraint=c).generate(PROMPT, 30)
    assert all(r.plain for r in turn.rounds)
    assert turn.tokens == Engine(FakeModel(seed=0), Drafter(), k=8).generate(PROMPT, 30).tokens


def test_eos_only_where_the_grammar_may_end():
    for seed in range(12):
        model = FakeModel(seed=seed)
        c = constrained(model)
        turn = Engine(model, GrammarDrafter(c), k=8, constraint=c).generate(PROMPT, 300)
        if turn.finish == "eos":
            s = 0
            for t in turn.tokens:
                s = MACHINE[s][t]
            assert s in END
            return
    pytest.fail("no seed reached EOS: the test means nothing")


# --- sampling: constrained speculative sampling is distributed as constrained plain ---


def masked_probs(model: FakeModel, context: list[int], state: int, sp: SamplingParams) -> np.ndarray:
    row = model.row(context)
    allowed = np.array([t in MACHINE[state] or (t == EOS and state in END) for t in range(model.n_vocab)])
    return probs(np.where(allowed, row, -np.inf).astype(np.float32), sp)


@pytest.mark.parametrize("name", ["grammar", "random"])
def test_constrained_sampling_matches_the_masked_target_distribution(name):
    # Tokens 3 and 4 of a reply: " it was" is forced, then the free run
    # starts (state 2) and goes on or ends with "." (state 3).
    sp = SamplingParams(temp=1.0)
    model = FakeModel(seed=4, sharpness=1.5)
    counts = np.zeros((model.n_vocab, model.n_vocab))
    runs = 3000
    for seed in range(runs):
        c = constrained(model)
        turn = Engine(model, drafter(name, model, c), k=3, sampling=SamplingParams(temp=1.0, seed=seed),
                      baseline_every=0, constraint=c).generate(PROMPT, 4)
        model.truncate(0)
        assert turn.tokens[:2] == [8, 14] and matches(turn.tokens)
        counts[turn.tokens[2], turn.tokens[3]] += 1
    expected = np.zeros_like(counts)
    p3 = masked_probs(model, PROMPT + [8, 14], 2, sp)
    for t3 in np.nonzero(p3)[0]:
        expected[t3] = p3[t3] * masked_probs(model, PROMPT + [8, 14, t3], 3, sp)
    expected *= runs
    support = expected > 0
    assert counts[~support].sum() == 0, "sampled a token the grammar refuses"
    assert chisquare(counts[support], expected[support]).pvalue > 0.001


# --- the grammar's colour ---------------------------------------------------------------


def test_every_builtin_theme_gives_grammar_tokens_their_own_colour():
    from specchat.decoding.stats import Round
    from specchat.display import round_spans
    from specchat.themes import BUILTIN, span_style

    for theme in BUILTIN:
        v = theme.variables
        others = {v[name] for name in ("spec-accepted", "spec-rejected", "spec-ngram", "spec-model")}
        assert v["spec-grammar"] not in others, theme.name
    # A hybrid round whose draft the grammar started: forced text first, in the grammar's colour.
    r = Round(accepted=[6, 7, 8, 9], rejected=[10], target=11, drafter="ngram", plain=False, mode="hybrid",
              forced=3, forced_text=" and then it", accepted_text=" ran", rejected_text=" to", target_text=" see")
    spans = round_spans(r)
    assert [(s["text"], s["drafter"]) for s in spans] == [
        (" and then it", "hybrid:grammar"), (" ran", "hybrid:ngram"), (" to", "hybrid:ngram"), (" see", "target")]
    assert [span_style(s["kind"], s["drafter"]) for s in spans] == ["$spec-grammar", "$spec-ngram", "strike $spec-rejected", ""]
    # The grammar drafter alone, or chosen by auto: the same colour.
    alone = Round(accepted=[6], rejected=[], target=7, drafter="grammar", plain=False, mode="auto", accepted_text=" and")
    assert span_style(*(lambda s: (s["kind"], s["drafter"]))(round_spans(alone)[0])) == "$spec-grammar"


def test_schema_prefix_splits_file_and_message():
    from specchat.errors import SpecchatError
    from specchat.message.slash import schema_prefix

    assert schema_prefix("/schema person.json Extract: Ana, 31.") == ("person.json", "Extract: Ana, 31.")
    assert schema_prefix("  /schema off") == ("off", "")
    assert schema_prefix("what does /schema do?") == (None, "what does /schema do?")
    assert schema_prefix("/schemas are nice") == (None, "/schemas are nice")
    with pytest.raises(SpecchatError, match="/schema needs a file"):
        schema_prefix("/schema ")


# --- the json bench suite ------------------------------------------------------------------


def test_json_suite_has_five_prompts_each_with_a_schema_of_nested_objects_arrays_and_enums():
    from specchat.bench.suites import load_suite

    suite = load_suite("json")
    assert [p.id for p in suite.prompts] == ["person", "order", "meeting", "ticket", "job"]
    for p in suite.prompts:
        schema = p.constraint.schema
        kinds = {json_kind(v) for v in schema["properties"].values()}
        assert {"object", "array", "enum"} <= kinds, p.id
        assert p.constraint.label == f"JSON · {p.id}.schema.json"
        assert 'space ::= ""' in p.constraint.gbnf  # json.dumps layout


def json_kind(v: dict) -> str:
    return "enum" if "enum" in v else v["type"]


def test_schema_lines_count_valid_replies_and_name_each_failure():
    from specchat.bench import report, scorecard
    from specchat.decoding.stats import TurnStats

    def run(seq, prompt, drafter, valid, error=None):
        r = scorecard.Run(seq=seq, cycle=seq // 2, slot="A" if drafter == "off" else "B", suite="json", prompt=prompt,
                          repeat=0, drafter=drafter, k=0 if drafter == "off" else 16, stats=TurnStats())
        r.valid, r.schema_error = valid, error
        return r.to_dict()

    runs = [run(0, "person", "off", True), run(1, "person", "grammar", True),
            run(2, "order", "off", False, "the reply did not finish"),
            run(3, "order", "grammar", False, "does not match order.schema.json: 'x' is not one of ['EUR']"),
            {**run(4, "x", "off", None), "suite": "math"}]
    assert report.schema_lines(runs) == [
        "json: 2 of 4 replies parse as JSON and match their prompt's schema",
        "  order · off: the reply did not finish",
        "  order · grammar k=16: does not match order.schema.json: 'x' is not one of ['EUR']",
    ]


# --- auto prices forced runs on the cost curve ---------------------------------------------------


@pytest.mark.parametrize("curve, drafts", [({1: 1.0, 2: 1.05, 3: 1.1, 4: 1.15, 9: 1.4}, True),
                                           ({1: 1.0, 2: 5.0, 3: 10.0, 9: 45.0}, False)])
def test_auto_takes_the_forced_run_where_the_curve_makes_it_pay(curve, drafts):
    from specchat.decoding.costmodel import CostModel
    from specchat.drafters.auto import AutoDrafter

    model = FakeModel(seed=0)
    c = constrained(model)
    costs = CostModel.from_points(curve)
    auto = AutoDrafter(NgramDrafter(), None, costs, grammar=GrammarDrafter(c))
    turn = Engine(model, auto, k=8, baseline_every=0, costs=costs, constraint=c).generate(PROMPT, 80)
    assert turn.tokens == plain(0)
    grammar_rounds = [r for r in turn.rounds if r.drafter == "grammar"]
    if drafts:  # a flat curve: every forced run is drafted, and it is all accepted
        assert turn.rounds[0].drafter == "grammar" and turn.rounds[0].accepted == [8, 14]
        assert grammar_rounds and all(not r.rejected for r in grammar_rounds)
    else:  # verifying costs as much as the steps it saves and more: plain steps only
        assert not grammar_rounds and all(r.plain for r in turn.rounds)


def test_hybrid_when_sampling_keeps_forced_tokens_certain_even_if_the_draft_model_adds_nothing():
    """Seed 0: the grammar refuses the draft model's first sampled token, so only the
    forced run is drafted (this raised IndexError when forced rows were built from
    the model's first q row)."""
    from specchat.drafters.draft_model import DraftModelDrafter

    model = FakeModel(seed=0)
    c = constrained(model)
    c.begin()
    sampling = SamplingParams(temp=2.0, seed=0)
    hybrid = HybridDrafter(NgramDrafter(), DraftModelDrafter(lambda: FakeModel(seed=1), sampling, c), GrammarDrafter(c))
    hybrid.begin([3, 4, 5])
    d = hybrid.propose([3, 4, 5], 6)
    assert d.forced and d.tokens and len(d.q) == len(d.tokens)
    assert d.q[: d.forced] == [None] * d.forced  # forced tokens: certain (one-hot)
