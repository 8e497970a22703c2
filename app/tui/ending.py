"""How the chat's process ends: nothing outlives its terminal.

SIGTERM, SIGINT and SIGHUP, and a terminal that hangs up (its window
closed, tmux killed, ssh dropped: the chat's input reports it, with or
without a SIGHUP), ask the app to end as ctrl+q does (`SpecchatApp.terminated`):
a reply under way stops at its next round and is kept as a stopped reply.

Then, whatever the process's threads are doing (a model still loading, the
cost curve being measured, a llama.cpp call that does not return, an event
loop stuck writing to a terminal that is gone), the process is gone by a
deadline: the history's queued writes are finished first (`save`), then
os._exit. An ordinary quit has a deadline too (QUIT_DEADLINE), long enough
for a history another program holds locked.

The handlers are plain signal handlers, not the event loop's: the loop may
be the very thing that is stuck.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specchat.tui.state.models import Session

# Seconds from a signal to the process's end at the latest. A lost
# terminal (SIGHUP, or a hang-up on its input) leaves no one to wait for.
DEADLINES = {signal.SIGTERM: 4.0, signal.SIGINT: 4.0, signal.SIGHUP: 1.5}
# How long a reply may take to stop after the signal before the app exits
# without it (a round does not end: a llama.cpp call that hangs).
REPLY_WAITS = {signal.SIGTERM: 2.0, signal.SIGINT: 2.0, signal.SIGHUP: 1.0}
QUIT_DEADLINE = 6.0  # after the app has ended: more than the history's wait for a lock (run_chat's 5 s)
SAVE_WAIT = 0.4  # at a deadline, the most the history's queued writes may still take


class Ending:
    """The chat process's signals, its terminal and its deadline. `start`
    (the app, once its loop runs) installs the handlers; `ended` (the app
    ending) sets the deadline for an ordinary quit and closes the pair;
    `restore` (run_chat, its last step) puts the handlers back."""

    def __init__(self, save: Callable[[float], object]) -> None:
        self.save = save  # finish the history's queued writes, waiting at most N seconds
        self.code: int | None = None  # the exit code: the first reason to end
        self.at: float | None = None  # time.monotonic() of the deadline
        # A signal handler wakes the deadline's thread with a byte: a lock
        # (an Event) could be held by the very code the signal interrupted.
        self._wake_out, self._wake_in = os.pipe()
        os.set_blocking(self._wake_in, False)
        self._previous: dict[int, object] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ask: Callable[[int], None] | None = None
        self._exiting: Callable[[], int | None] = lambda: None
        self.closing: threading.Thread | None = None  # the pair being freed as the app ends

    def start(
        self, loop: asyncio.AbstractEventLoop, ask: Callable[[int], None], exiting: Callable[[], int | None]
    ) -> None:
        """Catch the signals and watch the terminal; `ask(number)` runs on
        `loop` for each (the app's way out as ctrl+q). `exiting()` is the
        app's exit code once it is on its way out (None before): a signal
        that comes after a quit does not change it."""
        self._loop, self._ask, self._exiting = loop, ask, exiting
        for number in DEADLINES:
            self._previous[number] = signal.signal(number, self._signalled)
        threading.Thread(target=self._deadline, name="chat-deadline", daemon=True).start()
        terminal = [fd for fd in (0, 1, 2) if _is_terminal(fd)]
        if terminal:
            threading.Thread(target=self._watch, args=(terminal,), name="terminal-watch", daemon=True).start()

    def ended(self, code: int, session: Session | None) -> None:
        """The app has ended: whatever still runs has QUIT_DEADLINE seconds.
        The pair is closed on a thread of its own: closing stops a measurement
        of the cost curve at its next decode (the event loop's end would wait
        it out, joining its workers), then frees the models once a reply or a
        fill lets go of them."""
        self.arm(QUIT_DEADLINE, code)
        if session is not None:
            self.closing = threading.Thread(target=session.close, name="session-close", daemon=True)
            self.closing.start()

    def wait_closed(self, seconds: float) -> None:
        """Wait (at most `seconds`) for the pair to be freed, before the interpreter goes."""
        if self.closing is not None:
            self.closing.join(timeout=seconds)

    def arm(self, seconds: float, code: int) -> None:
        """End the process `seconds` from now at the latest; an earlier
        deadline stays. The first reason's code is the exit code."""
        if self.code is None:
            self.code = code
        at = time.monotonic() + seconds
        if self.at is None or at < self.at:
            self.at = at
        try:
            os.write(self._wake_in, b"!")
        except OSError:  # full: the thread is awake already
            pass

    def restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]

    def _signalled(self, number: int, frame) -> None:
        self._end(signal.Signals(number))

    def _end(self, number: signal.Signals) -> None:
        code = self._exiting()
        self.arm(DEADLINES[number], 128 + number if code is None else code)
        self._tell(number)

    def _tell(self, number: int) -> None:
        if self._loop is None or self._ask is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._ask, number)
        except RuntimeError:  # the loop has closed: the deadline ends the process
            pass

    def _watch(self, terminal: list[int]) -> None:
        """Wait for the terminal to hang up (poll reports it whatever events
        are asked for; asking none, input waiting for Textual never wakes
        this thread), then end as SIGHUP does. The output goes to /dev/null
        first: writes to a terminal that is gone fail, Textual's writer
        thread dies of it, and the app would block on its full queue before
        the reply under way is kept."""
        poller = select.poll()
        for fd in terminal:
            poller.register(fd, 0)
        while not any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, mask in poller.poll()):
            pass
        _to_null([fd for fd in terminal if fd != 0])
        self._end(signal.SIGHUP)

    def _deadline(self) -> None:
        while self.at is None or (left := self.at - time.monotonic()) > 0:
            ready, _, _ = select.select([self._wake_out], [], [], None if self.at is None else left)
            if ready:
                os.read(self._wake_out, 512)
        for last in (lambda: self.save(SAVE_WAIT), lambda: sys.stdout.flush(), lambda: sys.stderr.flush()):
            try:
                last()
            except Exception:  # nothing may keep the process from ending now (a stream may be None, or gone)
                pass
        os._exit(self.code or 0)


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _to_null(fds: list[int]) -> None:
    """Point these output descriptors at /dev/null."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in fds:
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)
