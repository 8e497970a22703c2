"""A synthetic clock for the decodes a cost curve times: a check's verdict
then depends on the code, not on how busy the machine is."""

from __future__ import annotations


def steady_timer(monkeypatch, jitter: float = 0.0):
    """Time decodes (costmodel.timer) by a synthetic clock: each decode takes
    4 ms, give or take `jitter` (0.5: ±50%); the probe's runs keep the real clock."""
    import random

    from specchat.decoding import costmodel

    rng, now = random.Random(7), [0.0]

    def clock() -> float:
        now[0] += 0.002 * (1 + jitter * rng.uniform(-1, 1))  # two readings a decode
        return now[0]

    monkeypatch.setattr(costmodel, "timer", clock)
