"""How often an n-gram copy's first token agrees, by match length, on greedy
replies of this pair; and auto replayed on them, reply by reply.

    python -m tools.copy_agreement                       # decode the prompts (about 8 minutes on 2 cores)
    python -m tools.copy_agreement --replies r.json      # the same, keeping the replies in r.json
    python -m tools.copy_agreement --replies r.json      # again: read r.json, decode nothing

The prompts: the bench's chat, math, code-edit and summarize suites, the
held-out prompts of tools/native_compare, and both turns of the first
`--per-category` MT-Bench questions of each category (fetched as bench
fetches them; a second turn is asked after the first's reply, as the chat
asks it). Each turn is decoded greedily with drafting off, `--max-tokens`
tokens, in one process.

The first table is what auto's copy priors (drafters/auto.py, copy_rates
and self_copy_rates) are drawn from: at each position of each reply where
the n-gram drafter finds a match, whether the token it would draft first
is the reply's next token, counted by match length, and apart by where
the match lies: in the question or the turns before it, in the reply
itself, or lengthened by an edit learned at that lookup (counted by its
length without it). The second replays the real AutoDrafter,
a fresh one per reply (as each `specchat run` starts), on this machine's
kept cost curve (tools/replay.py's replay): a prediction, never a
measurement; its speedups leave out what a round costs beyond the curve.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)
from specchat.drafters.auto import MAX_BUCKET, copy_rates, self_copy_rates
from specchat.drafters.ngram import NgramDrafter
from specchat.session.chat import TargetSpelling
from specchat.session.options import DecodeOptions, LoadOptions
from tools import replay as R
from tools.native_compare import held_out

SUITES = ("chat", "math", "code-edit", "summarize")
WHERE = {
    "before": "matches in the question or the turns before it:",
    "reply": "matches in the reply itself (it repeats its own words):",
    "edit": "matches an edit learned at their lookup lengthened, by their length without it:",
}


def prompts(per_category: int) -> dict[str, tuple[str, ...]]:
    """Each conversation's turns: one for the written suites and the held-out
    prompts, both of MT-Bench's for its first `per_category` questions of each
    category (fetched and cached as bench fetches them)."""
    from specchat.bench.public import suites
    from specchat.bench.suites import load_suite

    out = {f"{s} {p.id}": (p.text,) for s in SUITES for p in load_suite(s).prompts}
    out.update({f"held {name}": turns for name, turns in held_out().items()})
    for suite in suites("mt-bench", per_category):
        out.update({f"mt-bench {suite.name} {p.id}": tuple(p.turns) for p in suite.prompts})
    return out


def decode(session, conversations: dict[str, tuple[str, ...]]) -> list[dict]:
    """Every turn greedily, a later one after the reply to the one before (as the chat asks it)."""
    replies = []
    for i, (name, turns) in enumerate(conversations.items(), 1):
        session.clear()
        history: list[dict] = []
        for n, text in enumerate(turns, 1):
            prompt = session.prompt_for(text, history)
            turn = session.reply(text)
            label = name if len(turns) == 1 else f"{name} turn {n}"
            replies.append({"suite": label, "prompt": prompt, "reply": list(turn.tokens)})
            history += [{"role": "user", "content": text}, {"role": "assistant", "content": turn.text}]
            print(f"  {i}/{len(conversations)} {label}: {len(turn.tokens)} tokens", flush=True)
    return replies


def first_token_agreement(replies: list[dict], spelling) -> dict[tuple[str, int], tuple[int, int]]:
    """(agreed, matches) per (where the match was found, its length),
    MAX_BUCKET or longer counted together: the length auto prices a match
    by. Where: "before" the reply (the question, the earlier turns),
    "reply" (the reply repeating itself), "edit" (a match an edit learned
    at that lookup lengthened, by its length without the edit)."""
    hits: dict[tuple[str, int], int] = defaultdict(int)
    trials: dict[tuple[str, int], int] = defaultdict(int)
    for r in replies:
        ngram = NgramDrafter(spelling=spelling)
        context = list(r["prompt"])
        ngram.begin(context)
        for token in r["reply"]:
            hit = ngram.lookup(context)
            first = ngram.continuation(hit[0], 1) if hit is not None else []
            if hit is not None and first:
                if ngram.before_edit is not None:
                    bucket = ("edit", min(ngram.before_edit, MAX_BUCKET))
                else:
                    bucket = ("reply" if hit[0] >= len(r["prompt"]) else "before", min(hit[1], MAX_BUCKET))
                trials[bucket] += 1
                hits[bucket] += first[0] == token
            context.append(token)
            ngram.observe([token])
    return {b: (hits[b], trials[b]) for b in sorted(trials)}


def kept_curve() -> dict[int, float]:
    from specchat import paths

    kept = json.loads((paths.data_dir() / "cost-curves.json").read_text())
    entry = max(kept.values(), key=lambda e: e.get("saved", 0))  # the curve kept last
    return {int(n): s for n, s in entry["seconds"].items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default=None, help="a pulled pair (default: the default pair)")
    ap.add_argument("--replies", help="read the replies from this file, or decode and keep them there")
    ap.add_argument("--per-category", type=int, default=2, help="MT-Bench questions per category")
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    from specchat.session.loader import open_session

    session = open_session(
        LoadOptions(args.pair),
        DecodeOptions(drafter="off", k=16, baseline_every=0, max_tokens=args.max_tokens),
    )
    try:
        session.set_memory(False)
        kept = Path(args.replies) if args.replies else None
        if kept is not None and kept.is_file():
            replies = json.loads(kept.read_text())
        else:
            replies = decode(session, prompts(args.per_category))
            if kept is not None:
                kept.write_text(json.dumps(replies))
        R.Policy.spelling = spelling = TargetSpelling(session.target)
        agreed = first_token_agreement(replies, spelling)
        points = kept_curve()
        costs = R.Costs(points, 0.0, "the kept curve", catch_up=False)
        speedups = {r["suite"]: R.replay([r], costs, R.Auto(costs, 16, None))[r["suite"]] for r in replies}
    finally:
        session.close()
    priors = {"before": copy_rates(), "edit": copy_rates(), "reply": self_copy_rates()}
    print(f"first-token agreement by match length, {len(replies)} replies:")
    print(f"{'match':>7} {'agreed':>14} {'rate':>6} {'prior':>6}")
    for where, title in WHERE.items():
        if any(w == where for w, _ in agreed):
            print(title)
        for (w, b), (h, n) in agreed.items():
            if w == where:
                label = f"{b}+" if b == MAX_BUCKET else str(b)
                print(f"{label:>7} {f'{h} of {n}':>14} {h / n:6.2f} {priors[where][b].rate(0):6.2f}")
    steps = ", ".join(f"{n}: {points[n] / points[1]:.2f}" for n in sorted(points) if n <= 17)
    print(f"\nauto replayed on the kept curve (plain steps per verify of n positions: {steps}):")
    for name, speedup in speedups.items():
        print(f"  {speedup:5.2f}×  {name}")
    values = list(speedups.values())
    print(f"  lowest {min(values):.2f}×, geometric mean {statistics.geometric_mean(values):.2f}×, "
          f"{sum(v < 0.99 for v in values)} of {len(values)} below 0.99×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
