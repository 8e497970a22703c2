"""The mtp drafter: the MTP head a target ships, on a synthetic Qwen3.5
(random weights, the real layout: a hybrid trunk and one MTP layer, made by
tools/synth_gguf.py). Its α means nothing; what it must do is read the
target's hidden state at the right positions, catch up across rounds as a
fresh head would, and leave the sampled distribution exactly the target's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import chisquare
from typer.testing import CliRunner

from specchat.cli.main import app
from specchat.decoding import kvcache
from specchat.decoding.sampling import SamplingParams, probs
from specchat.engine.loop import Engine
from tools.synth_gguf import write

PROMPT = "Repeat after me: red green blue red green blue."


@pytest.fixture(scope="module")
def qwen35(tiny_pair, tmp_path_factory):
    from specchat.llamacpp.llama import Model

    path = write("qwen35", tmp_path_factory.mktemp("mtp") / "qwen35.gguf", tiny_pair[0])
    m = Model(path, n_ctx=512, n_threads=2, n_gpu_layers=0)
    yield m
    m.close()


def drafter_on(model, sampling=SamplingParams()):
    from specchat.drafters.mtp import MtpDrafter
    from specchat.llamacpp.mtp import mtp_head

    return MtpDrafter(lambda: mtp_head(model), sampling)


@pytest.mark.real
def test_the_hidden_states_are_the_targets_at_each_position(qwen35):
    m = qwen35
    tokens = m.tokenize(PROMPT)
    m.truncate(0)
    m.eval(tokens, n_logits=1)
    whole = m.hidden.rows[: len(tokens)].copy()
    m.truncate(5)
    m.eval(tokens[5:9], n_logits=4)  # a verify...
    m.truncate(7)  # ...with two drafts rejected
    m.eval(tokens[7:], n_logits=1)
    assert np.allclose(m.hidden.rows[: len(tokens)], whole, atol=1e-4)
    assert np.abs(whole).sum(axis=1).min() > 0  # a state at every position


@pytest.mark.real
def test_the_head_drafts_after_many_rounds_what_a_fresh_head_drafts(qwen35):
    prompt = qwen35.tokenize(PROMPT)
    used = drafter_on(qwen35)
    turn = Engine(qwen35, used, k=3, baseline_every=0).generate(prompt, 30)
    assert turn.stats.drafted > 0 and len(turn.rounds) > 5  # it caught up across rounds
    context = prompt + turn.tokens  # the target holds all but the pending token
    fresh = drafter_on(qwen35)
    try:
        assert used.propose(context, 6).tokens == fresh.propose(context, 6).tokens
        assert len(fresh.propose(context, 6).tokens) == 6
        # A proposal after another drafter's pending tokens chains them like its own.
        pending = context[-2:]
        assert used.propose(context, 4, pending=pending).tokens == fresh.propose(context, 4, pending=pending).tokens
    finally:
        used.close(), fresh.close()


@pytest.mark.real
def test_sampled_mtp_drafts_leave_the_targets_distribution_on_a_hybrid_model(qwen35):
    """Each sampled token's place in the target's own distribution given what
    came before (its randomised CDF value, in tenths of the probability mass)
    is uniform when speculative sampling is exact: a chi-square test over
    the tenths, for every token of every reply. Drafts are sampled from the
    head and verified on the hybrid trunk, which rolls rejected tokens back
    from its state snapshots. (Accepting every drafted token, or half of
    them whatever p says, fails this test at p < 1e-40.)"""
    m = qwen35
    prompt = m.tokenize(PROMPT)
    sp = SamplingParams(temp=1.0)
    drafter = drafter_on(m, sp)
    rng = np.random.default_rng(7)
    tenths = np.zeros(10, dtype=int)
    drafted = accepted = 0
    try:
        for seed in range(300):
            drafter.rng = np.random.default_rng(10_000 + seed)
            turn = Engine(m, drafter, k=3, sampling=SamplingParams(temp=1.0, seed=seed), baseline_every=0).generate(
                prompt, 8
            )
            drafted += turn.stats.drafted
            accepted += turn.stats.accepted
            kvcache.sync(m, prompt[:-1], logits=False)  # a hybrid's state rolls back only so far: it may start over
            m.eval(prompt[-1:] + turn.tokens[:-1], n_logits=len(turn.tokens))  # the target's own rows, plainly
            for j, t in enumerate(turn.tokens):
                p = probs(m.logits(j), sp)
                below = p[p > p[t]].sum() + rng.random() * p[t]  # ties are ~impossible in float rows
                tenths[min(int(below * 10), 9)] += 1
    finally:
        drafter.close()
    assert 0 < accepted < drafted  # both acceptance and rejection were exercised
    assert chisquare(tenths).pvalue > 0.001, tenths


@pytest.mark.real
def test_a_model_drafting_for_itself_drafts_with_its_head_not_a_second_copy(qwen35):
    path = str(qwen35.path)
    args = ["run", PROMPT, "--target", path, "--draft", path, "--json", "--max-tokens", "12", "--no-history"]
    for drafter, loaded in (("hybrid", "mtp"), ("draft", "draft")):
        r = CliRunner().invoke(app, [*args, "--drafter", drafter])
        assert r.exit_code == 0, r.output
        devices = json.loads(r.stdout)["devices"]
        assert [role for role in ("draft", "mtp") if devices.get(role)] == [loaded], drafter


@pytest.mark.real
def test_mtp_on_a_target_without_a_head_is_one_line(tiny_pair):
    r = CliRunner().invoke(app, ["run", "hi", "--target", str(tiny_pair[0]), "--drafter", "mtp", "--max-tokens", "2"])
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [
        "error: drafter 'mtp' needs a target that ships an MTP draft head",
        "hint: models scan names the models that do (Qwen3.5, GLM-4.5, MiMo); use another drafter here",
    ]


def test_mtp_tokens_have_their_own_colour_in_every_mode_and_theme():
    from specchat.decoding.stats import Round
    from specchat.display import round_spans
    from specchat.themes import BUILTIN, SPEC_VARIABLES, span_style

    for theme in BUILTIN:
        v = theme.variables
        assert v["spec-mtp"] not in {v[n] for n in SPEC_VARIABLES if n not in ("spec-mtp", "spec-good", "spec-bad")}
    for mode in ("mtp", "hybrid", "auto"):
        r = Round(
            accepted=[6],
            rejected=[8],
            target=7,
            drafter="mtp",
            plain=False,
            mode=mode,
            accepted_text=" x",
            rejected_text=" y",
            target_text=" z",
        )
        styles = {s["kind"]: span_style(s["kind"], s["drafter"]) for s in round_spans(r)}
        assert styles == {"accepted": "$spec-mtp", "rejected": "strike $spec-rejected", "target": ""}, mode


def test_models_check_probes_the_head_of_a_model_that_ships_one():
    from specchat.bench.check import check_plan, probe_suites

    suites = probe_suites(None)
    assert check_plan(suites, False, 16, has_mtp=True).drafters == ["mtp", "ngram", "auto"]
    assert check_plan(suites, True, 16).drafters == ["draft", "ngram", "auto"]
