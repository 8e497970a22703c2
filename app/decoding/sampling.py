"""The sampling chain (temperature, top-k, top-p) and exact speculative
acceptance. The same chain shapes the target's p and a drafter's q, which
is what keeps speculative sampling exact."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SamplingParams:
    temp: float = 0.0  # 0 = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temp <= 0.0


def probs(logits: np.ndarray, sp: SamplingParams) -> np.ndarray:
    """A dense probability row after temperature, top-k and top-p."""
    z = logits.astype(np.float64) / sp.temp
    keep = _top_k_ids(z, sp.top_k) if sp.top_k > 0 else None
    if keep is not None:
        masked = np.full_like(z, -np.inf)
        masked[keep] = z[keep]
        z = masked
    p = np.exp(z - z.max())
    p /= p.sum()
    if sp.top_p < 1.0:
        p = _top_p(p, sp.top_p)
    return p


def _top_k_ids(z: np.ndarray, k: int) -> np.ndarray:
    k = min(k, z.size)
    return np.argpartition(-z, k - 1)[:k]


def _top_p(p: np.ndarray, top_p: float) -> np.ndarray:
    """Keep the smallest set of most likely tokens whose mass reaches top_p.
    Grows a partial sort instead of sorting the whole vocabulary."""
    m = 64
    while True:
        m = min(m, p.size)
        ids = np.argpartition(-p, m - 1)[:m]
        ids = ids[np.argsort(-p[ids], kind="stable")]
        cum = np.cumsum(p[ids])
        if cum[-1] >= top_p or m == p.size:
            n = int(np.searchsorted(cum, top_p)) + 1
            out = np.zeros_like(p)
            out[ids[:n]] = p[ids[:n]]
            return out / out.sum()
        m *= 4


def sample(p: np.ndarray, rng: np.random.Generator) -> int:
    """Draw one token id from a probability row (inverse CDF; no renormalising)."""
    cdf = np.cumsum(p)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), p.size - 1))


def accept_or_correct(p: np.ndarray, d: int, q: np.ndarray | None, rng: np.random.Generator) -> tuple[bool, int | None]:
    """Exact speculative sampling for one drafted token d.

    Accept d with probability min(1, p(d)/q(d)). Otherwise return a token drawn
    from the normalised max(0, p - q). q=None means a one-hot (deterministic)
    drafter. Returns (accepted, correction)."""
    qd = 1.0 if q is None else float(q[d])
    if qd > 0 and rng.random() < min(1.0, p[d] / qd):
        return True, None
    if q is None:
        residual = p.copy()
        residual[d] = 0.0
    else:
        residual = np.maximum(p - q, 0.0)
    total = residual.sum()
    if total <= 0:  # p == q: nothing to correct towards; p itself is right
        return False, sample(p, rng)
    return False, sample(residual / total, rng)
