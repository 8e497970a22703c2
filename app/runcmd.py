"""`specchat run`: one reply, streamed with its speculation colours, then
one stats line; or, with --json, one object with every figure.

The model's text reaches the terminal through `safe_text` (or `safe_json`):
a token that holds ESC shows as ␛, it never drives the terminal."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from specchat.chat import ChatSession
from specchat.engine import Turn
from specchat.stats import Round, TurnStats, first_difference, spans
from specchat.textsafe import safe_json, safe_text

# Styles for a plain terminal; the TUI takes its colours from the theme.
STYLES = {
    "accepted": "green",
    "accepted-draft": "cyan",
    "rejected": "strike red",
    "target": "",
}


def round_text(r: Round) -> Text:
    """One round as styled text: accepted drafts, rejected drafts, then the target's token."""
    accepted = "accepted-draft" if r.drafter in ("draft",) else "accepted"
    out = Text()
    out.append(safe_text(r.accepted_text), STYLES[accepted])
    out.append(safe_text(r.rejected_text), STYLES["rejected"])
    out.append(safe_text(r.target_text), STYLES["target"])
    return out


def stats_line(s: TurnStats, drafter: str, choices: dict[str, int] | None = None) -> str:
    if drafter == "off" or s.verify_rounds == 0 and s.speedup is None:
        return f"{s.tok_s:.1f} tok/s · {s.tokens} tokens · drafter off"
    parts = [
        f"α {s.alpha:.2f}",
        f"accepted {s.acceptance_rate:.0%}",
        f"{s.spec_tok_s:.1f} tok/s",
    ]
    if s.baseline_tok_s:
        parts.append(f"off {s.baseline_tok_s:.1f} tok/s (measured)")
        parts.append(f"{s.speedup:.2f}×")
    else:
        parts.append("off: not measured (turn too short)")
    if choices:
        parts.append("auto chose " + ", ".join(f"{k}×{n}" for k, n in sorted(choices.items())))
    if s.identical is not None:
        parts.append(
            "identical to off" if s.identical else f"differs from off at token {s.first_divergence}"
        )
    return " · ".join(parts)


def check_identical(session: ChatSession, turn: Turn) -> None:
    """Decode the same prompt plainly and compare (greedy only)."""
    if not session.engine.sampling.greedy:
        return
    first = first_difference(turn.tokens, session.plain_reference(turn))
    turn.stats.identical = first is None
    turn.stats.first_divergence = first


def auto_choices(session: ChatSession) -> dict[str, int] | None:
    """How often auto picked each option this turn (None for other drafters)."""
    return getattr(session.engine.drafter, "chosen", None)


def as_json(session: ChatSession, turn: Turn) -> dict:
    return {
        "auto_choices": auto_choices(session),
        "text": turn.text,
        "tokens": turn.tokens,
        "spans": spans(turn.rounds),
        "stats": turn.stats.to_dict(),
        "finish": turn.finish,
        "pair": session.pair,
        "drafter": session.drafter_name,
        "k": session.k,
        "threads": getattr(session.target, "n_threads", None),
        "n_ctx": session.n_ctx,
        "devices": session.devices,  # backend, device, layers offloaded; draft None if never loaded
        "constraint": constraint_report(session, turn),
    }


def constraint_report(session: ChatSession, turn: Turn) -> dict | None:
    """The constraint the reply was decoded under and whether it matches it
    (None: free text). A reply cut short by --max-tokens is not checked."""
    if not session.constraint_label:
        return None
    done = turn.finish == "eos"
    error = session.constraint.check(turn.text) if done else None
    return {"label": session.constraint_label, "checked": done, "valid": done and error is None, "error": error}


def constraint_line(report: dict) -> str:
    if not report["checked"]:
        return f"{report['label']} · not checked: the reply did not finish"
    return f"{report['label']} · " + ("the reply matches it" if report["valid"] else f"the reply does not match: {report['error']}")


def run_once(session: ChatSession, prompt: str, *, json_out: bool, identical: bool) -> int:
    console = Console(highlight=False, soft_wrap=True)
    live = not json_out
    on_round = (lambda r: console.print(round_text(r), end="")) if live else None
    turn = session.reply(prompt, on_round=on_round)
    if identical:
        check_identical(session, turn)
    if json_out:
        sys.stdout.write(safe_json(as_json(session, turn)) + "\n")
        return 0
    console.print()
    console.print(Text(stats_line(turn.stats, session.drafter_name, auto_choices(session)), style="dim"))
    report = constraint_report(session, turn)
    if report is not None:
        console.print(Text(safe_text(constraint_line(report)), style="dim" if report["valid"] else "yellow"))
    if turn.finish == "context":
        console.print(Text("stopped: the context is full", style="yellow"))
    return 0
