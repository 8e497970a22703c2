"""What a bench runs: the suites, the drafters and their k (each drafter
its own unless --k says), and the limits, checked before anything loads."""

from __future__ import annotations

from dataclasses import dataclass

from specchat.bench.scorecard import OFF, REFERENCE
from specchat.bench.suites import SUITES, Suite, load_prompts, load_suite
from specchat.errors import SpecchatError
from specchat.session.chat import own_k


@dataclass
class Plan:
    suites: list[Suite]
    drafters: list[str]  # the configurations' drafters; off always runs as their partner
    ks: list[int]
    max_tokens: int = 128
    repeats: int = 1
    temp: float = 0.0
    extras: bool = True  # the reference loop and the n-gram timing (a models check skips both)
    curve_positions: int | None = None  # the cost curve's sizes, 1 to this (None: the longest verify, max_k + 1)

    @property
    def configs(self) -> list[tuple[str, int]]:
        """(drafter, k) for every B run; the reference loop last."""
        pairs = []
        for d in self.drafters:  # "auto:16" runs auto at k=16 only
            name, _, fixed = d.partition(":")
            ks = [int(fixed)] if fixed else self.ks or [own_k(name, None)]  # no --k: the drafter's own
            pairs += [(name, k) for k in ks]
        return pairs + [(REFERENCE, 0)] * self.extras

    @property
    def max_k(self) -> int:
        return max(k for _, k in self.configs)

    @property
    def total_runs(self) -> int:
        turns = sum(len(p.turns) for s in self.suites for p in s.prompts)
        return turns * self.repeats * (len(self.configs) + 1)

    def to_dict(self) -> dict:
        return {
            "suites": [s.name for s in self.suites],
            "drafters": [OFF] + self.drafters,
            "ks": self.ks,
            "max_tokens": self.max_tokens,
            "repeats": self.repeats,
            "temp": self.temp,
            "baseline_every": 0,  # no do-nothing arm inside a run: off is measured beside it
            "order": "per prompt: A = off, then each configuration in turn as B (A B B … A B B …)",
        }


def items(text: str) -> list[str]:
    return list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))


def _whole(text: str, option: str, example: str) -> int:
    """A count the user typed for `option`, or one line naming what it got."""
    try:
        return int(text)
    except ValueError:
        raise SpecchatError(
            f"{option} takes whole numbers, got {text!r}", hint=f"for example {example}", code=2
        ) from None


def make_plan(
    suites: str,
    drafters: str,
    ks: str,
    max_tokens: int = 128,
    repeats: int = 1,
    temp: float = 0.0,
    prompts: str | None = None,
    sample: int | None = None,
    categories: str | None = None,
) -> Plan:
    """Check the command's options and turn them into a plan; `prompts` (a
    folder of .txt files or a suite file) is the only suite where given. A
    public suite (public.DATASETS) is fetched here, before any model loads:
    `sample` questions per category, of `categories` (comma-separated)."""
    from specchat import checks
    from specchat.bench import public

    names = items(drafters)
    for item in names:
        name, colon, fixed = item.partition(":")
        checks.drafter(name, "--drafters")
        if colon:
            checks.k(_whole(fixed, f"--drafters {name}:K", f"--drafters {name}:8"), f"--drafters {name}:K")
    k_values = [_whole(k, "--k", "--k 1,2,4,8") for k in items(ks)]
    for k in k_values:
        checks.k(k)
    checks.max_tokens(max_tokens)
    checks.repeats(repeats)
    checks.temperature(temp)
    checks.sample(sample)
    named = [] if prompts else items(suites)
    if (sample is not None or categories) and not any(s in public.DATASETS for s in named):
        raise SpecchatError(
            "--sample and --categories pick from a public suite", hint="add --suites mt-bench or humaneval", code=2
        )
    picked = items(categories) if categories else None
    suite_list = [load_prompts(prompts)] if prompts else []
    for s in named:
        suite_list += public.suites(s, sample, picked) if s in public.DATASETS else [load_suite(s)]
    if not suite_list:
        raise SpecchatError("no suites given", hint=f"choose from: {', '.join(SUITES)}", code=2)
    return Plan(suite_list, [n for n in names if n != OFF], k_values, max_tokens, repeats, temp)
