"""`specchat run --server URL`: one reply from a llama.cpp server, streamed
with the colours its counters allow, then one stats line; or, with --json,
one object with every figure and the server's own timings verbatim.

A stream cut mid-reply prints what arrived, then the error, and exits 1."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from specchat.errors import SpecchatError
from specchat.run import round_text
from specchat.server_session import ServerSession, ServerTurn
from specchat.stats import stats_fields
from specchat.textsafe import safe_json, safe_text


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
    console = Console(highlight=False, soft_wrap=True)
    on_chunk = None if json_out else (lambda c: console.print(round_text(c), end=""))  # a Chunk reads as a Round
    turn = session.reply(prompt, on_round=on_chunk)  # with --baseline, decoded again with speculation off
    if json_out:
        sys.stdout.write(safe_json(as_json(session, turn)) + "\n")
    else:
        console.print()
        line = " · ".join(text for _, text in stats_fields(turn.stats.to_dict()))
        console.print(Text(safe_text(f"{session.info.model} on {session.info.url} · {line}"), style="dim"))
    if turn.finish == "cut":
        raise SpecchatError(f"{turn.error}; the partial reply ({len(turn.text)} characters) is kept",
                            hint="check the server's log; it may have crashed or been stopped")
    if baseline and turn.stats.baseline_error:
        raise SpecchatError(f"--baseline: {turn.stats.baseline_error}", hint="the reply above stands; no speedup is shown")
    return 0
