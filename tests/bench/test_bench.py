"""`specchat bench`: the scorecard arithmetic on fabricated runs, the suites,
the command's errors, and one tiny real bench on smollm2-135m that checks the
JSON report and the A B A B order."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from specchat.bench import measure as measure_mod
from specchat.bench.plan import make_plan
from specchat.bench.report import show, write_json
from specchat.bench.runner import Bench
from specchat.bench.scorecard import CostCurve, Run, break_even, rows
from specchat.bench.suites import SUITES, Prompt, Suite, load_suite
from specchat.cli.main import app
from specchat.decoding.stats import Round, TurnStats, position_counts
from specchat.errors import SpecchatError

# --- fabricated runs ----------------------------------------------------------------------


def stats(tokens, t_decode, *, alpha=0.0, verify_rounds=0, plain_steps=0, drafted=0, accepted=0, t_draft=0.0, t_verify=0.0, t_plain=0.0):
    return TurnStats(
        tokens=tokens,
        t_decode=t_decode,
        tok_s=tokens / t_decode,
        alpha=alpha,
        verify_rounds=verify_rounds,
        plain_steps=plain_steps,
        drafted=drafted,
        accepted=accepted,
        t_draft=t_draft,
        t_verify=t_verify,
        t_plain=t_plain,
        t_other=t_decode - t_draft - t_verify - t_plain,
    )


def run(seq, pair, slot, drafter, k, s, **kw):
    return Run(seq=seq, cycle=pair, slot=slot, suite="s", prompt=f"p{pair}", repeat=0, drafter=drafter, k=k, stats=s, **kw)


@pytest.fixture
def fabricated():
    """Two pairs off/ngram, one pair off/reference, then an A left without its B."""
    return [
        run(0, 1, "A", "off", 0, stats(100, 10.0, plain_steps=100, t_plain=9.5), peak_rss_mb=100),
        run(1, 1, "B", "ngram", 4, stats(100, 5.0, alpha=4.0, verify_rounds=20, plain_steps=20, drafted=70, accepted=60, t_draft=0.1, t_verify=3.0, t_plain=1.5),
            offered=[20, 20, 15, 15], hits=[18, 16, 14, 12], identical=True, peak_rss_mb=120),
        run(2, 2, "A", "off", 0, stats(50, 10.0, plain_steps=50, t_plain=9.9), peak_rss_mb=130),
        run(3, 2, "B", "ngram", 4, stats(60, 10.0, alpha=2.0, verify_rounds=10, plain_steps=40, drafted=20, accepted=10, t_draft=0.2, t_verify=5.0, t_plain=4.0),
            offered=[10, 10], hits=[6, 4], identical=False, first_divergence=7, peak_rss_mb=140),
        run(4, 3, "A", "off", 0, stats(40, 4.0, plain_steps=40, t_plain=4.0)),
        run(5, 3, "B", "reference", 0, stats(40, 2.0, plain_steps=40, t_plain=2.0), identical=True),
        run(6, 4, "A", "off", 0, stats(10, 1.0, plain_steps=10, t_plain=1.0)),
    ]


def by(rows_, drafter):
    (row,) = [r for r in rows_ if r["drafter"] == drafter]
    return row


def test_position_counts_come_from_verify_rounds_only():
    rounds = [
        Round(accepted=[1, 2], rejected=[3], target=4, drafter="ngram", plain=False),
        Round(accepted=[], rejected=[5, 6], target=7, drafter="ngram", plain=False),
        Round(accepted=[], rejected=[], target=8, drafter="off", plain=True),
        Round(accepted=[9, 9, 9, 9], rejected=[], target=1, drafter="ngram", plain=False),
    ]
    assert position_counts(rounds) == ([3, 3, 2, 1], [2, 2, 1, 1])


def test_rows_sum_runs_before_dividing(fabricated):
    ngram = by(rows(fabricated), "ngram")
    assert ngram["runs"] == 2 and ngram["tokens"] == 160
    assert ngram["tok_s"] == pytest.approx(160 / 15.0)
    assert ngram["off_tok_s"] == pytest.approx(150 / 20.0)  # only the off runs paired with it
    assert ngram["speedup"] == pytest.approx((160 / 15.0) / (150 / 20.0))
    assert ngram["speedup_median"] == pytest.approx((20.0 / 10.0 + 6.0 / 5.0) / 2)  # pair ratios 2.0 and 1.2
    assert ngram["alpha"] == pytest.approx((4.0 * 20 + 2.0 * 10) / 30)
    assert ngram["acceptance_rate"] == pytest.approx(70 / 90)
    assert ngram["per_position_acceptance"] == pytest.approx([24 / 30, 20 / 30, 14 / 15, 12 / 15])
    assert ngram["identical_rate"] == 0.5
    assert ngram["shares"] == pytest.approx({"draft": 0.3 / 15, "verify": 8.0 / 15, "plain": 5.5 / 15, "other": 1.2 / 15})
    assert sum(ngram["shares"].values()) == pytest.approx(1.0)
    assert ngram["peak_rss_mb"] == 140
    assert ngram["order"] == "ABAB"


def test_off_row_takes_every_off_run_and_reference_pairs_like_a_config(fabricated):
    r = rows(fabricated)
    assert [x["drafter"] for x in r] == ["off", "ngram", "reference"]
    off = by(r, "off")
    assert off["runs"] == 4 and off["tok_s"] == pytest.approx(200 / 25.0) and off["speedup"] == 1.0
    assert off["reply_tokens"] == pytest.approx(200 / 4)  # the mean reply's length, the table's len
    assert off["identical_rate"] is None and off["order"] == "AAAA"
    ref = by(r, "reference")
    assert ref["speedup"] == pytest.approx(2.0) and ref["order"] == "AB"


def test_off_spread_flags_a_busy_machine(fabricated):
    from specchat.bench.scorecard import off_spread

    assert off_spread(fabricated) == pytest.approx(10.0 / 5.0)  # off ran at 10, 5, 10 and 10 tok/s
    out = io.StringIO()
    report = {"rows": rows(fabricated), "off_spread": 2.0, "cost_curve": None, "break_even": [], "ngram_proposal": None,
              "interrupted": False, "pair": {"name": "p"}, "settings": {"max_tokens": 8, "temp": 0.0},
              "machine": {"cpu_model": "cpu", "threads": 2, "load_average": {"start": [1.0], "end": [1.0]}}}
    show(report, Console(file=out, width=200))
    assert "warning: the off runs' speed varied 2.0× during the bench" in out.getvalue()
    off_line = next(line for line in out.getvalue().splitlines() if line.split()[1:2] == ["off"])
    assert " len " in out.getvalue() and off_line.split()[2] == "50"  # 200 tokens over 4 replies


def test_cost_curve_interpolates_and_extrapolates():
    curve = CostCurve(512, [1, 2, 3], [0.010, 0.019, 0.030])
    assert curve.step == 0.010
    assert curve.at(1) == 0.010 and curve.at(0.5) == 0.010
    assert curve.at(2.5) == pytest.approx(0.0245)
    assert curve.at(5) == pytest.approx(0.030 + 2 * 0.011)
    assert curve.ratios() == pytest.approx([1.0, 1.9, 3.0])
    assert CostCurve.from_dict(json.loads(json.dumps(curve.to_dict()))) == curve


def test_break_even_alpha_from_the_curve_and_measured_costs(fabricated):
    curve = CostCurve(512, [1, 2, 3, 4, 5], [0.010, 0.019, 0.028, 0.037, 0.046])
    (ngram,) = break_even(curve, fabricated)  # the reference loop has no break-even
    # 30 verify rounds drafted 90 tokens: mean draft 3, so a verify costs 4 positions = 3.7 steps.
    assert ngram["mean_draft"] == pytest.approx(3.0)
    assert ngram["verify_steps"] == pytest.approx(3.7)
    assert ngram["draft_steps"] == pytest.approx(0.3 / 30 / 0.010)
    assert ngram["other_steps"] == pytest.approx(1.2 / 90 / 0.010)
    assert ngram["needed_alpha"] == pytest.approx(3.7 + 1.0 + 1.2 / 0.9)
    assert ngram["measured_alpha"] == pytest.approx(100 / 30)


def test_break_even_of_a_drafter_that_never_drafted():
    runs = [run(0, 1, "A", "off", 0, stats(10, 1.0)), run(1, 1, "B", "auto", 4, stats(10, 1.0, plain_steps=10))]
    (auto,) = break_even(CostCurve(64, [1, 2], [0.01, 0.02]), runs)
    assert auto["needed_alpha"] is None and auto["measured_alpha"] == 0.0


# --- suites and options ------------------------------------------------------------------------


@pytest.mark.parametrize("name", SUITES)
def test_packaged_suites_have_four_to_six_prompts(name):
    suite = load_suite(name)
    assert suite.name == name and 4 <= len(suite.prompts) <= 6
    assert len({p.id for p in suite.prompts}) == len(suite.prompts)


@pytest.mark.parametrize("name", ["code-edit", "summarize"])
def test_copy_heavy_suites_carry_the_text_to_copy(name):
    for p in load_suite(name).prompts:
        body = p.text.split("\n\n", 1)[1]  # the instruction, then what the reply repeats
        assert len(body) >= 400, p.id


def test_suite_from_a_file(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('name = "mine"\n[[prompt]]\nid = "a"\ntext = "hello"\n')
    assert load_suite(str(path)) == Suite("mine", (Prompt("a", "hello"),))


def test_plan_keeps_off_as_the_partner_and_adds_the_reference():
    plan = make_plan("math,chat", "off,ngram,ngram,draft", "2,4", max_tokens=16)
    assert plan.drafters == ["ngram", "draft"]
    assert plan.configs == [("ngram", 2), ("ngram", 4), ("draft", 2), ("draft", 4), ("reference", 0)]
    assert plan.total_runs == (5 + 5) * (5 + 1)  # per prompt: off once, then each config
    assert plan.to_dict()["drafters"] == ["off", "ngram", "draft"]


def test_auto_is_accepted_once_the_registry_has_it():
    from specchat.drafters import NAMES

    if "auto" in NAMES:
        assert make_plan("math", "auto", "4").drafters == ["auto"]
    else:
        with pytest.raises(SpecchatError, match="unknown drafter 'auto'"):
            make_plan("math", "auto", "4")


@pytest.mark.parametrize(
    "args, message",
    [
        (("math", "off,bogus", "4"), "unknown drafter 'bogus'"),
        (("math", "ngram", "4,x"), "--k takes whole numbers, got 'x'"),
        (("math", "ngram:abc", ""), "--drafters ngram:K takes whole numbers, got 'abc'"),
        (("math", "ngram:4:5", "4"), "--drafters ngram:K takes whole numbers, got '4:5'"),
        (("math", "ngram:", "4"), "--drafters ngram:K takes whole numbers, got ''"),
        (("math", "ngram", "0"), "--k 0 is out of range: it must be between 1 and 64"),
        (("math", "ngram:70", "4"), "--drafters ngram:K 70 is out of range"),
        (("poetry", "ngram", "4"), "unknown suite 'poetry'"),
    ],
)
def test_plan_errors(args, message):
    with pytest.raises(SpecchatError, match=message) as err:
        make_plan(*args)
    assert err.value.hint


def cli(*args: str):
    return CliRunner().invoke(app, ["bench", *args])


def test_missing_pair_is_one_line_and_a_hint(specchat_home):
    result = cli("--pair", "smollm2-135m", "--suites", "math", "--drafters", "ngram")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["error: pair 'smollm2-135m' is not pulled yet", "hint: specchat pull smollm2-135m"]


def test_unknown_drafter_fails_before_loading(specchat_home):
    result = cli("--drafters", "off,bogus")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == "error: unknown drafter 'bogus'"


# --- a tiny real bench ----------------------------------------------------------------------------

TINY = Suite(
    "tiny",
    (
        Prompt("rename", "Rename `n` to `count` and return the code:\n\ndef f(n):\n    return n + n\n"),
        Prompt("capital", "What is the capital of France?"),
    ),
)


@pytest.fixture(scope="module")
def tiny_session(tiny_pair):
    from specchat.session.loader import open_session
    from specchat.session.options import DecodeOptions, LoadOptions

    target, draft = tiny_pair
    # One thread: this shared 2-core machine stalls llama.cpp's thread barriers.
    s = open_session(
        LoadOptions(target=str(target), draft=str(draft), threads=1, ctx=1024),
        DecodeOptions(drafter="off", k=2, baseline_every=0, max_tokens=12),
    )
    yield s
    s.close()


@pytest.fixture
def small_measures(monkeypatch):
    monkeypatch.setattr(measure_mod, "CURVE_CONTEXT", 64)
    monkeypatch.setattr(measure_mod, "CURVE_REPEATS", 2)


@pytest.mark.real
def test_tiny_bench_report_and_ab_order(tiny_session, tiny_pair, small_measures, tmp_path):
    plan = make_plan("math", "ngram,draft", "2", max_tokens=12)
    plan.suites = [TINY]
    b = Bench(tiny_session, plan)
    b.run()
    path = tmp_path / "bench.json"
    from specchat.bench.measure import file_facts

    write_json(b.report({"name": "tiny", "target": file_facts(tiny_pair[0]), "draft": file_facts(tiny_pair[1])}), str(path))
    report = json.loads(path.read_text())

    assert not report["interrupted"] and report["runs_done"] == report["runs_planned"] == 2 * (3 + 1)
    assert set(report) >= {"settings", "machine", "pair", "suites", "cost_curve", "ngram_proposal", "rows", "break_even", "runs"}
    assert {"cpu_model", "logical_cores", "threads", "llama_system_info", "load_average"} <= set(report["machine"])
    assert len(report["pair"]["target"]["sha256"]) == 64

    # Per prompt one off run, then every configuration on the same prompt.
    runs = report["runs"]
    assert [r["seq"] for r in runs] == list(range(len(runs)))
    assert "".join(r["slot"] for r in runs) == "ABBB" * 2
    for cycle in (runs[:4], runs[4:]):
        assert cycle[0]["drafter"] == "off"
        assert len({r["cycle"] for r in cycle}) == 1 and len({r["prompt"] for r in cycle}) == 1
        assert [(r["drafter"], r["k"]) for r in cycle[1:]] == [("ngram", 2), ("draft", 2), ("reference", 0)]

    rows_ = {r["drafter"]: r for r in report["rows"]}
    assert set(rows_) == {"off", "ngram", "draft", "reference"}
    assert all(r["order"] == "ABAB" for d, r in rows_.items() if d != "off") and rows_["off"]["order"] == "A" * 2
    for r in rows_.values():
        assert r["tokens"] > 0 and r["tok_s"] > 0 and r["speedup"] > 0
        assert sum(r["shares"].values()) == pytest.approx(1.0, abs=0.01)
    # The draft model is the target itself: it drafts what the target says.
    assert rows_["draft"]["alpha"] >= 0.9 * 3 and rows_["draft"]["acceptance_rate"] >= 0.9
    assert len(rows_["draft"]["per_position_acceptance"]) == 2
    # The bare loop decodes exactly what the engine decodes with drafting off.
    assert rows_["reference"]["identical_rate"] == 1.0

    curve = report["cost_curve"]
    assert curve["positions"] == [1, 2, 3] and all(t > 0 for t in curve["seconds"]) and curve["context_tokens"] == 64
    assert {b_["drafter"] for b_ in report["break_even"]} == {"ngram", "draft"}
    assert all(b_["needed_alpha"] > 0 for b_ in report["break_even"] if b_["drafter"] == "draft")
    assert report["ngram_proposal"]["context_tokens"] == 32768 and report["ngram_proposal"]["mean_ms"] > 0

    out = io.StringIO()
    show(report, Console(file=out, width=200))
    text = out.getvalue()
    assert "tiny" in text and "reference" in text and "break-even draft k=2: needs α ≥" in text
    assert "n-gram proposal at 32768 context tokens" in text


@pytest.mark.real
def test_ctrl_c_keeps_the_partial_results(tiny_session, small_measures, monkeypatch):
    plan = make_plan("math", "ngram", "2", max_tokens=8)
    plan.suites = [TINY]
    b = Bench(tiny_session, plan)
    decode = Bench._decode
    calls = []

    def interrupt_third(self, *args):
        calls.append(args)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return decode(self, *args)

    monkeypatch.setattr(Bench, "_decode", interrupt_third)
    b.run()
    report = b.report()
    assert report["interrupted"] and report["runs_done"] == 2 and report["runs_planned"] == 6
    assert [r["drafter"] for r in report["rows"]] == ["off", "ngram"]
    out = io.StringIO()
    show(report, Console(file=out, width=200))
    assert "interrupted: partial results (2 of 6 runs)" in out.getvalue()
    assert "ngram" in out.getvalue()


@pytest.mark.real
def test_a_stop_ends_the_bench_mid_run_and_drops_the_run_it_cut(tiny_session, small_measures):
    plan = make_plan("math", "ngram", "2", max_tokens=8)
    plan.suites, plan.extras = [TINY], False  # off and ngram only: the third run is the engine's
    b = Bench(tiny_session, plan)
    asked_in_third_run = []

    def stop():  # asked before each run and at each round: say stop at the third run's second round
        if len(b.runs) == 2:
            asked_in_third_run.append(1)
        return "time is up" if len(asked_in_third_run) >= 3 else None

    b.stop = stop
    b.run()
    report = b.report()
    assert report["stopped"] == "time is up" and not report["interrupted"]
    assert report["runs_done"] == 2 and [r["drafter"] for r in report["runs"]] == ["off", "ngram"]
