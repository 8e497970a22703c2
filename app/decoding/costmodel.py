"""This machine's cost curve: how long the target takes to decode n positions
in one call, at the current context.

A measurement times a few batch sizes, one at a time, and each size counts
as soon as it is timed, so a measurement cut short (a reply wants the
model) keeps what it timed; every live round refines the estimate (an
exponential moving average per size). Once every size is measured, auto
drafts only to measured sizes (`priced`), so a kernel step between two of
them (on a 2-core CPU, 15 positions cost more than 16) never makes a draft
look cheaper than it is. Until then a size not measured costs at least a
cautious prior (PRIOR_SLOPE) scaled by the plain steps live rounds time, so
the first reply on a new machine needs no measurement before it: it drafts
only long, likely copies, and each size it verifies is priced as measured
from then on.

Sizes are timed as the engine meets them: a batch of n positions right
after a single-token step. So the 1-position entry is a step among other
steps (what an off-mode stream pays; on a GPU with CUDA graphs, a graph
replay), and a batch pays for the change of shape, as a verify does. The
plain steps a stream takes to warm up again after a batch are counted on
their own (`warming`), so auto can charge them to the drafting that causes
them.

A live plain step that moves the 1-position cost moves every size with it
(the level), and a size whose live rounds move its cost relative to a plain
step by more than DRIFT from what was measured has `drifted`: the curve's
shape changed under it. keptcurve.py keeps a measured curve between
sessions and says when it is due to be measured again.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from specchat.decoding import kvcache
from specchat.decoding.target import K_MAX

# On a CPU: every size up to 8, then the usual draft lengths up to the
# longest verify (k = 64: 65 positions). CPU kernels change at batch sizes
# like 8 and 16, and the curve bends there (docs/measurements/bench-default-pair.txt, the
# 2-core CPU: 7 positions cost 4.96 steps, 8 cost 6.86, 16 only 9.13), which
# interpolating between far-apart sizes would miss; between the sizes here
# it is smooth. A GPU's curve has cliffs anywhere (8 → 9 on CUDA), so there
# every size is measured: calibration_sizes.
LONGEST = K_MAX + 1  # positions of the longest verify
CALIBRATION_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 17, 24, 32, 33, 48, 49, 64, LONGEST)
SMOOTHING = 0.2  # weight of a new observation
# Warm-up steps: plain steps after a batch of another shape before a step
# costs what it does in a stream of steps: ggml-cuda runs the first without
# its CUDA graph and captures a new one on the second
# (ggml_backend_cuda_graph_compute).
WARMUP_STEPS = 2
DRIFT = 0.25  # live rounds this far from the measured curve: measure it again
DRIFT_ROUNDS = 10  # ...once a size has been seen this often (SMOOTHING has then forgotten the start)
# A batch of n positions reads the weights once, so it costs well under 2n
# plain steps even where the output layer, run once a position, is most of
# a step (the 135M test model on one thread: 2 positions cost 2.5 steps; the
# default pair on 2 cores, 2 cost 1.2 to 1.7; an H200 about one). A size
# measured at over PLAUSIBLE times n steps was measured while something else
# ran: it is measured again, RETRIES times at most, and a curve that stays
# so prices this session's rounds but is not kept.
PLAUSIBLE = 2.0
RETRIES = 2
# Before a curve is measured, n positions cost at least 1 + PRIOR_SLOPE * (n - 1)
# plain steps: above what 17 positions cost on the 2-core CPUs measured (7.4
# steps on an AMD EPYC, 4 on an Intel Xeon; about 1 on a GPU), so drafts priced
# on it pay on those machines, and a size where it is too low (the AMD's
# bend: 8 positions cost 6.9 steps) is priced as measured after one verify.
PRIOR_SLOPE = 0.5
timer = time.perf_counter  # the clock decodes are timed by (a test gives it a jittering one)


@dataclass(frozen=True)
class Measuring:
    """How far a measurement of the cost curve has gone: sizes timed of
    `total`, an estimate of the seconds left (None before the first size),
    and whether it has ended (whole or cut short)."""

    done: int
    total: int
    seconds_left: float | None = None
    ended: bool = False


def calibration_sizes(device: dict | None) -> tuple[int, ...]:
    """The sizes a calibration measures: CALIBRATION_SIZES on the CPU, every
    size up to LONGEST where the model runs on a GPU backend."""
    return tuple(range(1, LONGEST + 1)) if device and device.get("gpu_layers") else CALIBRATION_SIZES


def warmup_steps(device: dict | None) -> int:
    """How many plain steps a stream needs after a batch of another shape
    before a step costs what it does among steps: WARMUP_STEPS where the
    model runs on a GPU backend (llamacpp.placement's dict), none on the CPU,
    whose kernels keep no state between decodes."""
    return WARMUP_STEPS if device and device.get("gpu_layers") else 0


def implausible(points: dict[int, float]) -> list[int]:
    """Sizes that cost more than PLAUSIBLE times n plain steps: measured on a busy machine."""
    one = points.get(1)
    return [n for n, t in sorted(points.items()) if one and n > 1 and t > PLAUSIBLE * n * one]


def interpolate(points: dict[int, float], n: float, known: list[int] | None = None) -> float:
    """Seconds for n positions from measured {positions: seconds}: linear
    between neighbours, along the last slope beyond them (never below zero).
    `known` is sorted(points), for callers that keep it."""
    known = sorted(points) if known is None else known
    if not known:
        return float(n)  # no data: assume the CPU worst case, linear
    if n in points:
        return points[int(n)]  # n equals a key, so int(n) is that key
    if len(known) == 1:
        return points[known[0]] * n / known[0]
    if n < known[0]:
        return points[known[0]]
    if n > known[-1]:
        a, b = known[-2], known[-1]
        return points[b] + max(0.0, (points[b] - points[a]) / (b - a)) * (n - b)
    i = bisect.bisect_right(known, n)
    a, b = known[i - 1], known[i]
    return points[a] + (points[b] - points[a]) * (n - a) / (b - a)


def time_decodes(
    model, sizes, repeats: int, filler: list[int] | None = None, cancel: threading.Event | None = None
) -> dict[int, list[float]]:
    """Seconds of one decode of n positions right after the cache, each right
    after a single-token step, rolled back after; `repeats` samples per size
    after one untimed pass that warms every shape up. A set `cancel` stops
    it between decodes, with what was timed so far."""
    held = list(model.tokens)  # a recurrent model may start over on a rollback: fed again at the end
    base = len(held)
    filler = filler or [model.tokens[-1] if model.tokens else 0]
    filler = (filler * (max(sizes) + 1))[: max(sizes) + 1]
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for rep in range(repeats + 1):
        for n in sizes:
            if base + 1 + n > model.n_ctx or (cancel is not None and cancel.is_set()):
                continue
            model.eval(filler[:1], n_logits=1)  # the step before, as in a stream
            t0 = timer()
            model.eval(filler[1 : n + 1], n_logits=n)
            elapsed = timer() - t0
            model.truncate(base)
            if len(model.tokens) < base:
                kvcache.sync(model, held, logits=False)
            if rep:
                samples[n].append(elapsed)
    return {n: s for n, s in samples.items() if s}


class CostModel:
    def __init__(self, warmup_steps: int = WARMUP_STEPS, sizes: tuple[int, ...] = CALIBRATION_SIZES) -> None:
        # Plain steps in a row before a step costs what it does among steps
        # (warmup_steps(device)): the engine's baseline samples and auto's price
        # for leaving a plain run both go by it.
        self.warmup_steps = warmup_steps
        self._sizes = sizes  # what calibrate measures (calibration_sizes)
        self.seconds: dict[int, float] = {}  # positions -> seconds per decode
        self._known: list[int] = []  # sorted(self.seconds), kept: auto asks for many sizes every round
        self.warming = 0.0  # extra seconds of each warm-up step after a batch
        self.measured: dict[int, float] = {}  # the curve as measured (or loaded), before live rounds refined it
        self.seen: dict[int, int] = {}  # live rounds observed per size since then
        self._covers = False  # every size in `sizes` measured: kept, auto asks priced() for many sizes a round

    @classmethod
    def from_points(cls, points: dict[int, float]) -> CostModel:
        """A cost model that starts from a curve measured elsewhere, at the sizes it holds."""
        c = cls(sizes=tuple(sorted(points)))
        c.load(points)
        return c

    @property
    def calibrated(self) -> bool:
        return 1 in self.seconds and len(self.seconds) >= 3

    @property
    def sizes(self) -> tuple[int, ...]:
        return self._sizes

    @sizes.setter
    def sizes(self, sizes: tuple[int, ...]) -> None:
        self._sizes = tuple(sizes)
        self._measured_changed()

    @property
    def covers(self) -> bool:
        """Measured at every size calibrate measures: a curve kept before a
        size was added (auto's longer drafts) is measured again."""
        return self._covers

    def missing(self) -> list[int]:
        """The sizes still to measure, smallest first."""
        return [n for n in self.sizes if n not in self.measured]

    def _measured_changed(self) -> None:
        self._covers = 1 in self.measured and len(self.measured) >= 3 and set(self.sizes) <= set(self.measured)

    def observe(self, n: int, seconds: float) -> None:
        """A live decode of n positions took `seconds`. A plain step that
        moves the 1-position cost moves every size with it: the machine got
        faster or slower as a whole (a busy neighbour, a clock), and the
        sizes no round visits keep their shape instead of their old seconds."""
        old = self.seconds.get(n)
        self.seconds[n] = seconds if old is None else old + SMOOTHING * (seconds - old)
        if n == 1 and old:
            scale = self.seconds[1] / old
            self.seconds.update((m, t * scale) for m, t in self.seconds.items() if m != 1)
        self.seen[n] = self.seen.get(n, 0) + 1
        if old is None:
            bisect.insort(self._known, n)

    def observe_warming(self, seconds: float) -> None:
        """A warm-up step: a plain step taken right after a batch of another shape."""
        if 1 in self.seconds:
            extra = max(0.0, seconds - self.seconds[1])
            self.warming += SMOOTHING * (extra - self.warming)

    def step(self, n: int) -> float:
        """Estimated seconds to decode n positions in one call: until every
        size is measured, one not measured costs at least the prior."""
        if self._covers or n in self.seconds or 1 not in self.seconds:
            return interpolate(self.seconds, n, self._known)
        prior = self.seconds[1] * (1.0 + PRIOR_SLOPE * (n - 1))
        if n > self._known[-1]:
            # Past the largest size seen, the prior, and never less than that size
            # cost: the slope between two small sizes says nothing of a big one
            # (on the AMD EPYC 9 positions cost 8.4 steps and 17 cost 9.0).
            return max(prior, self.seconds[self._known[-1]])
        return max(prior, interpolate(self.seconds, n, self._known))  # the line through the sizes seen, at least

    def priced(self, n: int) -> bool:
        """Whether auto may draft to n positions: once every size is measured,
        those whose cost was measured (calibrated, kept or seen live), not
        interpolated; every size before then (a size not measured costs the
        prior at least)."""
        return n in self.seconds or not self._covers

    def relative(self, n: int) -> float:
        """Cost of n positions in plain steps."""
        return self.step(n) / self.step(1)

    def calibrate(
        self, model, sizes: tuple[int, ...] | None = None, repeats: int = 1, cancel: threading.Event | None = None
    ) -> None:
        """Measure the whole curve afresh (`measure` on an empty model) and
        take it; live rounds refine it. A set `cancel` stops it, and what it
        measured is dropped: a curve cut short is not one to keep."""
        fresh = CostModel(self.warmup_steps, sizes or self.sizes)
        if not fresh.measure(model, repeats, cancel):
            return
        if sizes is None:  # a size the context cannot hold is not asked for again
            self.sizes = fresh.sizes
        self.load({**self.seconds, **fresh.seconds})

    def measure(
        self,
        model,
        repeats: int = 1,
        cancel: threading.Event | None = None,
        on_size: Callable[[Measuring], None] | None = None,
        until: float | None = None,
    ) -> bool:
        """Time the sizes still missing, one at a time: junk batches decoded
        right after the cache and rolled back, the fastest of `repeats`,
        again where one came out implausible beside the plain step timed in
        the same pass. Each size joins the curve as it is timed, at the
        curve's level (scaled by the plain steps, measured and live, against
        this pass's), so a set `cancel` or the perf_counter deadline `until`
        stops it between sizes and keeps what it timed. `on_size` hears of
        each size. Returns whether every size is measured now."""
        todo = self.missing()
        total, done, spent, work_done = len(todo), 0, 0.0, 0
        work_left = sum(n + 1 for n in todo)  # a size's decode, and the step before it: the estimate's unit
        one: float | None = None  # this pass's plain step
        for n in todo:
            if (cancel is not None and cancel.is_set()) or (until is not None and time.perf_counter() > until):
                break
            t0 = timer()
            if one is None:
                one = min(time_decodes(model, (1,), repeats, cancel=cancel).get(1, [0.0])) or None
                if one is None:
                    break  # cancelled, or the context holds no more
            timed = one if n == 1 else self._time_size(model, n, one, repeats, cancel)
            if timed is None and not (cancel is not None and cancel.is_set()):
                self.sizes = tuple(m for m in self.sizes if m != n)  # the context cannot hold it: not asked again
            elif timed is not None:
                self._take(n, timed, one)
            spent, work_done, done = spent + timer() - t0, work_done + n + 1, done + 1
            work_left -= n + 1
            if on_size is not None:
                on_size(Measuring(done, total, spent / work_done * work_left))
        self._measured_changed()
        return self._covers

    def _time_size(self, model, n: int, one: float, repeats: int, cancel) -> float | None:
        """Seconds of n positions, timed again (with a plain step) where it
        comes out implausible beside `one`; None where it could not be timed."""
        samples = time_decodes(model, (n,), repeats, cancel=cancel).get(n)
        for _ in range(RETRIES):
            if not samples or n == 1 or min(samples) <= PLAUSIBLE * n * one:
                break
            again = time_decodes(model, (1, n), repeats, cancel=cancel)
            one = min([one, *again.get(1, [])])
            samples += again.get(n, [])
        return min(samples) if samples else None

    def _take(self, n: int, seconds: float, one: float) -> None:
        """A size timed now, in a pass whose plain step took `one`: into the
        curve as measured and the live one, each at its own level."""
        base, live = self.measured.get(1), self.seconds.get(1)
        self.measured[n] = seconds if base is None else seconds * base / one
        if n != 1 or live is None:
            self.seconds[n] = seconds if live is None else seconds * live / one
            if n not in self._known:
                bisect.insort(self._known, n)

    def start_over(self) -> None:
        """Measure every size again: until each is, the live curve prices it."""
        self.measured, self.seen = {}, {}
        self._measured_changed()

    def load(self, points: dict[int, float]) -> None:
        """Start from a curve measured before (saved_curve, or calibrate's)."""
        self.seconds = dict(points)
        self._known = sorted(points)
        self.measured = dict(points)
        self.seen = {}
        self._measured_changed()

    def resume(self, seconds: dict[int, float], measured: dict[int, float], seen: dict[int, int]) -> None:
        """Start from a kept curve as live rounds left it: `seconds` refined
        from the curve `measured` by `seen` rounds per size, so drift is
        judged over every session that used it."""
        self.load(measured)
        self.seconds = dict(seconds)
        self._known = sorted(seconds)
        self.seen = dict(seen)
        self._measured_changed()

    def drifted(self) -> int | None:
        """A size whose live rounds (seen DRIFT_ROUNDS times or more) moved its
        cost relative to a plain step's past DRIFT from the measured curve, or
        None. A change of level (the whole machine slower or faster, or live
        steps costing a steady share more than calibration's bare decodes) is
        followed by `observe`'s scaling and calls for no new measurement: auto
        prices by the curve's shape."""
        one, now = self.measured.get(1), self.seconds.get(1)
        level = now / one if one and now else 1.0
        for n, count in sorted(self.seen.items()):
            was = self.measured.get(n)
            if n != 1 and was and count >= DRIFT_ROUNDS and abs(self.seconds[n] / (was * level) - 1) > DRIFT:
                return n
        return None

    def curve(self, up_to: int) -> list[float]:
        """Relative cost of 1..up_to positions, for display."""
        return [self.relative(n) for n in range(1, up_to + 1)]
