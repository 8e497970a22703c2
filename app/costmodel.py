"""This machine's cost curve: how long the target takes to decode n positions
in one call, at the current context.

A short calibration measures a few batch sizes; every live round refines the
estimate (an exponential moving average per size). Sizes never measured are
interpolated linearly between neighbours, or extrapolated along the last
measured slope.
"""

from __future__ import annotations

import time

# Every size up to 8, then the usual draft lengths: CPU kernels change at
# batch sizes like 8 and 16, and the curve bends there (docs/bench-default-pair.txt,
# the 2-core CPU: 7 positions cost 4.96 steps, 8 cost 6.86, 16 only 9.13),
# which interpolating between far-apart sizes would miss.
CALIBRATION_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 17)
SMOOTHING = 0.2  # weight of a new observation


class CostModel:
    def __init__(self) -> None:
        self.seconds: dict[int, float] = {}  # positions -> seconds per decode

    @property
    def calibrated(self) -> bool:
        return 1 in self.seconds and len(self.seconds) >= 3

    def observe(self, n: int, seconds: float) -> None:
        old = self.seconds.get(n)
        self.seconds[n] = seconds if old is None else old + SMOOTHING * (seconds - old)

    def step(self, n: int) -> float:
        """Estimated seconds to decode n positions in one call."""
        if n in self.seconds:
            return self.seconds[n]
        known = sorted(self.seconds)
        if not known:
            return float(n)  # no data: assume the CPU worst case, linear
        lo = [m for m in known if m < n]
        hi = [m for m in known if m > n]
        if lo and hi:
            a, b = lo[-1], hi[0]
            w = (n - a) / (b - a)
            return self.seconds[a] + w * (self.seconds[b] - self.seconds[a])
        if len(known) == 1:
            return self.seconds[known[0]] * n / known[0]
        a, b = (known[-2], known[-1]) if lo else (known[0], known[1])
        slope = max(0.0, (self.seconds[b] - self.seconds[a]) / (b - a))
        return max(1e-6, self.seconds[b if lo else a] + slope * (n - (b if lo else a)))

    def relative(self, n: int) -> float:
        """Cost of n positions in plain steps."""
        return self.step(n) / self.step(1)

    def calibrate(self, model, sizes=CALIBRATION_SIZES, repeats: int = 1) -> None:
        """Decode junk batches right after the cache and roll them back.
        Takes the fastest of `repeats` for each size; live rounds refine it."""
        base = len(model.tokens)
        filler = model.tokens[-1] if model.tokens else 0
        for n in sizes:
            if base + n > model.n_ctx:
                break
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                model.eval([filler] * n, n_logits=n)
                best = min(best, time.perf_counter() - t0)
                model.truncate(base)
            self.seconds[n] = best

    def curve(self, up_to: int) -> list[float]:
        """Relative cost of 1..up_to positions, for display."""
        return [self.relative(n) for n in range(1, up_to + 1)]
