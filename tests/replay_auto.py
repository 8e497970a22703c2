"""Replay a bench's greedy replies through auto's policy, on the bench's own
measured cost curve: seconds instead of a 47-minute bench, and no noise.

    python tests/replay_auto.py                          # docs/bench-default-pair.json
    python tests/replay_auto.py out.json --pair NAME     # another bench report

Greedy replies do not depend on the drafter, so every draft can be judged
against the reply the bench recorded: a draft is accepted up to its first
token that differs. A round costs what the curve says for its batch size.
Three policies per suite, as speedups over plain decoding:

- auto: the real AutoDrafter (n-gram side), one instance carried through the
  suites in the bench's order, as in the bench;
- ceiling: drafts priced by match length alone, with each match length's
  true agreement rate taken from these very replies (in-sample: a policy
  that prices drafts by match length should not expect to beat it here);
- oracle: knows how far each draft will agree and drafts exactly that.

Replies are re-tokenized from their text, so a few may differ slightly from
the tokens the bench decoded.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specchat.costmodel import CostModel  # noqa: E402
from specchat.drafters.auto import AutoDrafter  # noqa: E402
from specchat.drafters.ngram import NgramDrafter  # noqa: E402
from specchat.stats import common_prefix  # noqa: E402

LONGEST = 48  # match lengths up to this get their own agreement rate


def load(report_path: str, pair: str) -> tuple[dict[int, float], list[dict]]:
    """The report's cost curve and its off replies as (suite, prompt tokens, reply tokens)."""
    from specchat.bench import load_suite
    from specchat.loader import open_session

    report = json.loads(Path(report_path).read_text())
    curve = report["cost_curve"]
    s = open_session(pair, drafter="off", k=4)
    texts = {(name, p.id): p.text for name in report["suites"] for p in load_suite(name).prompts}
    replies = []
    for run in report["runs"]:
        if run["slot"] != "A":
            continue
        s.clear()
        s.messages.append({"role": "user", "content": texts[(run["suite"], run["prompt"])]})
        replies.append({"suite": run["suite"], "prompt": s.prompt_tokens(),
                        "reply": s.target.tokenize(run["text"], special=False)})
    s.close()
    return dict(zip(curve["positions"], curve["seconds"])), replies


def agreement(draft: list[int], reply: list[int], pos: int) -> int:
    """How many of the draft's tokens the reply at pos agrees with."""
    return common_prefix(draft, reply[pos : pos + len(draft)])


def replay(replies: list[dict], seconds: dict[int, float], policy: "Policy") -> dict[str, float]:
    """Speedup per suite: plain decoding time over the policy's time."""
    plain, spent = defaultdict(float), defaultdict(float)
    for r in replies:
        context, reply, pos = list(r["prompt"]), r["reply"], 0
        policy.begin(context)
        while pos < len(reply):
            draft = policy.propose(context, reply, pos)[: len(reply) - pos - 1]
            n = agreement(draft, reply, pos)
            policy.settle(n)
            new = reply[pos : pos + n + 1]
            spent[r["suite"]] += seconds[len(draft) + 1]
            context += new
            pos += len(new)
            policy.observe(new)
        plain[r["suite"]] += len(reply) * seconds[1]
    return {suite: plain[suite] / spent[suite] for suite in plain}


def best_length(expected: list[float], seconds: dict[int, float]) -> int:
    """The draft length with the most expected tokens per second (0: a plain step)."""
    return max(range(len(expected)), key=lambda n: expected[n] / seconds[n + 1])


class Policy:
    """Drafts from an n-gram index of the conversation; subclasses pick the length."""

    def __init__(self, seconds: dict[int, float]) -> None:
        self.seconds = seconds
        self.k = max(seconds) - 1  # the longest draft the curve prices

    def begin(self, context: list[int]) -> None:
        self.ngram = NgramDrafter()
        self.ngram.begin(context)

    def propose(self, context: list[int], reply: list[int], pos: int) -> list[int]:
        hit = self.ngram.lookup(context)
        if hit is None:
            return []
        start, match, _ = hit
        draft = self.ngram.tokens[start : start + self.k]
        return draft[: best_length(self.expected(draft, match, reply, pos), self.seconds)]

    def expected(self, draft: list[int], match: int, reply: list[int], pos: int) -> list[float]:
        raise NotImplementedError

    def settle(self, n: int) -> None:
        pass

    def observe(self, new: list[int]) -> None:
        self.ngram.observe(new)


class Ceiling(Policy):
    """Prices a draft by its match length, with the replies' own agreement rates."""

    def __init__(self, seconds: dict[int, float], rates: dict[int, float]) -> None:
        super().__init__(seconds)
        self.rates = rates

    def expected(self, draft, match, reply, pos):
        expected, survive = [1.0], 1.0
        for j in range(len(draft)):
            survive *= self.rates.get(min(match + j, LONGEST), 0.0)
            expected.append(expected[-1] + survive)
        return expected


class Oracle(Policy):
    """Knows how far each draft agrees."""

    def expected(self, draft, match, reply, pos):
        n = agreement(draft, reply, pos)
        return [1.0 + min(j, n) for j in range(len(draft) + 1)]


class Auto(Policy):
    """The real AutoDrafter (n-gram side, no draft model), carried across replies."""

    def __init__(self, seconds: dict[int, float]) -> None:
        super().__init__(seconds)
        costs = CostModel()
        costs.seconds.update(seconds)
        self.auto = AutoDrafter(NgramDrafter(), None, costs)

    def begin(self, context):
        self.auto.begin(context)

    def propose(self, context, reply, pos):
        self.draft = self.auto.propose(context, min(self.k, len(reply) - pos - 1))  # as the engine caps k
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
        ngram = NgramDrafter()
        context, reply = list(r["prompt"]), r["reply"]
        ngram.begin(context)
        for pos, token in enumerate(reply):
            hit = ngram.lookup(context)
            if hit is not None:
                start, match, _ = hit
                draft = ngram.tokens[start : start + k]
                n = agreement(draft, reply, pos)
                for j in range(min(n + 1, len(draft), len(reply) - pos)):
                    trials[min(match + j, LONGEST)] += 1
                    hits[min(match + j, LONGEST)] += j < n
            context.append(token)
            ngram.observe([token])
    return {m: hits[m] / trials[m] for m in trials}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", default="docs/bench-default-pair.json")
    ap.add_argument("--pair", default="qwen2.5-coder-1.5b", help="the pair the bench ran (for its tokenizer)")
    args = ap.parse_args()
    seconds, replies = load(args.report, args.pair)
    rows = {
        "auto": replay(replies, seconds, Auto(seconds)),
        "ceiling": replay(replies, seconds, Ceiling(seconds, agreement_rates(replies, max(seconds) - 1))),
        "oracle": replay(replies, seconds, Oracle(seconds)),
    }
    suites = list(rows["auto"])
    print(f"{'speedup':>8} " + " ".join(f"{s:>10}" for s in suites))
    for name, row in rows.items():
        print(f"{name:>8} " + " ".join(f"{row[s]:>9.3f}×" for s in suites))
    return 0


if __name__ == "__main__":
    sys.exit(main())
