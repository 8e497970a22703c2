"""`specchat bench --prompts PATH`: the user's own prompts as a suite (a
folder of .txt files or one suite TOML), one line for each bad input; and
bench's median speedup with its spread, where a speedup inside the off
runs' own variation is "no measurable difference"."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from specchat.bench.runner import make_plan, show
from specchat.bench.scorecard import Run, noise_band, overall
from specchat.bench.suites import load_prompts
from specchat.cli import app
from specchat.stats import TurnStats


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_folder_of_txt_files_is_a_suite_named_by_the_folder(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "b-summary.txt").write_text("Summarize: the cat sat on the mat.\n")
    (folder / "a-edit.txt").write_text("Rename x to y:\n\nx = 1\nprint(x)\n")
    (folder / "notes.md").write_text("not a prompt")
    suite = load_prompts(str(folder))
    assert suite.name == "mine"
    assert [(p.id, p.text) for p in suite.prompts] == [
        ("a-edit", "Rename x to y:\n\nx = 1\nprint(x)"), ("b-summary", "Summarize: the cat sat on the mat.")]  # fmt: skip
    plan = make_plan("code-edit", "ngram", "", prompts=str(folder))
    assert plan.suites == [suite]  # the only suite


def test_a_suite_toml_is_a_suite(tmp_path):
    path = tmp_path / "team.toml"
    path.write_text(
        'name = "team"\n[[prompt]]\nid = "one"\ntext = "Say hi."\n[[prompt]]\nid = "two"\ntext = "Say bye."\n'
    )
    suite = load_prompts(str(path))
    assert suite.name == "team" and [(p.id, p.text) for p in suite.prompts] == [("one", "Say hi."), ("two", "Say bye.")]


@pytest.mark.parametrize(
    "make, error, hint",
    [
        (lambda d: d / "nowhere", "--prompts: {p} does not exist", "pass a folder of .txt files (one prompt each) or a suite .toml"),
        (lambda d: _write(d / "p.json", "{}"), "--prompts: {p} is not a folder or a .toml file", "pass a folder of .txt files (one prompt each) or a suite .toml"),
        (lambda d: _folder(d / "empty"), "--prompts: no .txt files in {p}", "put one prompt in each NAME.txt file"),
        (lambda d: _folder(d / "blank", {"a.txt": " \n"}), "--prompts: {p}/a.txt is empty", "write one prompt in each .txt file"),
        (lambda d: _write(d / "bad.toml", "[[prompt]\nid = 1"), "{p} is not valid TOML: ", 'a suite file holds [[prompt]] tables: id = "…" and text = "…"'),
        (lambda d: _write(d / "notext.toml", '[[prompt]]\nid = "a"\n'), "{p}: every [[prompt]] needs an id and a text", 'a suite file holds [[prompt]] tables: id = "…" and text = "…"'),
        (lambda d: _write(d / "none.toml", 'name = "x"\n'), "suite '{p}' has no prompts", "add [[prompt]] tables with id and text"),
    ],
)  # fmt: skip
def test_each_bad_prompts_path_is_one_line_before_any_model_loads(specchat_home, tmp_path, make, error, hint):
    path = make(tmp_path)
    result = cli("bench", "--pair", "no-such-pair", "--prompts", str(path))
    lines = result.output.splitlines()
    assert result.exit_code in (1, 2) and "Traceback" not in result.output
    assert len(lines) == 2 and lines[0].startswith("error: " + error.format(p=path)), lines
    assert lines[1] == f"hint: {hint}"


def _write(path, text: str):
    path.write_text(text)
    return path


def _folder(path, files: dict[str, str] | None = None):
    path.mkdir()
    for name, text in (files or {}).items():
        (path / name).write_text(text)
    return path


# --- the spread ---------------------------------------------------------------------------


def run(seq, cycle, slot, drafter, tok_s, suite="s"):
    stats = TurnStats(tokens=int(tok_s * 10), t_decode=10.0, tok_s=tok_s)
    return Run(seq=seq, cycle=cycle, slot=slot, suite=suite, prompt=f"p{cycle}", repeat=0, drafter=drafter,
               k=4 if drafter != "off" else 0, stats=stats)  # fmt: skip


def bench_runs(off: list[float], b: dict[str, list[float]]) -> list[Run]:
    """One cycle per off speed: off, then each drafter at its speed in that cycle."""
    runs: list[Run] = []
    for cycle, speed in enumerate(off):
        runs.append(run(len(runs), cycle, "A", "off", speed, suite=f"s{cycle % 2}"))
        for name, speeds in b.items():
            runs.append(run(len(runs), cycle, "B", name, speeds[cycle], suite=f"s{cycle % 2}"))
    return runs


def test_a_speedup_inside_the_off_runs_spread_is_no_measurable_difference():
    # Off ran at 9, 10 and 11 tok/s: its own spread is 0.9–1.1× of its median.
    runs = bench_runs(
        [9.0, 10.0, 11.0], {"ngram": [9.9, 10.5, 11.55], "draft": [14.0, 15.0, 15.0], "auto": [6.0, 7.0, 8.0]}
    )
    assert noise_band([r for r in runs if r.slot == "A"]) == pytest.approx((0.9, 1.1))
    rows = {o["drafter"]: o for o in overall(runs)}
    assert (
        rows["ngram"]["speedup_median"] == pytest.approx(1.05)
        and rows["ngram"]["measured"] == "no measurable difference"
    )
    assert rows["ngram"]["speedup_range"] == pytest.approx([1.05, 1.1])
    assert rows["draft"]["speedup_median"] == pytest.approx(15.0 / 10.0) and rows["draft"]["measured"] == "faster"
    # By suite: s0 (cycles 0 and 2) at 14/9 and 15/11, median 1.46×; s1 (cycle 1) at 1.5×.
    assert rows["draft"]["best_suite"] == "s1" and rows["draft"]["best_suite_speedup"] == pytest.approx(1.5)
    assert rows["auto"]["speedup_median"] == pytest.approx(0.7) and rows["auto"]["measured"] == "slower"

    out = io.StringIO()
    report = {"rows": [], "overall": overall(runs), "off_spread": 1.2, "cost_curve": None, "break_even": [],
              "ngram_proposal": None, "interrupted": False, "pair": {"name": "p"}, "settings": {"max_tokens": 8, "temp": 0.0},
              "machine": {"cpu_model": "cpu", "threads": 2, "load_average": {"start": [1.0], "end": [1.0]}}}  # fmt: skip
    show(report, Console(file=out, width=300))
    text = out.getvalue()
    assert ("ngram k=4: median speedup 1.05× over 3 prompt runs (paired ratios 1.05–1.10×; off runs 0.90–1.10× of "
            "their median): no measurable difference") in text  # fmt: skip
    assert "draft k=4: median speedup 1.50× over 3 prompt runs" in text and "): faster" in text
    assert "auto k=4: median speedup 0.70×" in text and "): slower" in text


def test_the_band_is_never_narrower_than_the_floor():
    runs = bench_runs([10.0, 10.0], {"ngram": [10.3, 10.4]})
    assert noise_band([r for r in runs if r.slot == "A"]) == (0.95, 1.05)
    (row,) = overall(runs)
    assert row["measured"] == "no measurable difference"  # 1.035× on a machine that was perfectly steady twice
