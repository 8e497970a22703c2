"""How a bench reads: the rich table, the lines under it (devices, the cost
curve, break-even α, the n-gram timing, the spread, schema results), and
the JSON report written whole. The figures are scorecard's."""

from __future__ import annotations

import json
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from specchat import paths
from specchat.bench.scorecard import NOISY, OFF, POSITIONS_SHOWN, REFERENCE, CostCurve, unique
from specchat.display import device_text, number
from specchat.textsafe import safe_text


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def table(report_rows: list[dict], title: str = "specchat bench") -> Table:
    """The scorecard: one line per suite and configuration."""
    t = Table(title=Text(safe_text(title)), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for name in ("suite", "drafter", "k"):
        t.add_column(name, no_wrap=True)
    for name in ("len", "α", "acc", "tok/s", "off", "speedup", "same", "draft", "verify", "plain", "other"):
        t.add_column(name, justify="right", no_wrap=True)
    t.add_column("acc by position", no_wrap=True)
    last_suite = None
    for r in report_rows:
        if last_suite is not None and r["suite"] != last_suite:
            t.add_section()
        last_suite = r["suite"]
        drafted = r["drafter"] not in (OFF, REFERENCE)
        sh = r["shares"]
        t.add_row(
            Text(safe_text(r["suite"])),  # a user's suite name is text, never markup or terminal control
            Text(safe_text(r["drafter"])),
            str(r["k"]) if drafted else "",
            f"{r['reply_tokens']:.0f}",
            number(r["alpha"]) if drafted else "",
            _pct(r["acceptance_rate"]) if drafted else "",
            number(r["tok_s"], ".1f"),
            number(r["off_tok_s"], ".1f"),
            number(r["speedup"], ".2f", "×"),
            _pct(r["identical_rate"]) if r["drafter"] != OFF else "",
            _pct(sh["draft"]),
            _pct(sh["verify"]),
            _pct(sh["plain"]),
            _pct(sh["other"]),
            " ".join(f"{a * 100:.0f}" for a in r["per_position_acceptance"][:POSITIONS_SHOWN]),
        )
    return t


def devices_line(devices: dict) -> str:
    """Where the target and the draft model ran (llamacpp.placement's dicts)."""
    return " · ".join(f"{role}: {device_text(devices.get(role))}" for role in ("target", "draft"))


def curve_line(curve: CostCurve) -> str:
    points = " · ".join(
        f"{n}: {t * 1e3:.1f} ms {x:.2f}×" for n, t, x in zip(curve.positions, curve.seconds, curve.ratios())
    )
    return f"verify cost curve (positions: time, steps) at {curve.context_tokens} context tokens: {points}"


def break_even_lines(items: list[dict]) -> list[str]:
    lines = []
    for b in items:
        name = f"{b['drafter']} k={b['k']}"
        if b["needed_alpha"] is None:
            lines.append(f"break-even {name}: never drafted")
            continue
        verdict = "above" if b["measured_alpha"] >= b["needed_alpha"] else "below"
        lines.append(
            f"break-even {name}: needs α ≥ {b['needed_alpha']:.2f}, measured {b['measured_alpha']:.2f} ({verdict}) · "
            f"per round in steps: verify {b['verify_steps']:.2f} (mean draft {b['mean_draft']:.1f}) "
            f"+ draft {b['draft_steps']:.2f} + other {b['other_steps']:.2f}"
        )
    return lines


def ngram_line(t: dict) -> str:
    mark = "ok" if t["ok"] else "OVER"
    return (
        f"n-gram proposal at {t['context_tokens']} context tokens: mean {t['mean_ms']:.3f} ms, "
        f"p99 {t['p99_ms']:.3f} ms over {t['calls']} calls (bar: mean < {t['bar_ms']} ms, {mark})"
    )


def schema_lines(runs: list[dict]) -> list[str]:
    """Per suite whose prompts carry a schema: how many replies parse and
    match it, and each one that does not."""
    out = []
    for suite in unique(r["suite"] for r in runs if r.get("valid") is not None):
        checked = [r for r in runs if r["suite"] == suite and r.get("valid") is not None]
        good = sum(r["valid"] for r in checked)
        out.append(f"{suite}: {good} of {len(checked)} replies parse as JSON and match their prompt's schema")
        for r in checked:
            if not r["valid"]:
                k = f" k={r['k']}" if r["k"] else ""
                out.append(f"  {r['prompt']} · {r['drafter']}{k}: {safe_text(r['schema_error'])}")
    return out


def spread_lines(items: list[dict]) -> list[str]:
    """One line per configuration: its median speedup over every prompt run,
    the spread, and a win or a loss only where 1× lies outside the spread."""
    lines = []
    for o in items:
        if o["speedup_median"] is None:
            continue
        lo, hi = o["speedup_range"]
        mid_lo, mid_hi = o["spread"]
        lines.append(
            f"{o['drafter']} k={o['k']}: median speedup {o['speedup_median']:.2f}× over {o['pairs']} prompt runs "
            f"(spread {mid_lo:.2f}–{mid_hi:.2f}×, all {lo:.2f}–{hi:.2f}×): {o['measured']}"
        )
    return lines


def show(report: dict, console: Console) -> None:
    """The scorecard table and the lines under it."""
    m = report["machine"]
    title = (
        f"specchat bench · {report['pair']['name']} · {m['cpu_model']}, {m['threads']} threads · "
        f"max {report['settings']['max_tokens']} tokens, temp {report['settings']['temp']}"
    )
    console.print(table(report["rows"], title=title))
    console.print(Text(safe_text(devices_line(m.get("devices") or {})), style="dim"))
    console.print(
        "len: tokens per reply · tok/s: decode only, prefill excluded · off: the off runs decoded in the same prompt cycles as that row · "
        "same: output identical to off · draft/verify/plain/other: shares of decode time · "
        "reference: a bare greedy loop on the driver, no engine",
        style="dim",
    )
    if report["cost_curve"]:
        console.print(curve_line(CostCurve.from_dict(report["cost_curve"])))
    for line in break_even_lines(report["break_even"]):
        console.print(line)
    if report["ngram_proposal"]:
        console.print(ngram_line(report["ngram_proposal"]))
    for line in spread_lines(report.get("overall", [])):
        console.print(line)
    for line in schema_lines(report.get("runs", [])):
        console.print(line)
    for about in dict.fromkeys(report.get("data", {}).values()):  # a public set's categories share one line
        console.print(Text(safe_text(f"data: {about}"), style="dim"))
    peak = max((r["peak_rss_mb"] for r in report["rows"]), default=0.0)
    console.print(f"peak RSS {peak:.0f} MB")
    la = m["load_average"]
    console.print(f"load average {la['start'][0]:.2f} at start, {la.get('end', [0])[0]:.2f} at end", style="dim")
    spread = report.get("off_spread")
    if spread and spread > NOISY:
        console.print(
            f"warning: the off runs' speed varied {spread:.1f}× during the bench: the machine was busy, "
            "so these figures are noisy (speedup_median in the JSON is the robust one)",
            style="yellow",
        )
    if report["interrupted"]:
        console.print(
            f"interrupted: partial results ({report['runs_done']} of {report['runs_planned']} runs)", style="yellow"
        )


def write_json(report: dict, path: str) -> None:
    """The report, written whole or not at all (the path was checked before the work: checks.output_file)."""
    paths.write_atomic(Path(path).expanduser().absolute(), json.dumps(report, indent=1, ensure_ascii=False) + "\n")
