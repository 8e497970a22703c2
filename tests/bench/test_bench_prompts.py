"""`specchat bench --prompts PATH`: the user's own prompts as a suite (a
folder of .txt files or one suite TOML), one line for each bad input; and
bench's median speedup with its spread, where a spread that holds 1× is
"no measurable difference"."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from specchat.bench.plan import make_plan
from specchat.bench.report import show
from specchat.bench.scorecard import Run, overall
from specchat.bench.suites import MAX_FILE_BYTES, load_prompts
from specchat.cli.main import app
from specchat.decoding.stats import TurnStats


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
        (lambda d: _write(d / "bad.toml", "[[prompt]\nid = 1"), "{p} is not valid TOML: ", 'a suite file holds [[prompt]] tables: id = "…" and text = "…" (or turns = ["…", "…"])'),
        (lambda d: _write(d / "notext.toml", '[[prompt]]\nid = "a"\n'), "{p}: every [[prompt]] needs an id and a text (or turns)", 'a suite file holds [[prompt]] tables: id = "…" and text = "…" (or turns = ["…", "…"])'),
        (lambda d: _write(d / "none.toml", 'name = "x"\n'), "suite '{p}' has no prompts", "add [[prompt]] tables with id and text"),
        (lambda d: _folder(d / "vast", {"a.txt": "x" * (MAX_FILE_BYTES + 1)}), "--prompts: {p}/a.txt is 1,048,577 bytes, over the 1 MiB a prompt or a suite may hold", "prompts are UTF-8 text files"),
        (lambda d: _write(d / "vast.toml", "#" * (MAX_FILE_BYTES + 1)), "--prompts: {p} is 1,048,577 bytes, over the 1 MiB a prompt or a suite may hold", "prompts are UTF-8 text files"),
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


def test_a_speedup_whose_spread_holds_one_is_no_measurable_difference():
    # Paired ratios: ngram 1.10, 0.95, 1.20 (its middle half 1.025–1.15×, above 1×);
    # draft 1.6, 1.5, 0.9 (middle half 1.2–1.55×, 1.575 by the floor); auto 0.7, 1.2, 0.8 (0.75–1.0×, holding 1×).
    runs = bench_runs(
        [10.0, 10.0, 10.0], {"ngram": [11.0, 9.5, 12.0], "draft": [16.0, 15.0, 9.0], "auto": [7.0, 12.0, 8.0]}
    )
    rows = {o["drafter"]: o for o in overall(runs)}
    assert rows["ngram"]["speedup_median"] == pytest.approx(1.1) and rows["ngram"]["speedup_range"] == pytest.approx(
        [0.95, 1.2]
    )
    assert (
        rows["ngram"]["spread"] == pytest.approx([1.025, 1.155]) and rows["ngram"]["measured"] == "faster"
    )  # floor: 1.1 × 1.05
    assert rows["draft"]["spread"] == pytest.approx([1.2, 1.575]) and rows["draft"]["measured"] == "faster"
    # By suite: s0 (cycles 0 and 2) at 1.6 and 0.9, median 1.25×; s1 (cycle 1) at 1.5×.
    assert rows["draft"]["best_suite"] == "s1" and rows["draft"]["best_suite_speedup"] == pytest.approx(1.5)
    assert (
        rows["auto"]["spread"] == pytest.approx([0.75, 1.0]) and rows["auto"]["measured"] == "no measurable difference"
    )

    slower = overall(bench_runs([10.0, 10.0], {"draft": [7.0, 8.0]}))[0]
    assert slower["spread"] == pytest.approx([0.7125, 0.7875]) and slower["measured"] == "slower"

    out = io.StringIO()
    report = {"rows": [], "overall": overall(runs), "off_spread": 1.0, "cost_curve": None, "break_even": [],
              "ngram_proposal": None, "interrupted": False, "pair": {"name": "p"}, "settings": {"max_tokens": 8, "temp": 0.0},
              "machine": {"cpu_model": "cpu", "threads": 2, "load_average": {"start": [1.0], "end": [1.0]}}}  # fmt: skip
    show(report, Console(file=out, width=300))
    text = out.getvalue()
    assert "ngram k=4: median speedup 1.10× over 3 prompt runs (spread 1.02–1.16×, all 0.95–1.20×): faster" in text
    assert (
        "auto k=4: median speedup 0.80× over 3 prompt runs (spread 0.75–1.00×, all 0.70–1.20×): no measurable difference"
        in text
    )


def test_a_steady_small_speedup_is_inside_the_floor():
    (row,) = overall(bench_runs([10.0, 10.0], {"ngram": [10.3, 10.4]}))
    assert row["spread"] == pytest.approx([1.035 * 0.95, 1.035 * 1.05])
    assert row["measured"] == "no measurable difference"  # 1.035× on two runs that agree: within ±5%
