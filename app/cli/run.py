"""`specchat run`: one reply, streamed with its speculation colours, then
one stats line; or, with --json, one object with every figure.

Where the output goes is `Output`'s rule, for `run --server` too: on a
terminal, the coloured rounds (rejected drafts struck through) and the stats
on stdout; piped or redirected, stdout carries exactly the reply, as
--json's "text" has it, and one line end, and the stats go to stderr.

On a terminal the model's text goes through `safe_text`: a token that holds
ESC shows as ␛, it never drives the terminal. Off one it is data, exact.

With a history (the default; --no-history runs without one) the turn
drafts from the memory of every stored reply and is then recorded as a
conversation of its own, as the chat records its turns.

Stdout that takes no more (a full disk, /dev/full, a closed stream, a
pipe whose reader left) costs the output alone: the turn still runs to
its end and is recorded, then one error line says what happened. A prompt
on stdin holds at most STDIN_MAX_BYTES (`stdin_prompt`).

Nothing is measured before the reply: where auto's cost curve is not
measured yet, auto prices by its prior, and the run measures what is
missing for a few seconds once the reply is out (`measure_after`)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.text import Text

from specchat.decoding.costmodel import Measuring
from specchat.decoding.stats import Round, TurnStats, first_difference
from specchat.display import measuring_line, round_spans, shown_text, spans, stats_fields
from specchat.engine.loop import Turn
from specchat.errors import SpecchatError
from specchat.history.database import History, Message
from specchat.session.chat import ChatSession
from specchat.textsafe import safe_json, safe_text
from specchat.themes import SPEC_DEFAULTS, span_style


def round_text(r: Round) -> Text:
    """One round as styled text, in the dark theme's colours: accepted drafts,
    rejected drafts, then the target's token."""
    out = Text()
    for s in round_spans(r):
        out.append(shown_text(s), span_style(s["kind"], s["drafter"], SPEC_DEFAULTS.get))
    return out


# The most a prompt on stdin may hold: far more than any context takes
# (8,192 tokens are some 32 KB of text), and /dev/zero or a runaway pipe is
# refused at this point instead of read until memory runs out.
STDIN_MAX_BYTES = 4 * 1024 * 1024


def stdin_prompt() -> str:
    """The prompt piped in (`specchat run -`), STDIN_MAX_BYTES at most,
    decoded as Python reads argv: a stray byte is named by checks.prompt,
    not lost. A final line end, which echo and editors add, is not part of it."""
    stream = sys.stdin.buffer if sys.stdin is not None else None
    data = stream.read(STDIN_MAX_BYTES + 1) if stream is not None else b""
    if len(data) > STDIN_MAX_BYTES:
        raise SpecchatError(
            f"the prompt on stdin is over {STDIN_MAX_BYTES // 2**20} MiB",
            hint="pipe in a shorter prompt, e.g. head -c 100000 FILE | specchat run",
            code=2,
        )
    text = data.decode("utf-8", "surrogateescape")
    return text.removesuffix("\n").removesuffix("\r") if text.endswith("\n") else text


def write_stdout(text: str) -> str:
    """Write `text` to stdout in UTF-8 whatever the locale, flushed so a pipe
    sees it at once; "" once it went, else why it could not. After a failure
    stdout goes to /dev/null, so Python's own flush at exit does not fail again."""
    if sys.stdout is None:  # started with stdout closed
        return "it is closed"
    try:
        raw = getattr(sys.stdout, "buffer", None)  # a test's StringIO has none
        if raw is not None:
            sys.stdout.flush()
            raw.write(text.encode("utf-8"))
        else:
            sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, ValueError) as err:  # ValueError: a stream closed under us
        _silence_stdout()
        return getattr(err, "strerror", None) or str(err)
    return ""


def _silence_stdout() -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass


class Output:
    """Where `run` writes. A terminal is what rich takes for one (so
    FORCE_COLOR or TTY_COMPATIBLE=1 make a pipe one). Off a terminal the
    reply still streams: each round's committed text as it comes (the rounds'
    texts are the reply's, in order), then the bytes held back to the end.
    Stdout that fails is written to no more; `reply` then says so."""

    def __init__(self) -> None:
        self.screen = Console(highlight=False, soft_wrap=True)
        self.live = self.screen.is_terminal
        self.notes = self.screen if self.live else Console(stderr=True, highlight=False, soft_wrap=True)
        self.sent = 0  # off a terminal: characters of the reply written so far
        self.lost = "" if sys.stdout is not None else "it is closed"  # why stdout takes no more
        self.kept = ""  # where the turn is kept all the same, said when stdout fails

    def round(self, r: Round) -> None:
        """A round (or a server's chunk) as it is decoded: coloured on a
        terminal, its committed text alone off one."""
        if self.live:
            self._print(round_text(r), end="")
        else:
            self._write(r.forced_text + r.accepted_text + r.target_text)

    def reply(self, text: str) -> None:
        """The turn's end: a line end on a terminal; off one, the rest of the
        reply and a line end, so that stdout is --json's "text" and "\n".
        A SpecchatError where stdout took not all of it."""
        if self.live:
            self._print()
        else:
            self._write(text[self.sent :] + "\n")
        if self.lost:
            raise lost_error(self.lost, self.kept)

    def note(self, line: str, style: str = "dim") -> None:
        """A line about the reply (stats, the constraint, why it stopped)."""
        self.notes.print(Text(safe_text(line), style=style))

    def _print(self, *parts, end: str = "\n") -> None:
        if self.lost:
            return
        try:
            self.screen.print(*parts, end=end)
        except OSError as err:  # the terminal is gone
            _silence_stdout()
            self.lost = err.strerror or str(err)

    def _write(self, text: str) -> None:
        """Text as --json's "text" decodes to (a lone surrogate as U+FFFD)."""
        self.sent += len(text)
        if not self.lost:
            self.lost = write_stdout(json.loads(safe_json(text)))


def lost_error(why: str, kept: str) -> SpecchatError:
    return SpecchatError(
        f"cannot write the reply to stdout: {why}",
        hint=kept or "send stdout where it can go: a file with room, a pipe, a terminal",
    )


def stats_line(s: TurnStats, drafter: str, choices: dict[str, int] | None = None) -> str:
    parts = [text for _, text in stats_fields({**s.to_dict(), "drafters": [drafter]})]
    if choices:
        parts.append("auto chose " + ", ".join(f"{k}×{n}" for k, n in sorted(choices.items())))
    if s.identical is not None:
        parts.append("identical to off" if s.identical else f"differs from off at token {s.first_divergence}")
    return " · ".join(parts)


def check_identical(session: ChatSession, turn: Turn) -> None:
    """Decode the same prompt plainly and compare (greedy only)."""
    if not session.status().greedy:
        return
    first = first_difference(turn.tokens, session.plain_reference(turn))
    turn.stats.identical = first is None
    turn.stats.first_divergence = first


def auto_choices(session: ChatSession) -> dict[str, int] | None:
    """How often auto picked each option this turn (None for other drafters)."""
    return session.status().chosen


def as_json(session: ChatSession, turn: Turn) -> dict:
    return {
        "auto_choices": auto_choices(session),
        "text": turn.text,
        "tokens": turn.tokens,
        "spans": spans(turn.rounds),
        "stats": turn.stats.to_dict(),
        "finish": turn.finish,
        "drafter_failed": turn.drafter_failed or None,  # the drafter that failed mid-reply, and why
        "pair": session.pair,
        "drafter": session.drafter_name,
        "k": session.k,
        "threads": session.target.n_threads,
        "n_ctx": session.n_ctx,
        "devices": session.devices,  # backend, device, layers offloaded; draft None if never loaded
        "cost_curve": session.cost_curve(),  # saved by an earlier run, or measured by this one (and how long)
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
    return f"{report['label']} · " + (
        "the reply matches it" if report["valid"] else f"the reply does not match: {report['error']}"
    )


def prefill_status(console: Console):
    """on_prefill for `run` on a terminal: a line on stderr while a long prompt is read."""
    status = console.status("reading the prompt…")

    def tell(done: int, of: int) -> None:
        status.update(f"reading the prompt: {done:,} of {of:,} tokens")
        status.start() if done < of else status.stop()

    return tell


def measure_after(session: ChatSession, seconds: float) -> None:
    """Measure what auto's cost curve still misses, for `seconds` at most
    (`--measure-for`), once the reply is out: a first run on a new machine
    waits for nothing before its reply, and each run measures a little more
    (the chat measures while the user types). A bar on stderr follows it."""
    if seconds <= 0 or session.curve_due() is None:
        return
    console = Console(stderr=True, highlight=False)
    last: list[Measuring] = []
    with console.status("measuring this machine's cost curve for auto…") as status:

        def tell(state: Measuring) -> None:
            last[:] = [state]
            status.update(measuring_line(state))

        session.on_measure(tell)
        session.measure_ahead(budget_s=seconds)
        session.on_measure(None)
    if last and last[0].done < last[0].total and console.is_terminal:
        state = last[0]
        console.print(
            f"auto's cost curve: {state.done} of {state.total} sizes measured; the next runs go on "
            "(--measure-for SECONDS measures longer, the chat measures while you type)",
            style="dim",
        )


def _warn(line: str) -> None:
    sys.stderr.write(safe_text(f"warning: {line}") + "\n")


def record(history: History, session: ChatSession, prompt: str, turn: Turn) -> None:
    """The turn as a conversation in the history, with its stats and spans as the chat keeps them."""
    stats = {**turn.stats.to_dict(), "drafters": [session.drafter_name]}
    history.record(session.pair, prompt, Message("assistant", turn.text, turn.finish, stats, spans(turn.rounds)))


def save_turn(history: History | None, save: Callable[[History], object]) -> str:
    """save(history): the turn recorded. Where the turn is kept, as a hint for a
    stdout that then fails; "" without a history or where saving failed (one
    warning: the reply is shown all the same)."""
    if history is None:
        return ""
    try:
        save(history)
    except sqlite3.Error as err:
        _warn(f"cannot save this turn in the history ({err})")
        return ""
    return "the turn is saved in the history: specchat history search WORDS finds it"


def run_once(
    session: ChatSession,
    prompt: str,
    *,
    json_out: bool,
    identical: bool,
    history: History | None = None,
    remember: bool = True,
    measure_for: float = 0.0,
) -> int:
    out = None if json_out else Output()
    stderr = Console(stderr=True, highlight=False)
    if stderr.is_terminal:
        session.on_prefill(prefill_status(stderr))
    try:
        if history is not None and remember:
            session.remember(history.replies())  # taken in before the turn's clock starts
    except sqlite3.Error as err:
        _warn(f"cannot read the history ({err}); this reply drafts without it")
    with stopped_by_signals() as stopped:
        turn = session.reply(prompt, on_round=out.round if out else None, cancel=stopped.cancel)
    kept = save_turn(history, lambda h: record(h, session, prompt, turn))
    if identical and not stopped.by:
        check_identical(session, turn)
    if out is None:
        if lost := write_stdout(safe_json(as_json(session, turn)) + "\n"):
            raise lost_error(lost, kept)
        if stopped.by:
            _warn(stopped.line(kept))
            return stopped.code
        measure_after(session, measure_for)
        return 0
    out.kept = kept
    out.reply(turn.text)
    out.note(stats_line(turn.stats, session.drafter_name, auto_choices(session)))
    report = constraint_report(session, turn)
    if report is not None:
        out.note(constraint_line(report), "dim" if report["valid"] else "yellow")
    if turn.drafter_failed:
        out.note(turn.drafter_failed, "yellow")
    if turn.finish == "context":
        out.note("stopped: the context is full", "yellow")
    if stopped.by:
        out.note(stopped.line(kept), "yellow")
        return stopped.code
    measure_after(session, measure_for)
    return 0


class Stopped:
    """The signal that stopped a reply, if one did: SIGINT (ctrl-c), SIGTERM
    or SIGHUP (the terminal went away) sets `cancel`, and the engine ends the
    turn at its next round, as Esc does in the chat."""

    def __init__(self) -> None:
        self.cancel = threading.Event()
        self.by: signal.Signals | None = None

    def stop(self, signum: int, frame) -> None:
        if self.cancel.is_set():
            raise KeyboardInterrupt  # a second signal: out at once, the reply with it
        self.by = signal.Signals(signum)
        self.cancel.set()

    @property
    def code(self) -> int:
        """The exit status of a process the signal ended: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + int(self.by or 0)

    def line(self, kept: str) -> str:
        """What the run says as it ends: the signal, and where the reply so far is kept."""
        return f"stopped by {self.by.name if self.by else 'a signal'}" + (f"; {kept}" if kept else "")


@contextmanager
def stopped_by_signals() -> Iterator[Stopped]:
    """While a reply is decoded, a signal stops it instead of the process:
    what came is printed and recorded as the chat keeps a stopped reply, and
    the run exits as the signal would have ended it. A second ends it at once."""
    stopped = Stopped()
    kept = {s: signal.signal(s, stopped.stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield stopped
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)
