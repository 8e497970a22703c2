"""The cost curve kept between sessions, in the data folder's
cost-curves.json: one per model file, llama.cpp build, threads, context
size, placement and CPU kernels (the model's `cost_key`). The next session
on the same model starts from it and measures nothing before its first
reply; live rounds go on refining it, and each turn's refined curve, with
what the rounds saw of it, is what is kept. A curve is measured again,
between replies, once it is older than MAX_AGE_S or once live rounds,
in this session or the ones before, find it `drifted` (costmodel.py).
The file is read as untrusted (kept.py), and only the CURVES_KEPT curves
saved most recently stay.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from specchat import kept
from specchat.decoding.costmodel import CostModel, Measuring, implausible

MAX_AGE_S = 30 * 86400  # a kept curve older than this is measured again
CURVES = "cost-curves.json"  # in the data folder
CURVES_MAX_BYTES = 1 << 20  # a bigger one is no record of specchat's: 32 GPU curves take about 250 kB
CURVES_KEPT = 32  # curves kept, the most recently saved (measured or used by a turn); the oldest go first


def _points(raw: object) -> dict[int, float] | None:
    """A kept {"n": seconds} read back: positive, finite seconds at sizes 1 to 4096; None where it is not one."""
    if not isinstance(raw, dict):
        return None
    curve: dict[int, float] = {}
    for n, t in raw.items():
        if not (isinstance(n, str) and n.isdigit() and isinstance(t, (int, float)) and not isinstance(t, bool)):
            return None
        if not (math.isfinite(t) and t > 0 and 1 <= int(n) <= 4096):
            return None
        curve[int(n)] = float(t)
    return curve


def _entry(key: str) -> dict:
    entry = kept.read_json(CURVES, CURVES_MAX_BYTES).get(key)
    return entry if isinstance(entry, dict) else {}


def _curve(entry: dict) -> dict[int, float] | None:
    curve = _points(entry.get("seconds"))
    return curve if curve and 1 in curve and len(curve) >= 3 and not implausible(curve) else None


def _date(entry: dict, field: str = "measured") -> float | None:
    """A Unix time the entry holds; one in the future is no date (no measurement
    was taken there: a planted date would keep a curve from ever being old)."""
    when = entry.get(field, entry.get("saved"))
    if not isinstance(when, (int, float)) or isinstance(when, bool) or not math.isfinite(when):
        return None
    return float(when) if when <= time.time() else None


def _evidence(entry: dict, curve: dict[int, float]) -> tuple[dict[int, float], dict[int, int]]:
    """What live rounds had to say of a kept curve: the curve as measured,
    and the rounds seen per size since (the curve itself and none, where the
    entry keeps none that reads)."""
    reference, seen = _points(entry.get("reference")), entry.get("seen")
    if reference is None or not isinstance(seen, dict):
        return curve, {}
    counts: dict[int, int] = {}
    for n, count in seen.items():
        if not (isinstance(n, str) and n.isdigit() and type(count) is int and 0 <= count < 1 << 31):
            return curve, {}
        counts[int(n)] = count
    return reference, counts


def saved_curve(key: str) -> dict[int, float] | None:
    """The curve kept for this cost key, if one was kept and reads as one:
    positive, finite seconds for at least three sizes, one of them 1, and
    no size implausible (measured again)."""
    return _curve(_entry(key))


def measured_at(key: str) -> float | None:
    """When the curve kept for this key was measured (a Unix time), if it says and it is not in the future."""
    return _date(_entry(key))


def save_curve(
    key: str,
    points: dict[int, float],
    measured: float | None = None,
    reference: dict[int, float] | None = None,
    seen: dict[int, int] | None = None,
) -> None:
    """Keep this curve for the cost key (replacing what was kept), with when
    it was measured (now, unless told) and, where live rounds refined it,
    the curve as measured and the rounds seen per size, so that the next
    session goes on judging its drift. Only the CURVES_KEPT most recently
    saved curves stay. A data folder that cannot be written costs only a
    measurement next time."""
    now = time.time()
    entry: dict = {
        "seconds": {str(n): t for n, t in sorted(points.items())},
        "measured": now if measured is None else measured,
        "saved": now,
    }
    if reference is not None:
        entry["reference"] = {str(n): t for n, t in sorted(reference.items())}
        entry["seen"] = {str(n): count for n, count in sorted((seen or {}).items())}
    curves = {k: e for k, e in kept.read_json(CURVES, CURVES_MAX_BYTES).items() if isinstance(e, dict)}
    curves[key] = entry

    def recent(k: str) -> tuple[bool, float]:  # the curve saved now first, then the others by when they were saved
        return k == key, _date(curves[k], "saved") or 0.0

    newest = set(sorted(curves, key=recent, reverse=True)[:CURVES_KEPT])
    kept.keep(CURVES, {k: e for k, e in curves.items() if k in newest})


class KeptCurve:
    """A CostModel and the curve kept for its cost key (None: keep none):
    where the curve came from, when it was measured, whether it is due again.
    A kept curve is taken only where it says when it was measured (a date in
    the future is none) and live rounds, in this session or the ones before,
    have not moved it past DRIFT: any other is measured again before auto
    prices by it, in `run` as in the chat."""

    def __init__(self, costs: CostModel, key: str | None) -> None:
        self.costs, self.key = costs, key
        entry = _entry(key) if key else {}
        saved = _curve(entry)
        self.measured = _date(entry) if saved else None  # a Unix time
        if saved and self.measured is not None:
            costs.resume(saved, *_evidence(entry, saved))
            if costs.drifted() is not None:  # earlier sessions' rounds disagree with it
                costs.load({})
        self.source = "saved" if costs.calibrated else "none"  # "measured" once this session has measured it
        self.spent = 0.0  # seconds all measuring took, this session
        if not costs.calibrated:
            self.measured = None

    def due(self) -> str | None:
        """Why the curve should be measured again: "missing", "old" (measured
        over MAX_AGE_S ago) or "drifted" (live rounds moved a size past DRIFT)."""
        if not self.costs.covers:
            return "missing"  # never measured, or measured before it covered every size auto may pick
        if self.measured is not None and time.time() - self.measured > MAX_AGE_S:
            return "old"
        return "drifted" if self.costs.drifted() is not None else None

    def measure(
        self,
        target,
        cancel: threading.Event,
        until: float | None = None,
        tell: Callable[[Measuring], None] | None = None,
        afresh: bool = False,
    ) -> None:
        """Measure the sizes still missing into the curve (costmodel.measure:
        a set `cancel` or the deadline `until` stops it between sizes and
        keeps those timed), every size where `afresh`, and keep it; `tell`
        hears how it goes, as it starts, after each size and as it ends."""
        if afresh:
            self.costs.start_over()
        last = Measuring(0, len(self.costs.missing()))

        def timed(state: Measuring) -> None:
            nonlocal last
            last = state
            if tell is not None:
                tell(state)

        timed(last)
        started = time.perf_counter()
        try:
            whole = self.costs.measure(target, cancel=cancel, on_size=timed, until=until)
        finally:
            self.spent += time.perf_counter() - started
            timed(replace(last, seconds_left=0.0, ended=True))
        if whole:  # measured afresh: the new curve, at its own level (live rounds refine it from there)
            self.was_measured(dict(self.costs.measured) if afresh else None)
        else:
            self.keep()  # the sizes timed so far, for the next pause or the next session

    def report(self) -> dict:
        """Where the curve came from ("saved" by an earlier session, "measured"
        by this one, "none" yet), the seconds measuring took, and how many of
        the sizes auto may pick are measured."""
        sizes = len(self.costs.sizes)
        return {
            "from": self.source,
            "calibration_s": round(self.spent, 3),
            "sizes_measured": sizes - len(self.costs.missing()),
            "sizes": sizes,
        }

    def was_measured(self, points: dict[int, float] | None = None) -> None:
        """The curve was measured now (`points`: a new one to take); keep it."""
        if points is not None:
            self.costs.load(points)
        self.source, self.measured = "measured", time.time()
        self.keep()

    def keep(self) -> None:
        """Keep the curve as it is now (live rounds refine it), with when it
        was measured and what live rounds have seen of it; one measured on a
        busy machine (`implausible`) is not kept, so the next session measures
        it again."""
        costs = self.costs
        if costs.calibrated and self.key and not implausible(costs.measured):
            save_curve(self.key, costs.seconds, self.measured, costs.measured, costs.seen)
