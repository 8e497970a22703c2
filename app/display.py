"""How a turn is shown: its rounds as coloured spans, its stats line (a
local turn's or a server reply's, each formatting its own stats), a figure's
format, and where a model runs. The same text for `run`, the chat and the
history; the colours themselves are the themes'."""

from __future__ import annotations

import re
from typing import Protocol

from specchat.decoding.stats import Round
from specchat.textsafe import safe_text


class Shown(Protocol):
    """What a round shows: a local stats.Round, or a server's counts.Chunk,
    which reads like one (mode, drafter, the texts by kind)."""

    @property
    def mode(self) -> str: ...
    @property
    def drafter(self) -> str: ...
    @property
    def forced_text(self) -> str: ...
    @property
    def accepted_text(self) -> str: ...
    @property
    def rejected_text(self) -> str: ...
    @property
    def target_text(self) -> str: ...


def round_spans(r: Shown) -> list[dict]:
    """One round as coloured spans: accepted drafts, rejected drafts, then the
    target's token. In hybrid mode the source reads hybrid:ngram / hybrid:draft."""
    source = f"hybrid:{r.drafter}" if r.mode == "hybrid" else r.drafter
    forced = "hybrid:grammar" if r.mode == "hybrid" else "grammar"
    parts = (
        (r.forced_text, "accepted", forced),
        (r.accepted_text, "accepted", source),
        (r.rejected_text, "rejected", source),
        (r.target_text, "target", "target"),
    )
    return [{"text": text, "kind": kind, "drafter": who} for text, kind, who in parts if text]


REJECTED_LINE_END = "⏎"  # a line end inside a rejected draft, as shown


def shown_text(span: dict) -> str:
    """A span's text as the screen shows it: safe (textsafe.safe_text), and a
    rejected draft keeps to its line (its line ends show as ⏎ inside the
    strike-through), so a struck draft never pushes the reply's next text
    onto a line of its own."""
    text = safe_text(span["text"])
    return text.replace("\n", REJECTED_LINE_END) if span["kind"] == "rejected" else text


def merge_spans(spans: list[dict], new: list[dict]) -> None:
    """Append `new` to `spans`, joining neighbours of the same kind and source."""
    for s in new:
        last = spans[-1] if spans else None
        if last and last["kind"] == s["kind"] and last["drafter"] == s["drafter"]:
            last["text"] += s["text"]
        else:
            spans.append(dict(s))


def spans(rounds: list[Round]) -> list[dict]:
    """The reply as coloured spans: accepted | rejected | target, with who drafted."""
    out: list[dict] = []
    for r in rounds:
        merge_spans(out, round_spans(r))
    return out


def number(value: float | None, fmt: str = ".2f", unit: str = "", missing: str = "–") -> str:
    """A figure for display; `missing` where it was not measured."""
    return missing if value is None else f"{value:{fmt}}{unit}"


NOT_MEASURED = "not measured"


def measured_alpha(stats: dict) -> float | None:
    """A reply's α where it was measured (a stored reply's too): a local turn
    that drafted; a server's reply whose counters saw every verify round."""
    if stats.get("source") == "server":
        measured = stats.get("counters") and stats.get("alpha_exact") and stats.get("verify_rounds")
    else:
        measured = stats.get("drafted")
    return _figure(stats.get("alpha")) if measured else None


def measured_acceptance(stats: dict) -> float | None:
    """The share of drafts accepted, where something was drafted and counted."""
    counted = stats.get("counters") if stats.get("source") == "server" else True
    return _figure(stats.get("acceptance_rate")) if counted and stats.get("drafted") else None


def stats_fields(stats: dict) -> list[tuple[str, str]]:
    """The stats line of a reply as (field, text) pairs, for `run`, the chat
    and anything else that shows one (the history's stored replies too).
    Each source of stats formats its own: `stats["source"]` names it
    (TurnStats and ServerStats both carry one), a local turn where absent."""
    return LINES.get(stats.get("source", "local"), local_fields)(stats)


def local_fields(stats: dict) -> list[tuple[str, str]]:
    """The line of a turn decoded here (TurnStats.to_dict(), with "drafters":
    the drafters that ran the reply). Drafting off shows its tok/s; otherwise
    α, acceptance, the turn's tok/s, an off run of the same turn built from
    its measured plain steps, and the speedup of the one over the other. A
    turn that drafted nothing ran plain steps only: its "speedup" would be
    the machine's noise, so none is shown."""
    tok_s = stats.get("tok_s", 0.0)
    if stats.get("drafted", 0) == 0:
        said = "drafter off" if set(stats.get("drafters") or ["off"]) <= {"off"} else "no drafts this turn"
        return [("tok_s", f"{tok_s:.1f} tok/s"), ("drafter", said)]
    baseline = stats.get("baseline_tok_s")
    return [
        ("alpha", f"α {stats.get('alpha', 0.0):.2f}"),
        ("accepted", f"{stats.get('acceptance_rate', 0.0) * 100:.0f}% accepted"),
        ("tok_s", f"{tok_s:.1f} tok/s"),
        ("baseline", f"off {baseline:.1f} tok/s (measured)" if baseline else "off not measured (reply too short)"),
        ("speedup", speedup_text(stats)),
    ]


WIDE = 0.05  # a speedup whose interval reaches further than this either side shows the interval


def speedup_text(stats: dict) -> str:
    """The speedup, with its interval where the baseline's samples leave it
    uncertain by more than WIDE: "1.65× (1.52–1.78×)", never a confident figure they do not support."""
    speedup, low, high = (_figure(stats.get(k)) for k in ("speedup", "speedup_low", "speedup_high"))
    text = number(speedup, ".2f", "×")
    if speedup and low is not None and high is not None and max(speedup - low, high - speedup) > WIDE * speedup:
        text += f" ({low:.2f}–{high:.2f}×)"
    return text


SERVER_TOTALS = "server totals"  # provenance of a server reply's accepted spans: its running counters
NO_SPECULATION_DATA = "no speculation data from this server"


def server_fields(stats: dict) -> list[tuple[str, str]]:
    """The stats line of a reply from a llama.cpp server (server.ServerTurn.stats_dict):
    the server's own counters and clock, never zeros for counters it did not
    send, α only where every verify round was seen, a speedup only from a
    measured --baseline, and never a figure that cannot be true (a stored
    reply's stats are shown through here too)."""
    if not stats.get("timings_sent"):
        return [("speculation", NO_SPECULATION_DATA), ("timings", "the server sends no timings")]
    parts = []
    if not stats.get("counters"):
        parts.append(("speculation", NO_SPECULATION_DATA))
    else:
        parts += _server_counts(stats)
    tok_s, baseline, speedup = (_figure(stats.get(k)) for k in ("tok_s", "baseline_tok_s", "speedup"))
    parts.append(("tok_s", f"{number(tok_s, '.1f')} tok/s (server clock)"))
    if stats.get("baseline_tok_s"):
        # A baseline that reads as 0.0 tok/s, or a speedup that is not tok/s over it, cannot be true.
        given = stats.get("speedup") is not None
        fits = not given or bool(tok_s and speedup and baseline and abs(speedup - tok_s / baseline) <= 0.01 * speedup)
        if not (baseline and baseline >= 0.05 and fits):
            parts.append(("baseline", "the baseline's figures are inconsistent, not shown"))
        else:
            parts.append(("baseline", f"off {baseline:.1f} tok/s (--baseline, measured)"))
            parts.append(("speedup", number(speedup, ".2f", "×")))
    elif stats.get("baseline_error"):
        parts.append(("baseline", f"no baseline: {stats['baseline_error']}"))
    return parts


def _figure(value: object) -> float | None:
    """A figure that can be shown: a finite number ≥ 0."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf"):
        return float(value)
    return None


def _count(value: object) -> int | None:
    """A counter as a whole number (a bool is not one)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _server_counts(stats: dict) -> list[tuple[str, str]]:
    """α and the accepted drafts, where they can be true: 0 ≤ accepted ≤ drafted,
    and α between 1 and 1 + drafted per verify round."""
    accepted, drafted, rounds = (_count(stats.get(k)) for k in ("accepted", "drafted", "verify_rounds"))
    if accepted is None or drafted is None or rounds is None or not 0 <= accepted <= drafted or rounds < 0:
        return [("speculation", "the server's counters are inconsistent, not shown")]
    parts = []
    alpha = _figure(stats.get("alpha"))
    if stats.get("alpha_exact") and rounds and alpha and 1 <= alpha <= 1 + drafted / rounds:
        parts.append(("alpha", f"α {alpha:.2f}"))
    rate = accepted / drafted if drafted else 0.0
    parts.append(("accepted", f"{accepted}/{drafted} drafts accepted ({rate * 100:.0f}%, {SERVER_TOTALS})"))
    return parts


LINES = {"local": local_fields, "server": server_fields}  # a stats source → its line


RPC_DEVICE = re.compile(r"RPC\d+")  # llama.cpp's name for a device behind an RPC worker; its description: host:port


def device_text(device: dict | None) -> str:
    """Where a model runs, from llamacpp.placement: "CUDA · NVIDIA H200 · 29/29 layers offloaded",
    and "· argmax in llama.cpp's graph" where greedy picks are made there (llama.Model.argmax_only),
    and why where llama.cpp's extra CPU buffer types are off (llamacpp.kernels);
    on a server, the devices it reports (server_device_text)."""
    if not device:
        return "not loaded"
    if "server" in device:
        return server_device_text(device.get("devices"))
    graph = " · argmax in llama.cpp's graph" if device.get("argmax") == "graph" else ""
    kernels = "" if device.get("extra_bufts", True) else f" · extra CPU buffer types {device.get('extra_bufts_why')}"
    return (
        f"{device['backend']} · {device['device']} · {device['gpu_layers']}/{device['layers']} layers offloaded"
        f"{graph}{kernels}"
    )


def server_device_text(devices: list[dict] | None) -> str:
    """A server's devices as it reports them: "RPC worker 10.0.0.2:50052 · CUDA0 (NVIDIA H200)"."""
    if not devices:
        return "the server does not report its devices"
    return " · ".join(_one_device(d.get("name") or "?", d.get("description") or "") for d in devices)


def _one_device(name: str, description: str) -> str:
    if RPC_DEVICE.fullmatch(name) and description:
        return f"RPC worker {description}"
    return f"{name} ({description})" if description else name


def measuring_line(state, width: int = 12) -> str:
    """A measurement of the cost curve (costmodel.Measuring) in one line: a
    bar, the sizes timed and an estimate of the time left."""
    filled = width * state.done // state.total if state.total else width
    left = "" if state.seconds_left is None else f", about {max(1, round(state.seconds_left))} s left"
    return (
        f"measuring auto's cost curve {'█' * filled}{'░' * (width - filled)} {state.done} of {state.total} sizes{left}"
    )
