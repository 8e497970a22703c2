"""`specchat models check PAIR`: the break-even α by k comes from the
measured cost curve and draft step, the speedups from a probe that bench's
runner decodes, one verdict per drafter, and the last verdict is kept and
shown in `specchat models` and the chat's pair list (F4)."""

from __future__ import annotations

import json
import statistics

import pytest
from typer.testing import CliRunner

from specchat.bench.check import verdict
from specchat.bench.scorecard import best_k, expected_tokens
from specchat.cli.main import app
from specchat.decoding.costmodel import interpolate
from specchat.store import verdicts
from tests.support.clock import steady_timer


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def tiny_store(specchat_home, tiny_pair, monkeypatch):
    """The tiny pair pulled, as the store the commands read (the tests' shared store)."""
    from tests.conftest import models_cache_dir

    monkeypatch.setenv("SPECCHAT_MODELS", str(models_cache_dir()))
    return specchat_home


@pytest.mark.real
def test_a_jittering_timer_gives_no_verdict_and_keeps_none(tiny_store, monkeypatch):
    steady_timer(monkeypatch, jitter=0.5)
    result = cli("models", "check", "smollm2-135m", "--max-tokens", "4", "--threads", "1")
    assert result.exit_code == 0, result.output
    said = result.stdout.splitlines()
    # The check stops as soon as its cost curve is too noisy: no probe runs, no verdict.
    header = next(i for i, line in enumerate(said) if line.startswith("drafter  k"))
    drafters = [line.split(maxsplit=1) for line in said[header + 1 : said.index("", header)]]
    assert [name for name, _ in drafters] == ["draft", "ngram", "auto"]
    assert all(said.startswith("the machine is too busy to tell (repeated decodes differ by ±")
               for _, said in drafters)  # fmt: skip
    as_json = json.loads(cli("models", "check", "smollm2-135m", "--max-tokens", "4", "--threads", "1", "--json").stdout)
    assert as_json["runs"] == [] and as_json["untrusted"].startswith("repeated decodes differ by ±")
    assert said[-2].startswith("no verdict: the machine is too busy to tell (repeated decodes differ by ±")
    assert said[-2].endswith("); none kept. Run it again on a quieter machine")
    assert said[-1] == "every timing: specchat models check --json"
    assert not (tiny_store / "data" / "verdicts.json").exists()
    assert "checked" not in cli("models").stdout  # nothing shown beside the pair


def test_figures_a_busy_machine_fakes_are_refused():
    from specchat.bench.check import untrusted
    from specchat.bench.scorecard import CostCurve, break_even_by_k

    curve = CostCurve(512, [1, 2, 3, 4, 5], [0.010, 0.012, 0.015, 0.018, 0.020], 5, noise=0.02)
    table = break_even_by_k(curve, 0.004, range(1, 5))
    ok = [{"drafter": "draft", "k": 4, "speedup_median": 1.3}, {"drafter": "auto", "k": 16, "speedup_median": 9.0}]
    assert untrusted(curve, 0.03, table, ok) is None
    assert untrusted(curve, 0.12, table, ok) == "repeated decodes differ by ±12%"
    fast = [{"drafter": "draft", "k": 4, "speedup_median": 4.18}]
    assert untrusted(curve, 0.02, table, fast) == "draft at 4.18×, above the 2.50× the cost curve allows at k=4"
    falls = CostCurve(512, [1, 2, 3], [0.010, 0.012, 0.009], 5, noise=0.02)
    assert untrusted(falls, 0.02, break_even_by_k(falls, None, range(1, 3)), ok[:0]) == (
        "the cost curve falls from 2 to 3 positions (12.0 → 9.0 ms)")
    cheap = CostCurve(512, [1, 2, 3], [0.010, 0.008, 0.0085], 5, noise=0.2)  # within its noise, but α < 1
    assert untrusted(cheap, 0.05, break_even_by_k(cheap, None, range(1, 3)), []) == "repeated decodes differ by ±20%"
    cheap.noise = 0.09
    assert untrusted(cheap, 0.05, break_even_by_k(cheap, None, range(1, 3)), []) == (
        "a break-even α of 0.80 at k=1, below 1")


@pytest.mark.real
def test_check_on_the_tiny_pair_measures_break_even_and_a_verdict_per_drafter(tiny_store, monkeypatch):
    steady_timer(monkeypatch)  # a steady clock: the verdict is given
    result = cli("models", "check", "smollm2-135m", "--json", "--max-tokens", "8", "--threads", "1")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert {"pair", "checked_at", "max_tokens", "target_step_s", "cost_curve", "draft_step_s", "draft_step_ratio",
            "break_even", "drafters", "runs", "prompts"} <= set(out)  # fmt: skip
    assert out["pair"] == "smollm2-135m" and out["max_tokens"] == 8
    assert [(p["suite"], p["id"]) for p in out["prompts"]] == [
        ("code-edit", "rename-variable"), ("summarize", "fix-typo"), ("chat", "process-thread")]  # fmt: skip

    # Break-even α for k = 1..8 is the cost model's own arithmetic on the JSON's measured curve.
    curve = dict(zip(out["cost_curve"]["positions"], out["cost_curve"]["seconds"]))
    step, draft = out["target_step_s"], out["draft_step_s"]
    assert step == curve[1] and draft > 0 and out["draft_step_ratio"] == pytest.approx(draft / step)
    assert [row["k"] for row in out["break_even"]] == list(range(1, 9))
    for row in out["break_even"]:
        k = row["k"]
        assert row["ngram"] == pytest.approx(interpolate(curve, k + 1) / step)
        assert row["draft"] == pytest.approx((interpolate(curve, k + 1) + k * draft) / step)

    # Each drafter's speedup is the median of its probe runs' tok/s over their paired off run's.
    assert set(out["drafters"]) == {"draft", "ngram", "auto"}
    runs = out["runs"]
    assert [r["slot"] + r["drafter"] for r in runs[:4]] == ["Aoff", "Bdraft", "Bngram", "Bauto"]  # bench's order
    off = {r["cycle"]: r["tok_s"] for r in runs if r["slot"] == "A"}
    for name, d in out["drafters"].items():
        ratios = [r["tok_s"] / off[r["cycle"]] for r in runs if r["drafter"] == name]
        assert len(ratios) == 3 and all(r["identical"] for r in runs if r["drafter"] == name)  # greedy: same text
        assert d["speedup_median"] == pytest.approx(statistics.median(ratios))
        assert d["speedup_range"] == pytest.approx([min(ratios), max(ratios)])
        assert d["verdict"] == verdict(d)
        assert d["verdict"].startswith({"faster": "pays here (", "slower": "loses here (",
                                        "no measurable difference": "break-even ("}[d["measured"]])  # fmt: skip
        needed = [row[name] for row in out["break_even"]] if name != "auto" else None
        assert d["best_k"] == (best_k(d["per_position_acceptance"], needed) if needed else None)

    # The verdict is kept, and `specchat models` shows it beside the pair.
    kept = json.loads((tiny_store / "data" / "verdicts.json").read_text())["pairs"]["smollm2-135m"]
    assert kept == {"checked_at": out["checked_at"], "drafters": {n: d["verdict"] for n, d in out["drafters"].items()}}
    listing = cli("models").stdout
    line = f"checked {out['checked_at'][:10]}: draft {out['drafters']['draft']['verdict']} · "
    assert line in listing


def test_the_check_reads_as_a_verdict_table_and_keeps_its_timings_for_json():
    from specchat.bench.check import lines

    def drafter(k, alpha, median, lo, hi, best, said):
        return {"k": k, "alpha": alpha, "speedup_median": median, "speedup_range": [lo, hi], "best_k": best,
                "verdict": said}  # fmt: skip

    result = {
        "pair": "a-pair", "max_tokens": 64, "prompts": [{}, {}, {}],
        "machine": {"cpu_model": "a CPU", "threads": 2},
        "target_step_s": 0.02, "draft_step_s": 0.004, "draft_step_ratio": 0.2,
        "cost_curve": {"context_tokens": 512, "positions": [1, 9, 17], "seconds": [0.02, 0.05, 0.08], "steps": 5},
        "break_even": [{"k": 1, "draft": 1.25, "ngram": 1.04}, {"k": 8, "draft": 2.9, "ngram": 2.5}],
        "drafters": {
            "draft": drafter(4, 1.8, 1.12, 0.97, 1.31, 3, "pays here (1.3× on code-edit; median 1.12×)"),
            "ngram": drafter(16, 1.1, 0.81, 0.7, 0.9, None, "loses here (0.81×): auto will not use it"),
            "auto": {"speedup_median": None, "verdict": "not measured"},
        },
        "untrusted": None, "interrupted": False,
    }  # fmt: skip
    said = lines(result)
    assert said[0] == "specchat models check · a-pair · a CPU, 2 threads · 3 prompts of 64 tokens"
    assert said[2:6] == [
        "drafter  k   α     speedup  by prompt   best k  verdict",
        "draft    4   1.80  1.12×    0.97–1.31×  3       pays here (1.3× on code-edit; median 1.12×)",
        "ngram    16  1.10  0.81×    0.70–0.90×  none    loses here (0.81×): auto will not use it",
        "auto                                            not measured",
    ]
    assert "a plain step takes 20.0 ms; a verify of 17 positions costs 4.00 plain steps, a draft model step 0.20" in said
    table = said[said.index("break-even α (tokens per verify) by k:   k=1    k=8"):]
    assert [row.split() for row in table[1:3]] == [["draft", "1.25", "2.90"], ["ngram", "1.04", "2.50"]]
    assert table[1].index("1.25") + 4 == table[0].index("k=1") + 3  # each figure under its k
    assert said[-1] == "every timing: specchat models check --json" and not any(" ms · " in line for line in said)


def test_bad_prompts_fail_before_any_model_loads(specchat_home, tmp_path):
    (tmp_path / "empty").mkdir()
    result = cli("models", "check", "smollm2-135m", "--prompts", str(tmp_path / "empty"))
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"error: --prompts: no .txt files in {tmp_path / 'empty'}", "hint: put one prompt in each NAME.txt file"]  # fmt: skip


def row(measured, median, drafter="draft"):
    return {"drafter": drafter, "speedup_median": median, "measured": measured, "spread": [0.95, 1.08],
            "best_suite": "code-edit", "best_suite_speedup": 1.43}  # fmt: skip


def test_the_verdict_in_words():
    assert verdict(row("faster", 1.2)) == "pays here (1.4× on code-edit; median 1.20×)"
    assert verdict(row("slower", 0.8)) == "loses here (0.80×): auto will not use it"
    assert verdict(row("slower", 0.8, "auto")) == "loses here (0.80×)"
    assert verdict(row("no measurable difference", 1.03)) == "break-even (1.03×; spread 0.95–1.08×)"
    assert verdict(row("no measurable difference", None)) == "not measured"


def test_best_k_weighs_expected_tokens_against_each_ks_cost():
    # Measured: 90% of drafts reaching position 0 accepted there, 81% through position 1.
    assert expected_tokens([0.9, 0.81], 2) == pytest.approx(1 + 0.9 + 0.81)
    assert expected_tokens([0.9, 0.81], 3) == pytest.approx(1 + 0.9 + 0.81 + 0.81 * 0.9)  # the last rate goes on
    # k=1 costs 1.2 steps for 1.9 tokens, k=2 1.4 steps for 2.71, k=3 3.0 steps for 3.439.
    assert best_k([0.9, 0.81], [1.2, 1.4, 3.0]) == 2
    assert best_k([0.1], [1.2, 1.4, 3.0]) is None  # 1.1 tokens for 1.2 steps: a plain step is better


async def test_f4_shows_the_last_verdict_beside_its_pair(specchat_home):
    from textual.widgets import OptionList

    from specchat.config import Settings
    from specchat.tui.app import SpecchatApp
    from specchat.tui.state.models import Models
    from tests.support.tui import wait_until

    verdicts.save("smollm2-135m", "2026-12-01T10:00:00+0000", {"draft": "break-even (1.01×)", "ngram": "loses here"})
    app = SpecchatApp(Models(), Settings(), history=None, save_settings=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "PullScreen" and app.screen.query("#pull-yes"))  # nothing pulled
        await pilot.press("escape")
        await pilot.press("f4")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "PairPicker")
        ol = app.screen.query_one(OptionList)
        text = {ol.get_option_at_index(i).id: str(ol.get_option_at_index(i).prompt) for i in range(ol.option_count)}
        assert text["smollm2-135m"].endswith("\n   checked 2026-12-01: draft break-even (1.01×) · ngram loses here")
        assert "checked" not in text["qwen2.5-coder-1.5b"]


def test_a_check_stops_when_its_curve_is_noisy_or_its_time_is_up():
    import time
    from types import SimpleNamespace

    from specchat.bench.check import stop_rule
    from specchat.bench.scorecard import CostCurve

    bench = SimpleNamespace(curve=None)
    now = time.monotonic()
    assert stop_rule(bench, now)() is None  # still measuring the curve, in time
    bench.curve = CostCurve(512, [1, 2], [0.010, 0.012], 5, noise=0.04)
    assert stop_rule(bench, now)() is None
    assert stop_rule(bench, now - 421)() == "the check ran past 7 minutes and stopped"
    bench.curve.noise = 0.3
    assert stop_rule(bench, now)() == "repeated decodes differ by ±30%"
