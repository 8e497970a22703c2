"""The bench's arithmetic and its output: runs summed into rows, the cost
curve and the break-even α, the rich table, the JSON report.

Pure data and arithmetic, no model: `specchat bench` (bench.py) measures,
this module sums up. Every figure is a ratio of measured totals (tokens over
seconds summed across runs), never a mean of per-run ratios, so a short
reply does not weigh as much as a long one.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from specchat.decoding.costmodel import interpolate
from specchat.decoding.stats import TurnStats
from specchat.drafters import Name

OFF = Name.OFF
REFERENCE = "reference"  # the bare greedy loop, no engine
POSITIONS_SHOWN = 8  # the table shows acceptance at the first positions; the JSON has all
NOISY = 1.5  # off runs this much apart in tok/s mean the machine was busy


@dataclass
class Run:
    """One reply decoded during the bench.

    Runs come in cycles, one per prompt: slot "A" is drafting off, then each
    configuration under test runs as slot "B" on the same prompt. So every
    configuration alternates with off (A B A B … in its own order) and
    machine drift hits both alike. `cycle` numbers the cycle.
    """

    seq: int  # position in the whole bench's order
    cycle: int
    slot: str  # "A" (off) | "B" (the configuration)
    suite: str
    prompt: str  # the prompt's id
    repeat: int
    drafter: str  # a drafter name, or REFERENCE
    k: int
    stats: TurnStats
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish: str = ""
    offered: list[int] = field(default_factory=list)  # per draft position: drafts that reached it
    hits: list[int] = field(default_factory=list)  # per draft position: drafts accepted there
    identical: bool | None = None  # B runs, greedy: the same tokens as the paired A run
    valid: bool | None = None  # prompts with a schema: the reply finished, parses and matches it
    schema_error: str | None = None  # why it does not
    first_divergence: int | None = None
    peak_rss_mb: float = 0.0  # the process's peak so far
    turn: int | None = None  # a conversation's turn (1, 2, …); None: a prompt of one turn

    @property
    def group(self) -> str:
        """The row it counts in: its suite, and its turn where it has turns."""
        return self.suite if self.turn is None else f"{self.suite} · turn {self.turn}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("tokens")
        d["n_tokens"] = len(self.tokens)
        return d


# --- rows ------------------------------------------------------------------------------


@dataclass
class Totals:
    """Sums over runs, and the figures that follow from them."""

    runs: int = 0
    tokens: int = 0
    t_decode: float = 0.0
    t_draft: float = 0.0
    t_verify: float = 0.0
    t_plain: float = 0.0
    t_other: float = 0.0
    verify_rounds: int = 0
    plain_steps: int = 0
    verify_tokens: float = 0.0  # tokens committed by verify rounds
    drafted: int = 0
    accepted: int = 0
    offered: list[int] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)

    def add(self, run: Run) -> None:
        s = run.stats
        self.runs += 1
        self.tokens += s.tokens
        self.t_decode += s.t_decode
        self.t_draft += s.t_draft
        self.t_verify += s.t_verify
        self.t_plain += s.t_plain
        self.t_other += s.t_other
        self.verify_rounds += s.verify_rounds
        self.plain_steps += s.plain_steps
        self.verify_tokens += s.alpha * s.verify_rounds
        self.drafted += s.drafted
        self.accepted += s.accepted
        for i, (o, h) in enumerate(zip(run.offered, run.hits)):
            if i == len(self.offered):
                self.offered.append(0)
                self.hits.append(0)
            self.offered[i] += o
            self.hits[i] += h

    @property
    def tok_s(self) -> float:
        return self.tokens / self.t_decode if self.t_decode > 0 else 0.0

    @property
    def alpha(self) -> float:
        return self.verify_tokens / self.verify_rounds if self.verify_rounds else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def per_position_acceptance(self) -> list[float]:
        return [h / o for o, h in zip(self.offered, self.hits)]

    def shares(self) -> dict[str, float]:
        """Where the decode time went, as fractions of it."""
        t = self.t_decode or 1.0
        return {
            "draft": self.t_draft / t,
            "verify": self.t_verify / t,
            "plain": self.t_plain / t,
            "other": self.t_other / t,
        }


def totals(runs: list[Run]) -> Totals:
    out = Totals()
    for r in runs:
        out.add(r)
    return out


def rows(runs: list[Run]) -> list[dict]:
    """One row per suite for off, then one per (drafter, k) configuration.

    A configuration's speedup is its decode tok/s over that of the off runs
    it was paired with; only complete pairs count (a bench stopped between A
    and B leaves its last A run out of that comparison).
    """
    out = []
    for suite in unique(r.group for r in runs):
        in_suite = [r for r in runs if r.group == suite]
        off = [r for r in in_suite if r.slot == "A"]
        if off:
            out.append(_row(suite, OFF, 0, off, off))
        for drafter, k in unique((r.drafter, r.k) for r in in_suite if r.slot == "B"):
            b = [r for r in in_suite if r.slot == "B" and r.drafter == drafter and r.k == k]
            cycles = {r.cycle for r in b}
            a = [r for r in off if r.cycle in cycles]
            out.append(_row(suite, drafter, k, b, a))
    return out


def _row(suite: str, drafter: str, k: int, runs: list[Run], paired_off: list[Run]) -> dict:
    t = totals(runs)
    off = totals(paired_off)
    both = sorted(runs + [r for r in paired_off if r not in runs], key=lambda r: r.seq)
    return {
        "suite": suite,
        "drafter": drafter,
        "k": k,
        "runs": t.runs,
        "tokens": t.tokens,
        "reply_tokens": t.tokens / t.runs if t.runs else 0.0,  # the mean reply's length
        "t_decode": t.t_decode,
        "tok_s": t.tok_s,
        "off_tok_s": off.tok_s,
        "speedup": t.tok_s / off.tok_s if off.tok_s > 0 else None,
        "speedup_median": _median_pair_ratio(runs, paired_off),
        "alpha": t.alpha,
        "verify_rounds": t.verify_rounds,
        "plain_steps": t.plain_steps,
        "drafted": t.drafted,
        "accepted": t.accepted,
        "acceptance_rate": t.acceptance_rate,
        "per_position_acceptance": t.per_position_acceptance,
        "identical_rate": _share(r.identical for r in runs),
        "valid_rate": _share(r.valid for r in runs),
        "shares": t.shares(),
        "peak_rss_mb": max(r.peak_rss_mb for r in runs),
        "order": "".join(r.slot for r in both),  # "ABAB…": off and this config alternated
    }


def _share(flags) -> float | None:
    """Share of True among the flags that are not None (None: none apply)."""
    known = [f for f in flags if f is not None]
    return sum(known) / len(known) if known else None


def _median_pair_ratio(runs: list[Run], paired_off: list[Run]) -> float | None:
    """The median over pairs of B tok/s / A tok/s: robust to one pair that a
    burst of load slowed down, which the ratio of totals is not."""
    ratios = _pair_ratios(runs, paired_off)
    return statistics.median(ratios) if ratios else None


def off_spread(runs: list[Run]) -> float | None:
    """Fastest over slowest off run, in tok/s: how steady the machine was."""
    speeds = [r.stats.tok_s for r in runs if r.slot == "A" and r.stats.tok_s > 0]
    return max(speeds) / min(speeds) if speeds else None


def unique(items) -> list:
    return list(dict.fromkeys(items))


# --- the cost curve and break-even -----------------------------------------------------


@dataclass
class CostCurve:
    """Seconds for one target decode of n positions (n = 1..K+1), measured
    right after `context_tokens` of real text."""

    context_tokens: int
    positions: list[int]
    seconds: list[float]
    repeats: int = 0
    noise: float = 0.0  # how much repeated decodes of one size differ: the median half-range over the median

    @property
    def step(self) -> float:
        """One plain decoding step."""
        return self.seconds[0]

    def at(self, n: float) -> float:
        """Seconds for n positions, read off the curve (see costmodel.interpolate)."""
        return interpolate(dict(zip(self.positions, self.seconds)), n)

    def ratios(self) -> list[float]:
        return [t / self.step for t in self.seconds]

    def to_dict(self) -> dict:
        return {**asdict(self), "step": self.step, "ratio": self.ratios()}

    @classmethod
    def from_dict(cls, d: dict) -> CostCurve:
        return cls(d["context_tokens"], d["positions"], d["seconds"], d.get("repeats", 0), d.get("noise", 0.0))


def break_even(curve: CostCurve, runs: list[Run]) -> list[dict]:
    """The α each (drafter, k) needs to match plain decoding on this machine.

    A verify round pays for drafting, one target pass over its draft plus the
    pending token, and the engine's bookkeeping; a plain step pays `step`. So
    speculation breaks even at

        α = (draft per verify round + verify(L + 1) + other per round) / step

    with L the mean draft length actually proposed (a selective drafter
    proposes fewer than k), verify() read off the measured curve, and the
    draft and bookkeeping times measured in the bench's own runs (drafting
    that produced nothing is charged to the verify rounds too).
    """
    out = []
    b_runs = [r for r in runs if r.slot == "B" and r.drafter != REFERENCE]
    for drafter, k in unique((r.drafter, r.k) for r in b_runs):
        t = totals([r for r in b_runs if r.drafter == drafter and r.k == k])
        out.append(_break_even_row(curve, drafter, k, t))
    return out


def _break_even_row(curve: CostCurve, drafter: str, k: int, t: Totals) -> dict:
    row = {"drafter": drafter, "k": k, "measured_alpha": t.alpha, "needed_alpha": None}
    if not t.verify_rounds or curve.step <= 0:
        return row  # never drafted: nothing to break even on
    mean_draft = t.drafted / t.verify_rounds
    draft = t.t_draft / t.verify_rounds
    other = t.t_other / (t.verify_rounds + t.plain_steps)
    verify = curve.at(mean_draft + 1)
    row.update(
        mean_draft=mean_draft,
        draft_steps=draft / curve.step,
        verify_steps=verify / curve.step,
        other_steps=other / curve.step,
        needed_alpha=(draft + verify + other) / curve.step,
    )
    return row


# --- the spread: a speedup the machine's own noise could explain -------------------------

NOISE_FLOOR = 0.05  # a spread is never narrower than ±5% of its median: a few runs say little
WIN, LOSS, SAME = "faster", "slower", "no measurable difference"


def spread(ratios: list[float]) -> tuple[float, float]:
    """The middle half of the paired ratios (their interquartile range), at
    least ±NOISE_FLOOR around their median: where a configuration's speedup
    lies, run to run and prompt to prompt, on this machine."""
    mid = statistics.median(ratios)
    q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else (mid, mid, mid)
    return min(q1, mid * (1 - NOISE_FLOOR)), max(q3, mid * (1 + NOISE_FLOOR))


def measured(band: tuple[float, float] | None) -> str:
    """WIN or LOSS where the whole spread lies on one side of 1×; SAME where 1× lies inside it."""
    if band is None or band[0] <= 1.0 <= band[1]:
        return SAME
    return WIN if band[0] > 1.0 else LOSS


def overall(runs: list[Run]) -> list[dict]:
    """One row per configuration over every suite: the median of its paired
    ratios (B tok/s over its A's), their range and spread, whether the
    speedup is measurable, and the suite where it did best."""
    out = []
    b_runs = [r for r in runs if r.slot == "B" and r.drafter != REFERENCE]
    for drafter, k in unique((r.drafter, r.k) for r in b_runs):
        b = [r for r in b_runs if r.drafter == drafter and r.k == k]
        off = [r for r in runs if r.slot == "A" and r.cycle in {x.cycle for x in b}]
        ratios = _pair_ratios(b, off)
        band = spread(ratios) if ratios else None
        by_suite = {s: _median_pair_ratio([r for r in b if r.group == s], off) for s in unique(r.group for r in b)}
        best = max(by_suite, key=lambda s: by_suite[s] or 0.0) if by_suite else None
        out.append(
            {
                "drafter": drafter,
                "k": k,
                "pairs": len(ratios),
                "alpha": totals(b).alpha,
                "per_position_acceptance": totals(b).per_position_acceptance,
                "speedup_median": statistics.median(ratios) if ratios else None,
                "speedup_range": [min(ratios), max(ratios)] if ratios else None,
                "spread": list(band) if band else None,
                "measured": measured(band),
                "best_suite": best,
                "best_suite_speedup": by_suite.get(best) if best else None,
            }
        )
    return out


def _pair_ratios(runs: list[Run], paired_off: list[Run]) -> list[float]:
    off = {r.cycle: r.stats.tok_s for r in paired_off}
    return [r.stats.tok_s / off[r.cycle] for r in runs if off.get(r.cycle, 0) > 0 and r.slot == "B"]


# --- break-even by draft length -----------------------------------------------------------


def break_even_by_k(curve: CostCurve, draft_step: float | None, ks: range) -> list[dict]:
    """The α a round of k drafted tokens needs to pay here, k by k: its cost
    in plain steps, verify(k + 1) off the measured curve plus k draft-model
    steps (`draft`; none for an n-gram draft, whose cost is negligible)."""
    out = []
    for k in ks:
        verify = curve.at(k + 1) / curve.step
        row = {"k": k, "ngram": verify}
        if draft_step is not None:
            row["draft"] = verify + k * draft_step / curve.step
        out.append(row)
    return out


def expected_tokens(accepted: list[float], k: int) -> float:
    """Tokens a round of k drafted tokens commits: one of the target's own
    plus, per position i, the measured share of drafts reaching i whose
    tokens up to i were all accepted (per_position_acceptance). Beyond the
    positions measured, each further token survives at the last measured
    position's rate over the one before."""
    total, survive, rate = 1.0, 1.0, 0.0
    for i in range(k):
        if i < len(accepted):
            rate = accepted[i] / survive if survive > 0 else 0.0
            survive = accepted[i]
        else:
            survive *= min(rate, 1.0)
        total += survive
    return total


def best_k(acceptance: list[float], needed: list[float]) -> int | None:
    """The k (1-based index into `needed`, each k's break-even α) whose
    expected tokens per unit of cost is highest, where that beats a plain
    step; None where no k pays."""
    rates = {k: expected_tokens(acceptance, k) / cost for k, cost in enumerate(needed, start=1)}
    k = max(rates, key=lambda x: rates[x]) if rates else None
    return k if k is not None and rates[k] > 1.0 else None
