"""What bench measures besides its runs: the target's cost curve, the
n-gram proposal's time at a long context, a bare greedy loop (the reference
row: the same work as off, without the engine), and the machine and file
facts that go into the report.
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specchat.bench.scorecard import CostCurve
from specchat.decoding.costmodel import time_decodes
from specchat.decoding.sampling import SamplingParams, probs, sample
from specchat.decoding.stats import TurnStats
from specchat.engine.loop import prefill
from specchat.session.chat import ChatSession

if TYPE_CHECKING:
    from specchat.drafters.textcopy import Spelling

CURVE_CONTEXT = 512  # tokens of real text before the cost curve's decodes
CURVE_REPEATS = 5
NGRAM_CONTEXT = 32768
NGRAM_CALLS = 300
NGRAM_K = 16
NGRAM_BAR_MS = 0.2


def peak_rss_mb() -> float:
    """This process's peak resident memory so far."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def bare_greedy(
    model, prompt: list[int], max_tokens: int, sampling: SamplingParams, constraint=None
) -> tuple[list[int], float, int]:
    """Plain decoding straight on the driver, one token per llama_decode: no
    engine, drafter, rounds or stats; under `constraint` (a grammar.Constraint
    that is on) each token is the grammar's choice, as in the engine.
    Returns (tokens, decode seconds, steps)."""
    model.argmax_only(sampling.greedy and constraint is None)
    prefill(model, prompt)
    rng = np.random.default_rng(sampling.seed)
    out: list[int] = []
    token, steps = prompt[-1], 0
    if constraint is not None:
        constraint.begin()
    t0 = time.perf_counter()
    while len(out) < max_tokens:
        model.eval([token], n_logits=1)
        steps += 1
        if constraint is None:
            token = model.argmax(0) if sampling.greedy else sample(probs(model.logits(0), sampling), rng)
        else:
            logits = model.logits(0)
            token = (
                constraint.argmax(logits) if sampling.greedy else sample(probs(constraint.mask(logits), sampling), rng)
            )
        if model.is_eog(token):
            break
        if constraint is not None:
            constraint.commit(token, model.piece(token), False)
        out.append(token)
    return out, time.perf_counter() - t0, steps


def measure_cost_curve(
    model, text: list[int], max_positions: int, repeats: int = CURVE_REPEATS, on_size=None
) -> CostCurve:
    """Time one decode of n = 1..max_positions positions right after real
    context (costmodel.time_decodes); the median of `repeats` per size.
    `on_size(n)` hears of each size as its timings are done."""
    base = (text * (CURVE_CONTEXT // max(1, len(text)) + 2))[: min(CURVE_CONTEXT, model.n_ctx // 2)]
    model.truncate(0)
    model.eval(base, n_logits=0)
    positions = list(range(1, max_positions + 1))
    samples: dict[int, list[float]] = {}
    for n in positions:  # one size at a time, so a progress bar can follow
        samples.update(time_decodes(model, [n], repeats, filler=text[: max_positions + 1]))
        if on_size is not None:
            on_size(n)
    model.truncate(0)
    medians = [statistics.median(samples[n]) for n in positions]
    return CostCurve(len(base), positions, medians, repeats, noise(list(samples.values())))


def noise(samples: list[list[float]]) -> float:
    """How much repeated timings of the same work differ: for each set, half
    its interquartile range over its median (one hiccup does not move it);
    the median of those. 0.05 reads as ±5%."""
    spreads = []
    for s in samples:
        if len(s) >= 3 and statistics.median(s) > 0:
            q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
            spreads.append((q3 - q1) / 2 / statistics.median(s))
    return statistics.median(spreads) if spreads else 0.0


def step_noise(model, text: list[int], steps: int = 15) -> float:
    """The spread of plain steps now, right after real context: how busy the machine is."""
    return noise([time_decodes(model, [1], steps, filler=text[:2])[1]]) if text else 0.0


def time_ngram_proposals(
    text: list[int], spelling: Spelling | None = None, context: int = NGRAM_CONTEXT, calls: int = NGRAM_CALLS
) -> dict:
    """Index `context` tokens of repeated real text, then time propose() as
    the conversation grows by the proposed tokens: the chat's n-gram
    drafter, its copy of the text included where `spelling` (the target's
    tokenizer) is given."""
    from specchat.drafters.ngram import NgramDrafter

    ctx = (text * (context // max(1, len(text)) + 1))[:context]
    drafter = NgramDrafter(spelling=spelling)
    drafter.begin(ctx)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        draft = drafter.propose(ctx, NGRAM_K)
        times.append(time.perf_counter() - t0)
        new = draft.tokens[:4] or text[:1]
        ctx += new
        drafter.observe(new)
    times_ms = sorted(t * 1e3 for t in times)
    mean = statistics.fmean(times_ms)
    return {
        "context_tokens": context,
        "k": NGRAM_K,
        "calls": calls,
        "mean_ms": mean,
        "median_ms": statistics.median(times_ms),
        "p99_ms": times_ms[int(0.99 * (len(times_ms) - 1))],
        "bar_ms": NGRAM_BAR_MS,
        "ok": mean < NGRAM_BAR_MS,
    }


def machine_facts(session: ChatSession) -> dict:
    import llama_cpp

    from specchat.llamacpp import kernels, llama

    return {
        "cpu_model": kernels.cpu_name(),
        "logical_cores": os.cpu_count(),
        "physical_cores": llama.physical_cores(),
        "threads": session.target.n_threads,
        "n_ctx": session.n_ctx,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "llama_cpp_python": llama_cpp.__version__,
        "llama_system_info": llama.system_info(),
        "devices": session.devices,  # backend, device, layers offloaded: target and draft
    }


def file_facts(path: Path | None) -> dict | None:
    """A model file with its sha256 from the store's verification record."""
    if path is None:
        return None
    from specchat.store.files import read_json, record_path

    record = read_json(record_path(path)) or {}
    return {
        "path": str(path),
        "size": path.stat().st_size,
        "sha256": record.get("sha256"),
        "verified_at": record.get("verified_at"),
        "source": record.get("source"),
    }


def bare_stats(tokens: int, t_decode: float, steps: int, prefill: int) -> TurnStats:
    """TurnStats for the reference loop: every step plain, nothing else timed."""
    return TurnStats(
        tokens=tokens,
        tok_s=tokens / t_decode if t_decode > 0 else 0.0,
        baseline_tok_s=tokens / t_decode if t_decode > 0 else None,
        t_plain=t_decode,
        t_decode=t_decode,
        plain_steps=steps,
        prefill_tokens=prefill,
    )
