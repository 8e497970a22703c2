"""`specchat run --server URL`: one reply from a llama.cpp server, streamed
with the colours its counters allow, then one stats line (where each goes,
on a terminal or off one, is run.Output's rule); or, with --json, one object
with every figure and the server's own timings verbatim.

A stream cut mid-reply prints what arrived, then the error, and exits 1."""

from __future__ import annotations

import sys

from specchat.display import stats_fields
from specchat.errors import SpecchatError
from specchat.run import Output
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


def run_on_server(session: ServerSession, prompt: str, *, json_out: bool, baseline: bool = False) -> int:
    out = None if json_out else Output()
    # A Chunk reads as a Round. With --baseline, the turn is decoded again with speculation off.
    turn = session.reply(prompt, on_round=out.round if out else None)
    if out is None:
        sys.stdout.write(safe_json(as_json(session, turn)) + "\n")
    else:
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
