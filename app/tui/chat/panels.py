"""The chat's status bar (the controller's Status) and the stats panel (F2):
every figure of the turns so far, and where each model runs."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from specchat.decoding.costmodel import Measuring
from specchat.display import NOT_MEASURED, device_text, measured_alpha, measuring_line, number
from specchat.textsafe import safe_text
from specchat.tui.state.controller import Status

# How soon a part of the status bar gives way where the terminal is narrow: the
# highest first. Pair, drafter, k and ctx always stay (an 80-column terminal
# holds them whole); a note is cut to fit before it goes.
SEP = " · "
KEEP, NOTE = 0, 4
GIVES_WAY = {"temp": 6, "branch": 5, "attached": 5, "constraint": 5, "note": NOTE, "choice": 3, "speed": 2}


class StatusBar(Static):
    status: reactive[Status] = reactive(Status, always_update=True)

    def render(self) -> Content:
        s = self.status
        if not s.pair:
            return Content(safe_text(s.note or "no model loaded"))
        parts: list[tuple[str, Content]] = [
            ("pair", Content.styled(safe_text(s.pair), "bold")),
            *([("branch", Content.styled(s.branch, "bold $secondary"))] if s.branch else []),
            ("drafter", Content.assemble("drafter ", (s.drafter, "bold $accent"))),
            *([("choice", Content.styled(f"→ {s.choice}", "$accent"))] if s.choice else []),
            ("k", Content(f"k {s.k}" if s.k else "k set by the server")),  # a server that takes no k per request
            *(
                [("constraint", Content.styled(safe_text(f"⟨{s.constraint}⟩"), "bold $spec-grammar"))]
                if s.constraint
                else []
            ),
            *([("attached", Content.styled(safe_text(f"+ {s.attached}"), "bold $accent"))] if s.attached else []),
            ("temp", Content(f"temp {s.temp:g}" + (" · system prompt" if s.system else ""))),
            ("ctx", Content(f"ctx {s.used}/{s.n_ctx}")),
        ]
        if s.reading is not None:
            parts.append(
                ("speed", Content.styled(f"reading the prompt: {s.reading[0]:,} of {s.reading[1]:,} tokens", "bold"))
            )
        elif s.live_tok_s is not None:
            parts.append(("speed", Content.styled(f"{s.live_tok_s:.1f} tok/s", "bold")))
        if s.note:
            parts.append(("note", Content.styled(safe_text(s.note), "italic")))
        return fitted(parts, self.size.width)


def joined(parts: list[tuple[str, Content]]) -> Content:
    """The parts with SEP between them; auto's choice follows its drafter after a space."""
    pieces: list[Content] = []
    for name, content in parts:
        if pieces:
            pieces.append(Content(" " if name == "choice" else SEP))
        pieces.append(content)
    return Content.assemble(*pieces)


def fitted(parts: list[tuple[str, Content]], width: int) -> Content:
    """The parts joined, those that give way first (GIVES_WAY) dropped until
    the rest fit `width` (0: any); a note is cut short with "…" before it
    goes, where 12 cells of it fit."""
    parts = list(parts)
    while width and joined(parts).cell_length > width:
        rank = max(GIVES_WAY.get(name, KEEP) for name, _ in parts)
        if rank == KEEP:
            break
        i = max(i for i, (name, _) in enumerate(parts) if GIVES_WAY.get(name, KEEP) == rank)
        name, content = parts[i]
        room = width - joined(parts[:i] + parts[i + 1 :]).cell_length - len(SEP)
        if rank == NOTE and room >= 12 and content.cell_length > room:
            parts[i] = (name, Content.assemble(content.truncate(room - 1), "…"))
            continue
        del parts[i]
    return joined(parts)


MEASURING_NOTE = " (a message stops it)"  # after the bar, while auto's cost curve is measured between replies


def measuring_note(note: str, state: Measuring) -> str | None:
    """The status bar's note for a measurement of the cost curve, or None to
    leave the note as it is: a note set meanwhile (a draft model loading) stays."""
    ours = note.endswith(MEASURING_NOTE)
    if state.ended:
        return "" if ours else None
    return measuring_line(state) + MEASURING_NOTE if ours or not note else None


# --- stats panel ------------------------------------------------------------------


def bar(share: float, width: int = 20) -> str:
    full = round(max(0.0, min(1.0, share)) * width)
    return "█" * full + "·" * (width - full)


CHART_REPLIES = 8  # the charts show the last this many replies
CHART_WIDTH = 30  # columns of the longest bar


class StatsPanel(VerticalScroll):
    """Per-turn α and speedup, per-position acceptance, totals, time split.
    It scrolls: tab reaches it, and ↑ ↓ end bring the totals below the fold."""

    def compose(self):
        yield Static("Stats", classes="panel-title")
        yield Static("α per reply (tokens per verify)", classes="panel-label")
        yield Static("", id="alpha-chart")
        yield Static("speedup per reply (│ is plain decoding, 1.00×)", classes="panel-label")
        yield Static("", id="speedup-chart")
        yield Static("", id="panel-numbers")

    def show(self, turns: list[dict], devices: dict | None = None) -> None:
        self.query_one("#alpha-chart", Static).update(alpha_chart(turns))
        self.query_one("#speedup-chart", Static).update(speedup_chart(turns))
        self.query_one("#panel-numbers", Static).update(panel_text(turns, devices or {}))


def last_replies(turns: list[dict]) -> list[tuple[int, dict]]:
    """The last CHART_REPLIES replies, each with its number in the conversation."""
    return list(enumerate(turns, 1))[-CHART_REPLIES:]


def unmeasured(n: int, stats: dict) -> Content:
    """A reply's row where its figure is missing: it drafted nothing (or a server did not say)."""
    why = NOT_MEASURED if stats.get("source") == "server" else "no drafts"
    return Content.assemble(f"#{n:<3}", (f"     {why}", "$text-muted"))


def alpha_chart(turns: list[dict]) -> Content:
    """One row a reply: its number, its α and a bar on a scale up to the highest α shown."""
    rows = [(n, t, measured_alpha(t)) for n, t in last_replies(turns)]
    if not rows:
        return Content.styled("no replies yet", "$text-muted")
    top = max([a for _, _, a in rows if a is not None] + [1.0])
    return Content("\n").join(
        unmeasured(n, t) if a is None
        else Content.assemble(f"#{n:<3}{a:6.2f} ", ("█" * round(a / top * CHART_WIDTH), "$spec-accepted"))
        for n, t, a in rows
    )  # fmt: skip


def speedup_chart(turns: list[dict]) -> Content:
    """One row a reply: its number, its speedup and a bar on a scale up to
    at least 2×, crossed by │ where plain decoding's 1.00× is. A reply with
    no speedup (it drafted nothing) says so, never a bar of 0×."""
    rows = last_replies(turns)
    if not rows:
        return Content.styled("no replies yet", "$text-muted")
    top = max([t.get("speedup") or 0.0 for _, t in rows] + [2.0])
    one = round(CHART_WIDTH / top)  # the column of 1.00×
    lines = []
    for n, t in rows:
        speedup = t.get("speedup")
        if not speedup:
            lines.append(unmeasured(n, t))
            continue
        bar = "█" * round(speedup / top * CHART_WIDTH)
        left, right = (bar[:one], bar[one + 1 :]) if len(bar) > one else (bar.ljust(one), "")
        colour = "$spec-good" if speedup > 1 else "$spec-bad" if speedup < 1 else "$text"
        lines.append(Content.assemble(f"#{n:<3}{speedup:5.2f}× ", (left, colour), ("│", "bold $text"), (right, colour)))
    return Content("\n").join(lines)


def devices_content(devices: dict) -> list[Content]:
    """Where the target, the draft model and an MTP head run: backend, device, layers offloaded;
    on a server, the target's line only (what the server reports of its devices)."""
    on_server = "server" in (devices.get("target") or {})
    roles = ("target",) if on_server else ("target", "draft", *(["mtp"] if "mtp" in devices else []))
    return [Content(f"{role:>6}: {safe_text(device_text(devices.get(role)))}") for role in roles]


def memory_line(stats: dict) -> str:
    """What the memory holds and what it gave the last reply."""
    return (
        f"memory: {stats.get('memory_held', 0):,} tokens held · "
        f"{stats.get('memory_accepted', 0)} of the last reply's tokens drafted from it"
    )


def panel_text(turns: list[dict], devices: dict | None = None) -> Content:
    where = devices_content(devices) + [Content("")] if devices and devices.get("target") else []
    if not turns:
        return Content("\n").join(where + [Content("no replies yet")])
    last = turns[-1]
    lines = where + [
        Content(f"last α {number(measured_alpha(last))} · speedup {number(last.get('speedup'), '.2f', '×')}"),
        Content(""),
        Content("acceptance by draft position (last reply)"),
    ]
    for i, share in enumerate(last.get("per_position_acceptance") or []):
        lines.append(Content.assemble(f"{i + 1:>3} ", (bar(share), "$spec-accepted"), f" {share * 100:3.0f}%"))
    if last.get("memory_held") is not None:
        lines += [Content(""), Content(memory_line(last))]
    drafted = sum(t.get("drafted", 0) for t in turns)
    accepted = sum(t.get("accepted", 0) for t in turns)
    rate = accepted / drafted * 100 if drafted else 0.0
    lines += [
        Content(""),
        Content(f"totals: {drafted} drafted · {accepted} accepted ({rate:.0f}%)"),
        Content(f"        {sum(t.get('tokens', 0) for t in turns)} tokens in {len(turns)} replies"),
        Content(""),
        Content("time split (all replies)"),
    ]
    split = {k: sum(t.get(f"t_{k}", 0.0) for t in turns) for k in ("draft", "verify", "plain", "other")}
    total = sum(split.values())
    colours = {"draft": "$spec-model", "verify": "$primary", "plain": "$text-muted", "other": "$warning"}
    if not total:  # a server's replies: it reports its whole decode time only
        lines.append(Content("        not reported by the server"))
    else:
        for name, secs in split.items():
            share = secs / total
            lines.append(
                Content.assemble(f"{name:>7} ", (bar(share), colours[name]), f" {share * 100:3.0f}% {secs:.2f}s")
            )
    timed = [t for t in turns if t.get("t_llama") is not None and t.get("t_decode")]
    if timed:  # time inside llama.cpp; what is left is specchat's (Python, drafting, bookkeeping)
        inside = sum(t["t_llama"] for t in timed) / sum(t["t_decode"] for t in timed)
        lines.append(Content(f"inside llama.cpp {inside * 100:.1f}% · specchat {(1 - inside) * 100:.1f}%"))
    return Content("\n").join(lines)


# --- prompt input -----------------------------------------------------------------
