"""docs/scorecard.md's tables, generated from the measurements' JSON.

Each table in the page sits between two comment lines; the first names its
file under docs/measurements/:

    <!-- table: bench-2026-12-04-intel-mt-bench.json -->
    (generated: the machine, the command, the date, the table)
    <!-- end table -->

`python -m tools.scorecard` rewrites every such block from its file, and
`python -m tools.scorecard --check` (run by .ci/lint) fails where a block
is not what its file gives. A file is either a `specchat bench --json`
report (one row per category and turn: off's speed and reply length, then
each drafter's speedup over the off runs it alternated with, α and
acceptance) or a `python -m tools.native_compare --json` run (its own
table, the median of its rounds, and its per-category summary).

    python -m tools.scorecard [--check] [PAGE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"(<!-- table: (?P<name>[^ ]+) -->\n)(?P<body>.*?)(<!-- end table -->)", re.S)
SKIPPED = ("off", "reference")  # not drafters: off is the baseline, reference the bare loop


def cell(text: object) -> str:
    """Text for a markdown table cell: a pipe or a line break would end it."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def times(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def bench_block(report: dict) -> list[str]:
    """A bench report as a table: per category and turn, off's tok/s and
    reply length, and each drafter's speedup, α and acceptance."""
    m, s = report["machine"], report["settings"]
    head = [
        f"{report['started_at'][:16].replace('T', ' ')} · {cell(m['cpu_model'])}, {m['threads']} threads · "
        f"{cell(report['pair']['name'])} · max {s['max_tokens']} tokens, temp {s['temp']}:",
        "",
        f"    {report['command']}",
        "",
    ]
    rows = report["rows"]
    drafters = list(dict.fromkeys((r["drafter"], r["k"]) for r in rows if r["drafter"] not in SKIPPED))
    labels = [f"{d} k={k}" if k and d != "auto" else d for d, k in drafters]
    lines = [
        "| category · turn | off tok/s | reply tokens | " + " | ".join(f"{x} | α | acc" for x in labels) + " |",
        "|---" * (3 + 3 * len(drafters)) + "|",
    ]
    for suite in dict.fromkeys(r["suite"] for r in rows):
        by = {(r["drafter"], r["k"]): r for r in rows if r["suite"] == suite}
        off = by.get(("off", 0))
        cells = [cell(suite), "–", "–"]
        if off:
            cells[1:] = [f"{off['tok_s']:.1f}", f"{off['tokens'] / max(off['runs'], 1):.0f}"]
        for key in drafters:
            r = by.get(key)
            cells += [times(r["speedup"]), f"{r['alpha']:.2f}", f"{r['acceptance_rate']:.0%}"] if r else ["–"] * 3
        lines.append("| " + " | ".join(cells) + " |")
    overall = {(o["drafter"], o["k"]): o for o in report.get("overall", [])}
    if overall:
        cells = ["all (median of the pairs)", "", ""]
        for key in drafters:
            o = overall.get(key)
            cells += [times(o["speedup_median"]), f"{o['alpha']:.2f}", ""] if o else ["–", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return head + lines


def native_block(run: dict) -> list[str]:
    """A native_compare run: its header, its table and its per-category summary."""
    m = run["meta"]
    head = [
        f"{m['started']} · {cell(m.get('cpu_model', 'CPU not recorded'))}, {m['threads']} threads · "
        f"{cell(m['target'])} · max {m['max_tokens']} tokens · medians of {m['rounds']} rounds:",
        "",
    ]
    if "command" in m:
        head += [f"    {m['command']}", ""]
    summary = run.get("summary") or []
    return head + run["table"] + ([""] + summary if summary else [])


def render(path: Path) -> str:
    data = json.loads(path.read_text())
    lines = bench_block(data) if "rows" in data else native_block(data)
    return "\n".join(lines) + "\n"


def rebuild(page: str, folder: Path) -> str:
    """The page with every table block rendered from its file."""

    def fill(m: re.Match) -> str:
        return m.group(1) + render(folder / m.group("name")) + m.group(4)

    return BLOCK.sub(fill, page)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.scorecard", description=__doc__.splitlines()[0])
    ap.add_argument("page", nargs="?", type=Path, default=DOCS / "scorecard.md")
    ap.add_argument("--check", action="store_true", help="fail where a table is not what its file gives")
    args = ap.parse_args(argv)
    page = args.page.read_text()
    folder = args.page.parent / "measurements"
    missing = [m.group("name") for m in BLOCK.finditer(page) if not (folder / m.group("name")).is_file()]
    if missing:
        print(f"{args.page}: no measurement file {missing[0]} in {folder}", file=sys.stderr)
        return 1
    new = rebuild(page, folder)
    if args.check:
        if new != page:
            print(f"{args.page} is stale: run python -m tools.scorecard", file=sys.stderr)
            return 1
        return 0
    if new != page:
        args.page.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
