"""What happened in a turn: one Round per verify or plain step, and the
TurnStats summed from them. Pure data and arithmetic, no model."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

# Student's t at 95% (a two-sided 90% interval) for 1..10 degrees of freedom; past 10, 1.645 + 1.7/df.
T90 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812)


@dataclass
class Round:
    """One verify (or one plain step of the do-nothing arm)."""

    accepted: list[int]  # draft tokens the target agreed with
    rejected: list[int]  # draft tokens thrown away
    target: int | None  # the target's own token (correction or bonus); None if EOS came inside the draft
    drafter: str  # who proposed the draft ("off" for a plain step)
    plain: bool  # nothing was drafted: a single-token step
    arm: bool = False  # a plain step forced by the do-nothing arm (not the drafter's choice)
    steady: bool = False  # a plain step after costs.warmup_steps plain steps in a row: a baseline sample
    t_draft: float = 0.0
    t_verify: float = 0.0
    # What the cost model priced this round's decode at when the round was
    # drafted (seconds): auto chose its length by that price.
    priced: float = 0.0
    # The round's whole wall time: its draft and verify, and what follows them
    # before the next round (its text, the drafter's observe, the screen's
    # callback); 0.0 where not timed (a round made by hand).
    t_round: float = 0.0
    # Text of the committed pieces, decoded incrementally (UTF-8 safe).
    accepted_text: str = ""
    forced: int = 0  # leading accepted tokens the grammar forced in a mixed draft (hybrid)
    forced_text: str = ""  # their text; accepted_text then holds the rest
    rejected_text: str = ""
    target_text: str = ""
    eos: bool = False  # this round ended the turn on an end-of-generation token
    mode: str = ""  # the drafter that ran the round ("hybrid", "auto", …); `drafter` is its inner source
    choice: str = ""  # auto's decision for the round, e.g. "ngram k=6"

    @property
    def wall(self) -> float:
        """The round's wall time (draft + verify where nothing else was timed)."""
        return self.t_round or self.t_draft + self.t_verify

    @property
    def step(self) -> float:
        """What the round would cost in an off-mode stream: its wall time
        without the drafter's decision (off decides nothing)."""
        return max(0.0, self.wall - self.t_draft)

    @property
    def committed(self) -> list[int]:
        tail = [] if self.target is None else [self.target]
        return self.accepted + tail

    @property
    def n_tokens(self) -> int:
        """Tokens this round added to the reply (a server's chunk answers the same)."""
        return len(self.committed)

    @property
    def drafted(self) -> int:
        return len(self.accepted) + len(self.rejected)


@dataclass
class TurnStats:
    tokens: int = 0
    verify_rounds: int = 0
    alpha: float = 0.0  # tokens from verify rounds / verify rounds
    drafted: int = 0
    accepted: int = 0
    acceptance_rate: float = 0.0
    per_position_acceptance: list[float] = field(default_factory=list)
    tok_s: float = 0.0  # whole turn, wall clock, decode only
    spec_tok_s: float = 0.0  # tokens from the drafter's own rounds / their time (the arm's steps left out)
    baseline_tok_s: float | None = None  # an off run of this turn, from its steady plain steps
    speedup: float | None = None  # tok_s / baseline_tok_s; None where nothing was drafted
    # The speedup's 90% interval from the spread of the baseline's samples
    # (None below 2 of them): a few samples in a noisy spell give a wide one.
    speedup_low: float | None = None
    speedup_high: float | None = None
    prefill_tokens: int = 0
    prefill_tok_s: float = 0.0
    t_draft: float = 0.0
    t_verify: float = 0.0
    # The verify rounds' decodes as the cost model priced them when each was
    # drafted: beside t_verify, whether the drafts cost what they were chosen at.
    t_verify_priced: float = 0.0
    t_plain: float = 0.0
    t_other: float = 0.0  # everything else in the decode wall time (Python, bookkeeping)
    t_decode: float = 0.0  # decode wall time
    t_llama: float | None = None  # of t_decode, inside llama.cpp's calls, target and draft (None for other models)
    plain_steps: int = 0
    identical: bool | None = None
    first_divergence: int | None = None
    source: str = "local"  # decoded here; a server reply's stats say "server" (display.LINES)
    memory_accepted: int = 0  # accepted tokens the memory drafted
    memory_held: int | None = None  # tokens the memory held after the turn (None: no memory)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(
    rounds: list[Round],
    t_decode: float,
    prefill_tokens: int = 0,
    t_prefill: float = 0.0,
    t_llama: float | None = None,
) -> TurnStats:
    """Sum a turn's rounds. t_decode is the decode wall time, measured by the caller.

    Three groups of rounds matter:
    - verify rounds (something was drafted): alpha and acceptance come from them;
    - steady plain rounds (a single-token step after a few others, forced or
      because the drafter had nothing): their wall time, less the drafter's
      decision (`Round.step`), is the measured plain step;
    - strategy rounds (all but the forced do-nothing-arm steps): what the
      chosen drafter achieved, over their wall time, which spec_tok_s reports.

    The baseline is an off run of the same turn built from that step (one per
    token and one for the end-of-generation token), and the speedup is its
    time over this turn's: the same reply, the same rounds' costs beyond their
    decode, the same time outside them, so it is what a real off run beside
    this one would say, short replies included.
    """
    verify = [r for r in rounds if not r.plain]
    plain = [r for r in rounds if r.plain]
    steady = [r for r in plain if r.steady]
    strategy = [r for r in rounds if not r.arm]
    s = TurnStats()
    s.tokens = sum(len(r.committed) for r in rounds)
    s.verify_rounds = len(verify)
    s.alpha = _tokens(verify) / len(verify) if verify else 0.0
    s.drafted = sum(r.drafted for r in verify)
    s.accepted = sum(len(r.accepted) for r in verify)
    s.acceptance_rate = s.accepted / s.drafted if s.drafted else 0.0
    s.memory_accepted = sum(len(r.accepted) - r.forced for r in verify if r.drafter == "memory")
    s.per_position_acceptance = per_position_acceptance(verify)
    s.t_draft = sum(r.t_draft for r in rounds)
    s.t_verify = sum(r.t_verify for r in verify)
    s.t_verify_priced = sum(r.priced for r in verify)
    s.t_plain = sum(r.t_verify for r in plain)
    s.t_decode = t_decode
    s.t_llama = t_llama
    s.t_other = max(0.0, t_decode - s.t_draft - s.t_verify - s.t_plain)
    s.plain_steps = len(plain)
    s.tok_s = s.tokens / t_decode if t_decode > 0 else 0.0
    t_strategy = sum(r.wall for r in strategy)
    s.spec_tok_s = _tokens(strategy) / t_strategy if t_strategy > 0 else 0.0
    # A step counts its round's whole wall time, not its decode alone: a
    # drafter that takes fewer rounds pays what each round costs beyond its
    # decode fewer times, as a real off run pays it at every step.
    step_times = [r.step for r in steady]
    if step_times and sum(step_times) > 0 and s.tokens and t_decode > 0:
        steps, outside = _off_run(rounds, t_decode)
        t_off = outside + steps * sum(step_times) / len(step_times)
        s.baseline_tok_s = s.tokens / t_off
        # A turn that drafted nothing ran plain steps only: its "speedup" would
        # be the machine's noise, so it has none (drafter off included).
        if verify:
            s.speedup = t_off / t_decode
            interval = mean_interval(step_times)
            if interval is not None:
                s.speedup_low, s.speedup_high = ((outside + steps * m) / t_decode for m in interval)
    s.prefill_tokens = prefill_tokens
    s.prefill_tok_s = prefill_tokens / t_prefill if t_prefill > 0 else 0.0
    return s


def _off_run(rounds: list[Round], t_decode: float) -> tuple[int, float]:
    """An off run of this turn: its steps (one for each token the turn made
    and one for its end-of-generation token) and the time it spends outside
    them, as this turn did outside its rounds."""
    steps = sum(len(r.committed) + r.eos for r in rounds)
    return steps, max(0.0, t_decode - sum(r.wall for r in rounds))


def mean_interval(times: Sequence[float]) -> tuple[float, float] | None:
    """A 90% interval of the mean of these times (Student's t); None below 2."""
    n = len(times)
    if n < 2:
        return None
    mean = sum(times) / n
    sd = math.sqrt(sum((t - mean) ** 2 for t in times) / (n - 1))
    df = n - 1
    half = (T90[df - 1] if df <= len(T90) else 1.645 + 1.7 / df) * sd / math.sqrt(n)
    return max(0.0, mean - half), mean + half


def _tokens(rounds: list[Round]) -> int:
    return sum(len(r.committed) for r in rounds)


def position_counts(rounds: list[Round]) -> tuple[list[int], list[int]]:
    """(offered, hits) per draft position over the verify rounds: how many
    drafts reached position i, and how many of those had token i accepted."""
    offered: list[int] = []
    hits: list[int] = []
    for r in rounds:
        for i in range(r.drafted):
            if i == len(offered):
                offered.append(0)
                hits.append(0)
            offered[i] += 1
            hits[i] += i < len(r.accepted)
    return offered, hits


def per_position_acceptance(rounds: list[Round]) -> list[float]:
    """Share of drafts of length > i whose token i was accepted."""
    offered, hits = position_counts(rounds)
    return [h / o for o, h in zip(offered, hits)]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens a and b share."""
    first = first_difference(a, b)
    return len(a) if first is None else first  # None: equal, so all of a


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first token where a and b differ (a length difference counts)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
