"""The tables in README.md and docs/ that are copies of something else,
generated from it: the chat's keys (tui/chat/keys.py's ACTIONS), the drafters
(drafters' SPECS), the model pairs (the built-in catalog) and each
measurement (its JSON under docs/measurements/).

Each such table sits between two comment lines; the first names its source:

    <!-- table: keys -->          (or drafters, pairs, or FILE.json)
    (generated)
    <!-- end table -->

`python -m tools.doctables` rewrites every block from its source, and
`python -m tools.doctables --check` (run by .ci/lint) fails where a block
is not what its source gives. A measurement is either a `specchat bench
--json` report (one row per category and turn: off's speed and reply
length, then each drafter's speedup over the off runs it alternated with,
α and acceptance) or a `python -m tools.native_compare --json` run (its own
table, the median of its rounds, and its per-category summary).

    python -m tools.doctables [--check] [--measurements DIR] [PAGE ...]
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


def started(stamp: str) -> str:
    """bench's start, "2026-12-04T17:48:52+0000", as "2026-12-04 17:48 +0000"."""
    return f"{stamp[:10]} {stamp[11:16]} {stamp[19:]}".rstrip()


def bench_block(report: dict) -> list[str]:
    """A bench report as a table: per category and turn, off's tok/s and
    reply length, and each drafter's speedup, α and acceptance."""
    m, s = report["machine"], report["settings"]
    head = [
        f"{started(report['started_at'])} · {cell(m['cpu_model'])}, {m['threads']} threads · "
        f"{cell(report['pair']['name'])} · max {s['max_tokens']} tokens, temp {s['temp']}:",
        "",
        f"    {report['command']}",
        "",
    ]
    rows = report["rows"]
    drafters = list(dict.fromkeys((r["drafter"], r["k"]) for r in rows if r["drafter"] not in SKIPPED))
    labels = [f"{d} k={k}" if k and d != "auto" else d for d, k in drafters]
    reference = any(r["drafter"] == "reference" for r in rows)  # off's work without the engine: the noise
    lines = [
        "| category · turn | off tok/s | reply tokens | " + " | ".join(f"{x} | α | acc" for x in labels)
        + (" | reference |" if reference else " |"),
        "|---" * (3 + 3 * len(drafters) + reference) + "|",
    ]
    for suite in dict.fromkeys(r["suite"] for r in rows):
        by = {(r["drafter"], r["k"]): r for r in rows if r["suite"] == suite}
        off = by.get(("off", 0))
        cells = [cell(suite), "–", "–"]
        if off:
            cells[1:] = [f"{off['tok_s']:.1f}", f"{off['tokens'] / max(off['runs'], 1):.0f}"]
        for key in drafters:
            r = by.get(key)
            drafted = r is not None and r["verify_rounds"] > 0  # α and acceptance of no draft are no figures
            cells += [times(r["speedup"]) if r else "–"]
            cells += [f"{r['alpha']:.2f}", f"{r['acceptance_rate']:.0%}"] if r and drafted else ["–", "–"]
        if reference:
            cells.append(times(by[("reference", 0)]["speedup"]) if ("reference", 0) in by else "–")
        lines.append("| " + " | ".join(cells) + " |")
    overall = {(o["drafter"], o["k"]): o for o in report.get("overall", [])}
    if overall:
        cells = ["all (median of the pairs)", "", ""]
        for key in drafters:
            o = overall.get(key)
            cells += [times(o["speedup_median"]), f"{o['alpha']:.2f}", ""] if o else ["–", "", ""]
        lines.append("| " + " | ".join(cells + [""] * reference) + " |")
    return head + lines


def native_block(run: dict) -> list[str]:
    """A native_compare run: its header, its table and its per-category summary."""
    m = run["meta"]
    cpu = f"{cell(m['cpu_model'])}, " if "cpu_model" in m else ""  # runs before it was recorded: the heading names it
    head = [
        f"{m['started']} · {cpu}{m['threads']} threads · {cell(m['target'])} · max {m['max_tokens']} tokens · "
        f"medians of {m['rounds']} rounds:",
        "",
    ]
    if "command" in m:
        head += [f"    {m['command']}", ""]
    summary = run.get("summary") or []
    return head + run["table"] + ([""] + summary if summary else [])


def key(name: str) -> str:
    """A key as the legend writes it: `F1`, `ctrl+d`."""
    shown = name.upper() if re.fullmatch(r"f\d+", name) else name
    return f"`{shown}`"


def keys_block() -> list[str]:
    """Every key of the chat, as ACTIONS binds it and the legend lists it."""
    from specchat.tui.chat.keys import ACTIONS, OTHER_KEYS

    lines = ["| key | what it does |", "|---|---|"]
    lines += [f"| {' / '.join(map(key, a.keys.split(',')))} | {cell(a.help)} |" for a in ACTIONS]
    lines += [f"| `{name}` | {cell(what)} |" for name, what in OTHER_KEYS]
    return lines


def drafters_block() -> list[str]:
    """Each drafter: what drafts and its k, from drafters' SPECS."""
    from specchat.drafters import SPECS

    lines = ["| drafter | what drafts | default k |", "|---|---|---|"]
    for s in SPECS:
        name = f"`{s.name}`" + (" (default)" if s.name == "auto" else "")
        lines.append(f"| {name} | {cell(s.drafts)} | {s.k if s.drafts_tokens else '–'} |")
    return lines


def pairs_block() -> list[str]:
    """The built-in catalog's pairs (a user's own pairs are not specchat's)."""
    from specchat.store.catalog import builtin_catalog

    catalog = builtin_catalog()
    lines = ["| pair | target, draft | from |", "|---|---|---|"]
    for p in catalog.pairs.values():
        name = f"`{p.name}`" + (" (default)" if p.name == catalog.default else "")
        about = p.description + (f"; {p.note}" if p.note else "")
        mirrored = all(f.mirror is not None for _, f in p.roles())
        lines.append(f"| {name} | {cell(about)} | {'the Hub, or its PyPI mirror' if mirrored else 'the Hub'} |")
    return lines


FROM_CODE = {"keys": keys_block, "drafters": drafters_block, "pairs": pairs_block}


def render(name: str, measurements: Path) -> str:
    """A block's lines, from the code or from a measurement's file."""
    if name in FROM_CODE:
        lines = FROM_CODE[name]()
    else:
        data = json.loads((measurements / name).read_text())
        lines = bench_block(data) if "rows" in data else native_block(data)
    return "\n".join(lines) + "\n"


def rebuild(page: str, measurements: Path) -> str:
    """The page with every table block rendered from its source."""

    def fill(m: re.Match) -> str:
        return m.group(1) + render(m.group("name"), measurements) + m.group(4)

    return BLOCK.sub(fill, page)


def pages() -> list[Path]:
    root = DOCS.parent
    return [root / "README.md", *sorted(DOCS.rglob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.doctables", description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="*", type=Path, help="default: README.md and every page under docs/")
    ap.add_argument("--check", action="store_true", help="fail where a table is not what its source gives")
    ap.add_argument("--measurements", type=Path, default=DOCS / "measurements", help="where the JSON files are")
    args = ap.parse_args(argv)
    stale = []
    for path in args.pages or pages():
        page = path.read_text()
        for m in BLOCK.finditer(page):
            name = m.group("name")
            if name not in FROM_CODE and not (args.measurements / name).is_file():
                print(f"{path}: no table source {name} (neither {', '.join(FROM_CODE)} nor a file in "
                      f"{args.measurements})", file=sys.stderr)
                return 1
        new = rebuild(page, args.measurements)
        if new != page:
            stale.append(path)
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print(f"{', '.join(map(str, stale))}: a table is stale: run python -m tools.doctables", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
