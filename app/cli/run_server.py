"""`specchat run --server URL`: one reply from a llama.cpp server, streamed
with the colours its counters allow, then one stats line (where each goes,
on a terminal or off one, is run.Output's rule); or, with --json, one object
with every figure and the server's own timings verbatim.

A stream cut mid-reply prints what arrived, then the error, and exits 1.

With a history (the default; --no-history runs without one) the turn is
recorded as a conversation of its own, as `run` records a local one; a reply
cut short is kept too, as the chat keeps it. A turn that failed is not."""

from __future__ import annotations

from specchat.cli.run import Output, lost_error, save_turn, write_stdout
from specchat.display import stats_fields
from specchat.errors import SpecchatError
from specchat.history.database import History, Message
from specchat.server.session import ServerSession, ServerTurn
from specchat.textsafe import safe_json


def as_json(session: ServerSession, turn: ServerTurn) -> dict:
    return {
        "text": turn.text,
        "spans": turn.spans(),
        "stats": turn.stats.to_dict(),
        "finish": turn.finish,
        "error": turn.error or None,
        "server": session.info.to_dict(),
        "timings": turn.timings,  # the server's final timings, as it sent them
        "baseline": turn.baseline,
        "drafter": session.drafter_name,
        "request": {k: v for k, v in turn.body.items() if k != "messages"},
    }


def record(history: History, session: ServerSession, prompt: str, turn: ServerTurn) -> None:
    """The turn as a conversation in the history, with its stats and spans as the chat keeps a server's."""
    stats = {**turn.stats.to_dict(), "drafters": [session.drafter_name]}
    history.record(session.pair, prompt, Message("assistant", turn.text, turn.finish, stats, turn.spans()))


def run_on_server(
    session: ServerSession, prompt: str, *, json_out: bool, baseline: bool = False, history: History | None = None
) -> int:
    out = None if json_out else Output()
    # A Chunk reads as a Round. With --baseline, the turn is decoded again with speculation off.
    turn = session.reply(prompt, on_round=out.round if out else None)
    kept = save_turn(history, lambda h: record(h, session, prompt, turn))
    if out is None:
        if lost := write_stdout(safe_json(as_json(session, turn)) + "\n"):
            raise lost_error(lost, kept)
    else:
        out.kept = kept
        out.reply(turn.text)
        line = " · ".join(text for _, text in stats_fields(turn.stats.to_dict()))
        out.note(f"{session.info.model} on {session.info.url} · {line}")
    if turn.finish == "cut":
        raise SpecchatError(
            f"{turn.error}; the partial reply ({len(turn.text)} characters) is kept",
            hint="check the server's log; it may have crashed or been stopped",
        )
    if baseline and turn.stats.baseline_error:
        raise SpecchatError(
            f"--baseline: {turn.stats.baseline_error}", hint="the reply above stands; no speedup is shown"
        )
    return 0
