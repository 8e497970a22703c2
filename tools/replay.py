"""Replay a bench's greedy replies through each drafter's policy, on a cost
curve: the bench's own, or one measured on another machine (a GPU). Seconds
instead of a 47-minute bench, and no timing noise; a prediction, labelled
as a replay, never a measurement.

    python tools/replay.py                        # the CPU bench report and its own curve
    python tools/replay.py --costs docs/measurements/h200-curves-2026-11-30.json \\
        --target target --draft draft             # the default pair's shapes on an H200
    python tools/replay.py --costs docs/measurements/h200-curves-2026-11-30.json \\
        --target big --draft draft                # a 7B target with the 0.5B draft
    python tools/replay.py docs/measurements/bench-2026-12-07-amd-mt-bench.json --k 64
                                                  # MT-Bench's conversations, turn by turn

Greedy replies do not depend on the drafter, so every draft can be judged
against the reply the bench recorded: a draft is accepted up to its first
token that differs. A round costs what the curve says for its batch size,
plus the draft model's steps. Acceptance does not depend on the hardware,
so the replies and the bench's draft-model acceptance carry over; costs
come from the curve file:

- a bench report (`specchat bench --json`): its `cost_curve`; a draft-model
  step costs the bench's measured drafting time per drafted token;
- a curves file (docs/measurements/h200-curves-2026-11-30.json; the `models` object of
  `tools/gpu_probe.py`'s probe.json has the same shape): each model's
  curve, with the bare decode loop's step as the 1-position cost (the step
  of an off-mode stream) and the draft model's bare-loop step as its cost
  per drafted token.

Policies, as speedups over plain decoding:

- ngram: the real NgramDrafter at k;
- draft k=K: the draft model cannot be replayed token by token (its tokens
  were not recorded), so its rounds are simulated from the bench's measured
  per-position acceptance of the draft model in that suite (positions past
  the bench's k keep the last position's rate; seeded, so repeatable);
- auto: the real AutoDrafter, n-gram side replayed, draft side simulated as
  above, one instance carried through the suites in the bench's order;
- ceiling (n-gram): drafts priced by match length, with each match length's
  true agreement rate taken from these very replies (in-sample);
- oracle (n-gram): knows how far each copy will agree and drafts exactly that.

On the 7B + 0.5B pair the acceptance is the 1.5B's (the bench ran the
default pair): a 7B target agrees with the 0.5B less often, so read that
row as an upper bound. A bench of conversations (a public set's, or a
suite with turns) replays each turn after the turns before it and off's
replies to them, as the bench asked it, each turn a row ("… t2"). Replies are re-tokenized from their text, so a few
may differ slightly from the tokens the bench decoded.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)
from specchat.decoding.costmodel import CostModel, interpolate
from specchat.decoding.stats import common_prefix
from specchat.drafters.auto import AutoDrafter
from specchat.drafters.base import Draft
from specchat.drafters.draft_model import DraftModelDrafter
from specchat.drafters.ngram import NgramDrafter
from specchat.session.chat import TargetSpelling
from specchat.session.options import DecodeOptions, LoadOptions

LONGEST = 48  # match lengths up to this get their own agreement rate
WRONG = -1  # a simulated draft token that the reply never agrees with


# --- inputs ----------------------------------------------------------------------------------------


class Costs:
    """Seconds per target decode of n positions, and per drafted token."""

    def __init__(self, points: dict[int, float], draft_step: dict[str, float] | float, label: str,
                 catch_up: bool) -> None:
        self.points, self.known, self.label = points, sorted(points), label
        self.draft_step = draft_step  # per suite (bench) or one figure (probe)
        self.catch_up = catch_up  # the draft step leaves out the model's catch-up on the committed tokens

    def step(self, n: int) -> float:
        return interpolate(self.points, n, self.known)

    def draft(self, suite: str) -> float:
        return self.draft_step[suite] if isinstance(self.draft_step, dict) else self.draft_step


def bench_costs(report: dict) -> Costs:
    curve = report["cost_curve"]
    per_token: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for run in report["runs"]:
        if run["drafter"] == "draft" and run["slot"] == "B":
            per_token[run["suite"]][0] += run["stats"]["t_draft"]
            per_token[run["suite"]][1] += run["stats"]["drafted"]
    steps = {suite: t / n for suite, (t, n) in per_token.items() if n}
    points = dict(zip(curve["positions"], curve["seconds"]))
    # The bench's drafting time per drafted token already holds the catch-up.
    return Costs(points, steps, f"the bench's own curve ({report['machine']['cpu_model']})", catch_up=False)


def probe_costs(probe: dict, target: str, draft: str, path: str) -> Costs:
    t = probe[target]
    points = dict(zip(t["positions"], t["seconds"]))
    points[1] = 1.0 / t["loop_tok_s"]  # an off-mode step: the bare loop's, not a step between batches
    return Costs(points, 1.0 / probe[draft]["loop_tok_s"], f"{Path(path).name}: {target} + {draft}", catch_up=True)


def draft_rates(report: dict) -> dict[str, list[float]]:
    """Per suite, P(position i accepted | position i-1 accepted) of the draft model, from the bench."""
    offered, hits = defaultdict(lambda: defaultdict(int)), defaultdict(lambda: defaultdict(int))
    for run in report["runs"]:
        if run["drafter"] == "draft" and run["slot"] == "B":
            for i, (o, h) in enumerate(zip(run["offered"], run["hits"])):
                offered[run["suite"]][i] += o
                hits[run["suite"]][i] += h
    rates = {}
    for suite in offered:
        n = len(offered[suite])
        absolute = [hits[suite][i] / offered[suite][i] for i in range(n)]
        rates[suite] = [absolute[0]] + [absolute[i] / absolute[i - 1] if absolute[i - 1] else 0.0 for i in range(1, n)]
    return rates


def load_replies(report: dict, s) -> list[dict]:
    """The report's off replies as (suite, prompt tokens, reply tokens), in
    the bench's order, tokenized by session s. A later turn of a
    conversation is asked after the turns before it and off's replies to
    them, as the bench asked it; its row reads "suite t2"."""
    turns = report_prompts(report)
    replies, said = [], {}
    for run in report["runs"]:
        if run["slot"] != "A":
            continue
        key, turn = (run["suite"], run["prompt"]), run.get("turn") or 1
        said[(*key, turn)] = run["text"]
        history = [m for t in range(1, turn) for m in ({"role": "user", "content": turns[key][t - 1]},
                                                       {"role": "assistant", "content": said[(*key, t)]})]
        row = run["suite"] + (f" t{turn}" if len(turns[key]) > 1 else "")
        replies.append({"suite": run["suite"], "row": row, "prompt": s.prompt_for(turns[key][turn - 1], history),
                        "reply": s.target.tokenize(run["text"], special=False)})
    return replies


def report_prompts(report: dict) -> dict[tuple[str, str], tuple[str, ...]]:
    """Each prompt's turns by (suite, id): a suite of the repository's, or
    a public set's category (the set as the bench fetched and cached it)."""
    from specchat.bench import public
    from specchat.bench.suites import load_suite

    out, sets = {}, {}
    for name in report["suites"]:
        dataset = name.split("/")[0]
        if dataset in public.DATASETS:
            found = sets.setdefault(dataset, public.suites(dataset))
        else:
            found = [load_suite(name)]
        out.update({(suite.name, p.id): p.turns for suite in found if suite.name == name for p in suite.prompts})
    return out


# --- the replay ----------------------------------------------------------------------------------


def agreement(draft: list[int], reply: list[int], pos: int) -> int:
    """How many of the draft's tokens the reply at pos agrees with."""
    return common_prefix(draft, reply[pos : pos + len(draft)])


def replay(replies: list[dict], costs: Costs, policy: "Policy") -> dict[str, float]:
    """Speedup per row (a suite, or a suite's turn): plain decoding time over the policy's time."""
    plain, spent = defaultdict(float), defaultdict(float)
    for r in replies:
        suite, row, context, reply, pos = r["suite"], r.get("row", r["suite"]), list(r["prompt"]), r["reply"], 0
        policy.begin(context, suite)
        while pos < len(reply):
            draft = policy.propose(context, reply, pos)[: len(reply) - pos - 1]
            n = agreement(draft, reply, pos)
            policy.settle(n)
            new = reply[pos : pos + n + 1]
            spent[row] += costs.step(len(draft) + 1) + policy.drafting_cost(len(draft), n)
            context += new
            pos += len(new)
            policy.observe(new)
        plain[row] += len(reply) * costs.step(1)
    return {row: plain[row] / spent[row] for row in plain}


class SimulatedDraftModel(DraftModelDrafter):
    """A draft model whose proposals agree with the reply as far as the
    bench's per-position acceptance says (sampled, seeded); then it is wrong."""

    def __init__(self, rates: dict[str, list[float]], step: float, seed: int = 0) -> None:
        super().__init__(load=lambda: None)
        self.rates, self.rng = rates, random.Random(seed)
        self.seconds_per_token = step
        self.suite, self.reply, self.pos = "", [], 0

    loaded = True

    def begin(self, context):
        pass

    def catch_up_cost(self, context) -> float:
        return 0.0  # a round's one or two catch-up steps are in Policy.drafting_cost

    def propose(self, context, k):
        rates = self.rates[self.suite]
        agree = 0
        while agree < k and self.rng.random() < rates[min(agree, len(rates) - 1)]:
            agree += 1
        tokens = self.reply[self.pos : self.pos + agree]
        return Draft(tokens + [WRONG] * (k - len(tokens)), source="draft")


class Policy:
    """Drafts from an n-gram index of the conversation; subclasses pick the length."""

    spelling: TargetSpelling | None = None  # the pair's tokenizer, as the chat's n-gram drafter reads it

    def __init__(self, costs: Costs, k: int) -> None:
        self.costs, self.k = costs, k
        self.suite, self.source = "", "ngram"

    def begin(self, context: list[int], suite: str) -> None:
        self.suite = suite
        self.ngram = NgramDrafter(spelling=self.spelling)
        self.ngram.begin(context)

    def propose(self, context: list[int], reply: list[int], pos: int) -> list[int]:
        hit = self.ngram.lookup(context)
        if hit is None:
            return []
        start, match, seen = hit
        draft = self.ngram.continuation(start, self.k)
        return draft[: self.length(draft, match, seen, reply, pos)]

    def length(self, draft, match, seen, reply, pos) -> int:
        """The draft length with the most expected tokens per second (0: a plain step)."""
        expected = self.expected(draft, match, reply, pos)
        return max(range(len(expected)), key=lambda n: expected[n] / self.costs.step(n + 1))

    def expected(self, draft, match, reply, pos) -> list[float]:
        raise NotImplementedError

    def drafting_cost(self, drafted: int, accepted: int) -> float:
        """Seconds of draft-model steps in a round: its drafts, then the one or two
        tokens it catches up on (the target's own token, and its last draft after
        a full accept)."""
        if self.source != "draft" or not drafted:
            return 0.0
        steps = drafted + (accepted == drafted) if self.costs.catch_up else drafted
        return steps * self.costs.draft(self.suite)

    def settle(self, n: int) -> None:
        pass

    def observe(self, new: list[int]) -> None:
        self.ngram.observe(new)


class Ngram(Policy):
    """The real n-gram drafter at k."""

    def length(self, draft, match, seen, reply, pos):
        return min(len(draft), self.ngram.budget(match, seen))


class Ceiling(Policy):
    """Prices a draft by its match length, with the replies' own agreement rates."""

    def __init__(self, costs: Costs, k: int, rates: dict[int, float]) -> None:
        super().__init__(costs, k)
        self.rates = rates

    def expected(self, draft, match, reply, pos):
        expected, survive = [1.0], 1.0
        for j in range(len(draft)):
            survive *= self.rates.get(min(match + j, LONGEST), 0.0)
            expected.append(expected[-1] + survive)
        return expected


class Oracle(Policy):
    """Knows how far each copy agrees."""

    def expected(self, draft, match, reply, pos):
        n = agreement(draft, reply, pos)
        return [1.0 + min(j, n) for j in range(len(draft) + 1)]


class DraftModel(Policy):
    """The draft model at a fixed k, simulated from the bench's acceptance."""

    def __init__(self, costs: Costs, k: int, rates: dict[str, list[float]]) -> None:
        super().__init__(costs, k)
        self.model = SimulatedDraftModel(rates, 0.0)
        self.source = "draft"

    def propose(self, context, reply, pos):
        self.model.suite, self.model.reply, self.model.pos = self.suite, reply, pos
        return self.model.propose(context, min(self.k, len(reply) - pos - 1)).tokens


class Auto(Policy):
    """The real AutoDrafter, carried across replies; its draft model simulated."""

    def __init__(self, costs: Costs, k: int, rates: dict[str, list[float]] | None) -> None:
        super().__init__(costs, k)
        self.model = SimulatedDraftModel(rates, 0.0) if rates else None
        self.auto = AutoDrafter(NgramDrafter(spelling=self.spelling), self.model, CostModel.from_points(costs.points))

    def begin(self, context, suite):
        self.suite = suite
        if self.model is not None:
            self.model.suite = suite
            self.model.seconds_per_token = self.costs.draft(suite)
            self.auto.draft_step = self.costs.draft(suite)
        self.auto.begin(context)

    def propose(self, context, reply, pos):
        if self.model is not None:
            self.model.reply, self.model.pos = reply, pos
        self.draft = self.auto.propose(context, min(self.k, len(reply) - pos - 1))  # as the engine caps k
        self.source = self.draft.source
        return self.draft.tokens

    def settle(self, n):
        if self.draft.tokens:
            self.auto.settle(self.draft, n)

    def observe(self, new):
        self.auto.observe(new)


def agreement_rates(replies: list[dict], k: int) -> dict[int, float]:
    """P(the next drafted token agrees | the copy has agreed for m tokens so far), from the replies."""
    hits, trials = defaultdict(int), defaultdict(int)
    for r in replies:
        ngram = NgramDrafter(spelling=Policy.spelling)
        context, reply = list(r["prompt"]), r["reply"]
        ngram.begin(context)
        for pos, token in enumerate(reply):
            hit = ngram.lookup(context)
            if hit is not None:
                start, match, _ = hit
                draft = ngram.continuation(start, k)
                n = agreement(draft, reply, pos)
                for j in range(min(n + 1, len(draft), len(reply) - pos)):
                    trials[min(match + j, LONGEST)] += 1
                    hits[min(match + j, LONGEST)] += j < n
            context.append(token)
            ngram.observe([token])
    return {m: hits[m] / trials[m] for m in trials}


def table(replies: list[dict], costs: Costs, rates: dict[str, list[float]], k: int, draft_k: int) -> dict:
    # A bench that ran no draft model (its rates unknown) replays no draft-model row, and auto without one.
    rows = {
        f"ngram k={k}": replay(replies, costs, Ngram(costs, k)),
        **({f"draft k={draft_k}": replay(replies, costs, DraftModel(costs, draft_k, rates))} if rates else {}),
        f"auto k≤{k}": replay(replies, costs, Auto(costs, k, rates or None)),
        "ngram ceiling": replay(replies, costs, Ceiling(costs, k, agreement_rates(replies, k))),
        "ngram oracle": replay(replies, costs, Oracle(costs, k)),
    }
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", default="docs/measurements/bench-default-pair.json", help="a bench report (JSON)")
    ap.add_argument("--pair", default="qwen2.5-coder-1.5b", help="the pair the bench ran (for its tokenizer)")
    ap.add_argument("--costs", help="a probe curves file (default: the report's own curve)")
    ap.add_argument("--target", default="target", help="the target's entry in the curves file")
    ap.add_argument("--draft", default="draft", help="the draft model's entry in the curves file")
    ap.add_argument("--k", type=int, default=16, help="the most tokens n-gram and auto may draft")
    ap.add_argument("--draft-k", type=int, default=4, help="k of the draft-model row")
    args = ap.parse_args()
    report = json.loads(Path(args.report).read_text())
    if args.costs:
        costs = probe_costs(json.loads(Path(args.costs).read_text()), args.target, args.draft, args.costs)
    else:
        costs = bench_costs(report)
    from specchat.session.loader import open_session

    session = open_session(LoadOptions(args.pair), DecodeOptions(drafter="off", k=4))
    try:
        replies = load_replies(report, session)
        Policy.spelling = TargetSpelling(session.target)
        rows = table(replies, costs, draft_rates(report), args.k, args.draft_k)
    finally:
        session.close()
    suites = list(next(iter(rows.values())))
    width = max(10, *(len(x) for x in suites))
    print(f"replay of {len(replies)} replies from {args.report} on {costs.label}:")
    steps = costs.draft_step.values() if isinstance(costs.draft_step, dict) else [costs.draft_step]
    drafting = f"; a draft-model step {min(steps) * 1e3:.2f} ms or more" if steps else "; no draft model ran"
    print(f"  a plain step {costs.step(1) * 1e3:.2f} ms; {args.k + 1} positions {costs.step(args.k + 1) * 1e3:.2f} ms "
          f"({costs.step(args.k + 1) / costs.step(1):.2f} steps){drafting}")
    print(f"{'speedup':>14} " + " ".join(f"{s:>{width}}" for s in suites))
    print(f"{'off':>14} " + " ".join(f"{1.0:>{width - 1}.2f}×" for s in suites))
    for name, row in rows.items():
        print(f"{name:>14} " + " ".join(f"{row[s]:>{width - 1}.2f}×" for s in suites))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
