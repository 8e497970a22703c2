"""`specchat models check PAIR`: whether speculation can pay for this pair
on this machine, measured, before anyone chats on it.

It loads the pair and measures the target's plain step and verify cost
curve (measure.measure_cost_curve, as bench does) and the draft model's
step, turns them into the α a round of k drafted tokens needs to break even
(scorecard.break_even_by_k, k = 1…8) and the best k. Then a short probe:
the first prompt of three of the bench's suites (or the user's --prompts),
run by bench's own runner with the same plan shape (off interleaved with
draft, ngram and auto prompt by prompt), so its speedups are bench's. A
speedup whose spread holds 1× is "break-even" (scorecard.spread). The verdict per
drafter is kept for `specchat models` and the chat's pair list
(store/verdicts.py).

A busy machine can fake any verdict, so the check measures its own noise
(the spread of repeated decodes, before the probe and after it) and checks
its figures against each other: a noise above NOISE_LIMIT, a cost curve
that falls by more than its noise as positions grow, a break-even α below
1 or a speedup above what the curve allows ((k+1) tokens for one verify of
k+1 positions) is an error of measurement. Then every verdict reads "the
machine is too busy to tell", and none is kept. The check stops early
rather than measure on: as soon as the cost curve's noise is past the limit,
or once it has run for CHECK_SECONDS (a quiet 2-core CPU needs under two
minutes on the default pair).
"""

from __future__ import annotations

import sys
import time

from rich.console import Console

from specchat.bench import scorecard
from specchat.bench.measure import measure_cost_curve, step_noise
from specchat.bench.plan import Plan
from specchat.bench.runner import Bench, open_bench_session
from specchat.bench.scorecard import LOSS, WIN, CostCurve
from specchat.bench.suites import Suite, load_prompts, load_suite
from specchat.drafters import Name
from specchat.errors import SpecchatError
from specchat.session.options import LoadOptions
from specchat.textsafe import safe_json, safe_text

PROBE = ("code-edit", "summarize", "chat")  # the first prompt of each
KS = range(1, 9)
# The check's cost curve: up to the n-gram's verify (k 16), which the break-even
# table (k up to 8) and the allowance check need; auto's longer verifies are
# measured by the chat and `run` (costmodel) when auto first drafts.
CURVE_POSITIONS = 17
DRAFTERS = (Name.DRAFT, Name.NGRAM, Name.AUTO)
MAX_TOKENS = 64
NOISE_LIMIT = 0.10  # repeated decodes differing by more than ±10%: the machine is too busy for a verdict
TOO_BUSY = "the machine is too busy to tell"
CHECK_SECONDS = 420.0  # a check still probing after this stops: "too busy to tell"


def probe_suites(prompts: str | None) -> list[Suite]:
    """The probe: the user's prompts as one suite, or one prompt of each PROBE suite."""
    if prompts:
        return [load_prompts(prompts)]
    suites = [load_suite(name) for name in PROBE]
    return [Suite(s.name, s.prompts[:1], s.description) for s in suites]


def check_plan(suites: list[Suite], has_draft: bool, max_tokens: int, has_mtp: bool = False) -> Plan:
    """Bench's plan for the probe: off beside draft (where there is a draft
    model), mtp (where the target ships an MTP head), ngram and auto."""
    drafters: list[str] = [Name.DRAFT] * has_draft
    drafters += [Name.MTP] * has_mtp + [d for d in DRAFTERS if d != Name.DRAFT]
    return Plan(suites, drafters, [], max_tokens, extras=False, curve_positions=CURVE_POSITIONS)


def verdict(row: dict) -> str:
    """One drafter's verdict in words, from its overall row (scorecard.overall)."""
    median = row["speedup_median"]
    if median is None:
        return "not measured"
    if row["measured"] == WIN:
        return f"pays here ({row['best_suite_speedup']:.1f}× on {row['best_suite']}; median {median:.2f}×)"
    if row["measured"] == LOSS:
        return f"loses here ({median:.2f}×)" + ("" if row["drafter"] == Name.AUTO else ": auto will not use it")
    lo, hi = row["spread"]
    return f"break-even ({median:.2f}×; spread {lo:.2f}–{hi:.2f}×)"


def too_noisy(noise: float) -> str | None:
    return f"repeated decodes differ by ±{noise * 100:.0f}%" if noise > NOISE_LIMIT else None


def stop_rule(bench: Bench, started: float, seconds: float = CHECK_SECONDS):
    """Bench.stop for a check: stop once the cost curve is too noisy to
    trust, or once the check has run `seconds` (from `started`, a
    time.monotonic())."""

    def why() -> str | None:
        if bench.curve is not None and (noisy := too_noisy(bench.curve.noise)):
            return noisy
        if time.monotonic() - started > seconds:
            return f"the check ran past {seconds / 60:.0f} minutes and stopped"
        return None

    return why


def untrusted(curve: CostCurve, noise_after: float, table: list[dict], rows: list[dict]) -> str | None:
    """Why the check's figures cannot be trusted as a verdict, or None."""
    noise = max(curve.noise, noise_after)
    if noisy := too_noisy(noise):
        return noisy
    slack = 1 - 2 * noise - 0.02
    for (n0, t0), (n1, t1) in zip(zip(curve.positions, curve.seconds), zip(curve.positions[1:], curve.seconds[1:])):
        if t1 < t0 * slack:
            return f"the cost curve falls from {n0} to {n1} positions ({t0 * 1e3:.1f} → {t1 * 1e3:.1f} ms)"
    for t in table:
        low = min(v for key, v in t.items() if key != "k")
        if low < 1:
            return f"a break-even α of {low:.2f} at k={t['k']}, below 1"
    for row in rows:
        k, speedup = row.get("k"), row.get("speedup_median")
        if row["drafter"] == Name.AUTO or not k or speedup is None:
            continue
        most = (k + 1) / (curve.at(k + 1) / curve.step)  # every draft accepted, drafting free
        if speedup > most * (1 + 2 * noise + 0.1):
            return f"{row['drafter']} at {speedup:.2f}×, above the {most:.2f}× the cost curve allows at k={k}"
    return None


def figures(report: dict, step_of_draft: float | None, noise_after: float = 0.0) -> dict:
    """The check's JSON: the cost figures, break-even α by k, the best k, and
    per drafter its probe figures and verdict (TOO_BUSY where untrusted)."""
    curve = CostCurve.from_dict(report["cost_curve"])
    table = scorecard.break_even_by_k(curve, step_of_draft, KS)
    problem = report.get("stopped") or untrusted(curve, noise_after, table, report["overall"])
    drafters = {}
    for row in _rows(report):
        name = row["drafter"]
        needed = [t[name] for t in table] if name in (Name.DRAFT, Name.NGRAM) and row["pairs"] else None
        drafters[name] = {
            **row,
            "best_k": scorecard.best_k(row["per_position_acceptance"], needed) if needed else None,
            "verdict": f"{TOO_BUSY} ({problem})" if problem else verdict(row),
        }
    return {
        "schema": 1,
        "pair": report["pair"]["name"],
        "command": report["command"],
        "checked_at": report["started_at"],
        "max_tokens": report["settings"]["max_tokens"],
        "prompts": [{"suite": s, "id": p["id"]} for s, ps in report["suites"].items() for p in ps],
        "machine": {
            **{k: report["machine"][k] for k in ("cpu_model", "threads", "devices", "load_average")},
            "noise": {"before": curve.noise, "after": noise_after},
        },
        "untrusted": problem,
        "target_step_s": curve.step,
        "cost_curve": report["cost_curve"],
        "draft_step_s": step_of_draft,
        "draft_step_ratio": step_of_draft / curve.step if step_of_draft is not None else None,
        "break_even": table,
        "drafters": drafters,
        "runs": [_run(r) for r in report["runs"]],
        "interrupted": report["interrupted"],
    }


def _rows(report: dict) -> list[dict]:
    """The overall row of every drafter the probe planned; one it never ran
    (a check stopped early) has no figures."""
    rows = {row["drafter"]: row for row in report["overall"]}
    empty = dict.fromkeys(("k", "pairs", "alpha", "per_position_acceptance", "speedup_median", "speedup_range",
                           "spread", "measured", "best_suite", "best_suite_speedup"))  # fmt: skip
    planned = [d for d in report["settings"]["drafters"] if d != Name.OFF]
    return [rows.get(name) or {"drafter": name, **empty} for name in planned]


def _run(r: dict) -> dict:
    """A probe run, as much of it as the figures above come from."""
    keys = ("cycle", "slot", "suite", "prompt", "drafter", "k", "n_tokens", "identical")
    return {**{k: r[k] for k in keys}, "tok_s": r["stats"]["tok_s"], "alpha": r["stats"]["alpha"]}


def lines(result: dict) -> list[str]:
    """The check as text: the verdict table first, then what it rests on (the
    break-even α by k, the costs in plain steps). The raw timings are in --json."""
    m = result["machine"]
    out = [
        f"specchat models check · {result['pair']} · {m['cpu_model']}, {m['threads']} thread{'s' * (m['threads'] != 1)} · "
        f"{len(result['prompts'])} prompts of {result['max_tokens']} tokens",
        "",
        *verdict_table(result["drafters"]),
        "",
    ]
    for role, a in result.get("architecture", {}).items():
        if a is not None:
            out.append(f"{role} {a['name']} ({', '.join(a['kinds'])}): {a['speculation']}")
    curve = CostCurve.from_dict(result["cost_curve"])
    most = curve.positions[-1]
    out.append(
        f"a plain step takes {result['target_step_s'] * 1e3:.1f} ms; a verify of {most} positions "
        f"costs {curve.at(most) / curve.step:.2f} plain steps"
        + (f", a draft model step {result['draft_step_ratio']:.2f}" if result["draft_step_s"] is not None else "")
    )
    kinds = ["draft", "ngram"] if result["draft_step_s"] is not None else ["ngram"]
    out.append(
        "break-even α (tokens per verify) by k: " + "  ".join(f"{'k=' + str(t['k']):>5}" for t in result["break_even"])
    )
    for kind in kinds:
        out.append(f"  {kind:<37}" + "  ".join(f"{t[kind]:5.2f}" for t in result["break_even"]))
    if result["untrusted"]:
        out.append(f"no verdict: {TOO_BUSY} ({result['untrusted']}); none kept. Run it again on a quieter machine")
    if result["interrupted"]:
        out.append("interrupted: the probe's figures are partial")
    out.append("every timing: specchat models check --json")
    return out


VERDICT_HEADER = ("drafter", "k", "α", "speedup", "by prompt", "best k", "verdict")


def verdict_table(drafters: dict[str, dict]) -> list[str]:
    """One row per drafter: its k, α and speedup over off on the probe (median,
    and the range over prompts), the k that pays best, and the verdict."""
    rows = [VERDICT_HEADER]
    for name, d in drafters.items():
        best = "" if name == Name.AUTO else str(d["best_k"] or "none")
        if d["speedup_median"] is None:  # "not measured", or why the check stopped first
            rows.append((name, "", "", "", "", "", d["verdict"]))
            continue
        lo, hi = d["speedup_range"]
        figures = (str(d["k"]), f"{d['alpha']:.2f}", f"{d['speedup_median']:.2f}×", f"{lo:.2f}–{hi:.2f}×", best)
        rows.append((name, *figures, d["verdict"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(VERDICT_HEADER) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]


def check_pair(load: LoadOptions, *, prompts: str | None = None, max_tokens: int = MAX_TOKENS) -> dict:
    """Measure one pair (by name, or by its files) and return the check's
    figures; a named pair's verdict is kept. Progress goes to stderr."""
    from specchat.session.loader import pair_files, ships_mtp

    started = time.monotonic()
    suites = probe_suites(prompts)  # a bad --prompts is one line before anything loads
    label, t_path, d_path = pair_files(load.pair, load.target, load.draft)
    has_mtp = ships_mtp(t_path)
    if d_path == t_path and has_mtp:
        d_path = None  # it drafts with its head, not with a copy of itself (as the chat does)
    plan = check_plan(suites, d_path is not None, max_tokens, has_mtp)
    status = Console(stderr=True, highlight=False)
    with status.status(f"loading {label}"):
        session, pair_info = open_bench_session(plan, load)
    try:
        bench = Bench(session, plan, console=status)
        bench.stop = stop_rule(bench, started)
        step = None
        if d_path is not None:
            with status.status("timing the draft model's step"):
                # The session's own draft model, timed as bench times the target: the probe's draft runs reuse it.
                step = measure_cost_curve(session.drafters.draft_model().model, bench.real_text(), 1).step
        bench.run()
        report = bench.report(pair_info, command="specchat " + " ".join(sys.argv[1:]))
        after = 0.0
        if bench.stopped is None:  # a check stopped early is no verdict whatever the noise now
            with status.status("measuring the machine's noise again"):
                after = step_noise(session.target, bench.real_text())
    finally:
        session.close()
    if report["cost_curve"] is None:
        raise SpecchatError("stopped before the cost curve was measured", hint="run the check again", code=130)
    result = figures(report, step, after)
    result["architecture"] = {"target": _kinds(t_path), "draft": _kinds(d_path) if d_path else None}
    if load.target is None and not result["interrupted"] and not result["untrusted"]:
        _keep(label, result, status)
    return result


def _kinds(path) -> dict | None:
    """The file's architecture and what its kinds mean for speculation (compat.read_architecture_kinds)."""
    from specchat.store.compat import read_architecture_kinds

    a = read_architecture_kinds(path)
    return None if a is None else {"name": a.name, "kinds": list(a.kinds), "speculation": a.speculation()}


def run_check(load: LoadOptions, *, json_out: bool = False, **how) -> int:
    """`specchat models check`; returns the exit code (130 when stopped with Ctrl-C)."""
    result = check_pair(load, **how)
    if json_out:
        print(safe_json(result, indent=2))
    else:
        for line in lines(result):
            print(safe_text(line))
    return 130 if result["interrupted"] else 0


def _keep(label: str, result: dict, status: Console) -> None:
    """Keep the verdict for `specchat models` and the chat; a read-only data dir only warns."""
    from specchat.store import verdicts

    try:
        verdicts.save(label, result["checked_at"], {n: d["verdict"] for n, d in result["drafters"].items()})
    except OSError as err:
        status.print(safe_text(f"warning: cannot keep the verdict ({err.strerror or err})"), style="yellow")
