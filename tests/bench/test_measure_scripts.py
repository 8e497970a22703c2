"""The README's measuring scripts still run and print what the README quotes
(their numbers are the README's business; here only that they come out)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import models_cache_dir

HERE = Path(__file__).parents[1]  # tests/


def script(name: str, *args: str, env: dict | None = None) -> str:
    """Run tools/NAME as the README does: a module, from the repository root."""
    r = subprocess.run([sys.executable, "-m", f"tools.{name}", *args], capture_output=True, text=True, timeout=600,
                       cwd=HERE.parent, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_tui_overhead_on_the_fake_model():
    out = script("tui_overhead", "--replies", "2", "--max-tokens", "24", "--step", "0.005")
    assert re.search(r"^ +no UI: 24 tokens in \d+ rounds", out, re.M), out
    assert re.search(r"^ +ui: 24 tokens in \d+ rounds", out, re.M), out
    assert re.search(r"^ui vs no UI, reply by reply: [-+]\d+\.\d% [-+]\d+\.\d%$", out, re.M), out
    assert re.search(r"decode speed \d+\.\d% of no-UI", out), out


ROW = re.compile(r"^ +(\w+) +(\d+\.\d) +(\d+\.\d\d) +(\d+) +(\d+\.\d) +(\d+) +(\d+\.\d\d)%$", re.M)


def overhead_rows(out: str) -> dict[str, dict]:
    """engine_overhead's table: each drafter's printed figures, as numbers."""
    names = ("tok_s", "alpha", "rounds", "rows_per_round", "own_us", "share")
    return {m.group(1): dict(zip(names, map(float, m.groups()[1:]))) for m in ROW.finditer(out)}


def assert_adds_up(row: dict, tokens: int, step_s: float) -> None:
    """A row's figures agree with each other, each within its printed rounding:
    specchat's time (µs a round × rounds) is its share of the decode time
    (tokens / tok/s), and what is left, the stand-ins' own, holds at least
    one target step of `step_s` a round (the stand-in waits it out)."""
    def span(value: float, half: float) -> tuple[float, float]:
        return value - half, value + half

    (tok_lo, tok_hi), (share_lo, share_hi) = span(row["tok_s"], 0.05), span(row["share"] / 100, 0.00005)
    own_lo, own_hi = (x * row["rounds"] * 1e-6 for x in span(row["own_us"], 0.5))
    assert own_lo <= share_hi * tokens / tok_lo and share_lo * tokens / tok_hi <= own_hi, row
    assert (1 - share_lo) * tokens / tok_lo >= row["rounds"] * step_s, row


def test_engine_overhead_prints_each_drafters_own_cost_at_the_h200s_costs():
    """The table's shape and arithmetic, never this machine's speed."""
    out = script("engine_overhead", "--tokens", "48", "--repeat", "1")
    assert "a target step 2.19 ms, a draft step 1.42 ms" in out  # the bare loops of docs/h200-curves
    rows = overhead_rows(out)
    assert set(rows) == {"off", "ngram", "draft", "auto"}, out
    off = rows["off"]
    assert (off["alpha"], off["rounds"], off["rows_per_round"]) == (0.0, 48, 1.0)  # a round per token, a row each
    assert rows["ngram"]["alpha"] > 2 and rows["draft"]["alpha"] > 1  # the stand-in reply copies its prompt
    for row in rows.values():
        assert_adds_up(row, 48, 0.002185)  # 2.19 ms as printed, less its rounding
    # So off, a target step a token, can never pass 48 tokens in 48 steps: under 1 / 2.185 ms.
    assert off["tok_s"] < 1 / 0.002185
    at_once = script("engine_overhead", "--tokens", "48", "--repeat", "1", "--no-wait")
    assert "a target step 0.00 ms, a draft step 0.00 ms" in at_once, at_once
    free = overhead_rows(at_once)
    assert set(free) == set(rows), at_once
    for name, row in free.items():
        assert_adds_up(row, 48, 0.0)
        if name != "auto":  # auto prices by the measured clock; the others decide the same with or without waits
            assert [row[f] for f in ("alpha", "rounds", "rows_per_round")] == \
                   [rows[name][f] for f in ("alpha", "rounds", "rows_per_round")], (name, out, at_once)


@pytest.mark.real
def test_thread_vs_main_takes_turns_on_the_tiny_pair(tiny_pair):
    out = script("thread_vs_main", "--pair", "smollm2-135m", "--arms", "thread", "app", "--procs", "1",
                 "--replies", "2", "--max-tokens", "16", env={"SPECCHAT_MODELS": str(models_cache_dir())})
    assert re.search(r"^processes 1: thread median [-+]\d+\.\d%.*, app median [-+]\d+\.\d%", out, re.M), out
    for kind in ("thread", "app"):
        assert re.search(rf"^{kind} vs main, slower per token, 2 replies: median [-+]\d+\.\d%", out, re.M), out
    assert out.count("the 1 sets' medians: ") == 2, out


@pytest.mark.real
def test_replay_predicts_every_policy_on_the_h200_curve(default_pair):
    root = HERE.parent
    out = subprocess.run(
        [sys.executable, str(root / "tools" / "replay.py"), str(root / "docs" / "measurements" / "bench-default-pair.json"),
         "--costs", str(root / "docs" / "measurements" / "h200-curves-2026-11-30.json"), "--target", "target", "--draft", "draft"],
        capture_output=True, text=True, timeout=600, cwd=root,
        env={**os.environ, "SPECCHAT_MODELS": str(models_cache_dir())},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "replay of 25 replies" in out.stdout and "a plain step 2.19 ms" in out.stdout
    rows = {re.match(r"\s*(.+?)\s{2,}", line).group(1): line for line in out.stdout.splitlines() if line.endswith("×")}
    speedups = {name: [float(x) for x in re.findall(r"(\d+\.\d+)×", line)] for name, line in rows.items()}
    assert speedups["off"] == [1.0] * 5
    assert set(speedups) >= {"ngram k=16", "draft k=4", "auto k≤16", "ngram ceiling", "ngram oracle"}
    # Copying pays most where verifying 17 positions costs 3 steps, not 11: code-edit is the copy-heavy suite.
    assert speedups["auto k≤16"][0] > 1.5
    assert all(o >= c - 0.01 for o, c in zip(speedups["ngram oracle"], speedups["ngram ceiling"]))


@pytest.mark.real
def test_gpu_probe_runs_end_to_end_on_the_cpu(tiny_pair, tmp_path):
    models = tmp_path / "m"
    models.mkdir()
    for name in ("target", "draft", "big"):  # the tiny model under all three names
        (models / f"{name}.gguf").symlink_to(tiny_pair[0])
    out = subprocess.run(
        [sys.executable, str(HERE.parent / "tools" / "gpu_probe.py"), str(models), str(tmp_path / "out"),
         "--max-tokens", "12", "--loop-steps", "4"],
        capture_output=True, text=True, timeout=900,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    table = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == "| what | specchat | reference | ratio | bar |"
    assert any(line.startswith("| loading, numpy imported first | specchat run rc 0 |") for line in table)
    assert any(line.startswith("| outside llama.cpp, off target | ") for line in table)
    again = subprocess.run([sys.executable, str(HERE.parent / "tools" / "gpu_probe.py"), str(models), str(tmp_path / "out"),
                            "--table"], capture_output=True, text=True, timeout=60)
    assert [line for line in again.stdout.splitlines() if line.startswith("| ")] == table  # from probe.json alone
    assert any(line.startswith("| `--drafter off`, target |") and "llama-bench tg: n/a" in line for line in table)
    assert sum(line.startswith("| shown baseline, ") for line in table) == 6
    report = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert all(run["rc"] == 0 for run in report["runs"].values())
    assert report["runs"]["off target"]["devices"]["target"]["backend"] == "CPU"
    # Where greedy picks are made, compared both ways: on this CPU the host keeps them.
    assert any(line.startswith("| bare loop step, target (ms), argmax host |") for line in table)
    assert any(line.startswith("| off target, argmax where specchat puts it |") for line in table)
    assert report["runs"]["off target"]["devices"]["target"]["argmax"] == "host"


def doctables(page: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.doctables", *args, str(page)], capture_output=True,
                          text=True, timeout=60, cwd=HERE.parent)


def test_a_measurement_table_comes_from_its_file_and_a_stale_one_fails_the_check(tmp_path):
    """tools/doctables fills each measurement's table block from its JSON;
    --check fails on a block edited by hand or a file that is gone, with one
    line and nothing written."""
    kept = tmp_path / "measurements"
    kept.mkdir()
    report = json.loads((HERE.parent / "docs" / "measurements" / "bench-json.json").read_text())
    (kept / "run.json").write_text(json.dumps(report))
    page = tmp_path / "scorecard.md"
    page.write_text("# s\n\n<!-- table: run.json -->\nwritten by hand\n<!-- end table -->\n\nafter\n")
    where = ("--measurements", str(kept))

    stale = doctables(page, "--check", *where)
    assert stale.returncode == 1 and "stale" in stale.stderr and "written by hand" in page.read_text()
    assert doctables(page, *where).returncode == 0
    text = page.read_text()
    assert "written by hand" not in text and text.endswith("<!-- end table -->\n\nafter\n")
    assert report["command"] in text  # the command that measured it
    json_row = next(line for line in text.splitlines() if line.startswith("| json |"))
    auto = next(r for r in report["rows"] if r["drafter"] == "auto")
    assert f"| {auto['speedup']:.2f}× | {auto['alpha']:.2f} | {auto['acceptance_rate']:.0%} |" in json_row
    off = next(r for r in report["rows"] if r["drafter"] == "off")
    assert json_row.startswith(f"| json | {off['tok_s']:.1f} | {off['tokens'] / off['runs']:.0f} |")
    assert doctables(page, "--check", *where).returncode == 0

    (kept / "run.json").unlink()
    gone = doctables(page, "--check", *where)
    assert gone.returncode == 1 and "no table source run.json" in gone.stderr and len(gone.stderr.splitlines()) == 1


def test_the_tables_copied_from_the_code_follow_it(tmp_path):
    """The keys, drafters and pairs tables are the code's: every drafter
    with its k, every key with its help line, every built-in pair; and the
    repository's own pages are up to date."""
    from specchat.drafters import SPECS
    from specchat.store.catalog import builtin_catalog
    from specchat.tui.chat.keys import ACTIONS

    page = tmp_path / "guide.md"
    page.write_text("".join(f"<!-- table: {name} -->\n<!-- end table -->\n" for name in ("keys", "drafters", "pairs")))
    assert doctables(page).returncode == 0
    rows = page.read_text().splitlines()
    for s in SPECS:
        row = next(r for r in rows if r.startswith(f"| `{s.name}`"))
        assert s.drafts in row and row.endswith(f"| {s.k if s.name != 'off' else '–'} |")
    for a in ACTIONS:
        assert any(a.help in r for r in rows), a.id
    for name in builtin_catalog().pairs:
        assert any(r.startswith(f"| `{name}`") for r in rows), name
    ours = subprocess.run([sys.executable, "-m", "tools.doctables", "--check"], capture_output=True, text=True,
                          timeout=60, cwd=HERE.parent)
    assert ours.returncode == 0, ours.stderr


@pytest.mark.real
def test_baseline_check_prints_a_row_per_prompt_on_a_real_pair(tiny_pair, tmp_path):
    """The table's shape on the small real pair; its figures are the machine's."""
    target, draft = tiny_pair
    prompt = tmp_path / "copy.txt"
    prompt.write_text("Repeat this line exactly: the quick brown fox jumps over the lazy dog, twice.")
    out = script("baseline_check", "--target", str(target), "--draft", str(draft), "--prompt", str(prompt),
                 "--rounds", "2", "--max-tokens", "24", "--threads", "1", env={"SPECCHAT_HOME": str(tmp_path / "home")})
    rows = [line for line in out.splitlines() if line.startswith("| copy |")]
    assert len(rows) == 1, out
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert re.fullmatch(r"\d+\.\d{3}|–", cells[1]) and cells[3].endswith("of 2"), out
