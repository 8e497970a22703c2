"""Streaming a reply to the screen: the engine's rounds, collected on the
decoding worker, reach the app as batched messages (never one per token),
spaced so that drawing costs the UI thread only its share of a core.

Where decoding keeps every core busy (llama.cpp on a CPU), the worker waits
while a batch is drawn, so drawing runs between two rounds instead of
stalling llama.cpp's threads in the middle of one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from specchat.decoding.stats import Round
from specchat.display import round_spans

if TYPE_CHECKING:
    from specchat.engine.loop import Turn
    from specchat.tui.chat.widgets import AssistantMessage

BATCH_SECONDS = 0.04  # rounds reach the UI at most this often...
MAX_BATCH_SECONDS = 1.5  # ...and at least this often
# The UI thread may use this share of one core while decoding. Where decoding
# keeps every core busy, each ms of drawing is a ms of decoding lost;
# elsewhere (a GPU, spare cores) the UI may stream more smoothly.
UI_SHARE_CPU_BOUND = 0.0075
UI_SHARE = 0.10
# The status bar's live tok/s changes at most this often. Rarely, so that most
# batches repaint only the reply's rows, not everything from there to the bottom.
STATUS_SECONDS = 1.0
# Where decoding keeps every core busy, the worker waits (at most this long)
# while the UI shows a batch.
SHOW_WAIT_SECONDS = 0.25


# --- messages from the worker --------------------------------------------------------


@dataclass
class RoundsReady(Message):
    reply: AssistantMessage  # the reply being streamed
    spans: list[dict]
    live_tok_s: float
    choice: str = ""  # auto's latest decision, e.g. "ngram k=6"
    shown: threading.Event | None = None  # set once the batch is on screen
    reading: tuple[int, int] | None = None  # (tokens read, of) while the prompt is read, before any round


@dataclass
class ReplyDone(Message):
    reply: AssistantMessage
    turn: Turn
    drafters: list[str]


@dataclass
class ReplyFailed(Message):
    reply: AssistantMessage
    error: Exception
    sent: bool = True  # the turn began with a new user message (saved), not a regenerate


# --- pacing ----------------------------------------------------------------------------


class Pacer:
    """How often batches go to the UI, and how long the worker waited for drawing."""

    def __init__(self) -> None:
        self.cpu_bound = False  # decoding keeps every core busy
        self.batch_seconds = BATCH_SECONDS
        self.drawing_wait = 0.0  # seconds the worker waited for drawing, this reply
        self._mark = (0.0, 0.0)

    @property
    def ui_share(self) -> float:
        """The share of a core the UI thread may use while decoding."""
        return UI_SHARE_CPU_BOUND if self.cpu_bound else UI_SHARE

    def pace(self) -> None:
        """Called on the UI thread for each batch: keep its CPU near its share of
        a core. Rendering competes with decoding for cores (and the GIL), so a
        slow render means fewer, bigger batches, never a slower decode."""
        wall, cpu = time.perf_counter(), time.thread_time()
        last_wall, last_cpu = self._mark
        self._mark = (wall, cpu)
        if not last_wall or wall - last_wall > 2.0:
            return
        # The UI's CPU since the last batch is about what one batch costs to
        # show; space batches so that cost stays within the share.
        needed = (cpu - last_cpu) / self.ui_share
        smoothed = (self.batch_seconds + needed) / 2
        self.batch_seconds = max(BATCH_SECONDS, min(MAX_BATCH_SECONDS, smoothed))


class RoundFeed:
    """on_round for the engine: collects spans in the worker thread and posts
    them at most every `pacer.batch_seconds`."""

    def __init__(self, post: Callable[[Message], object], reply, pacer: Pacer) -> None:
        self.post, self.reply, self.pacer = post, reply, pacer
        self.pending: list[dict] = []
        self.tokens = 0
        self.drafters: list[str] = []  # the drafters that ran the reply, in order
        self.choice = ""
        self.t0 = self.last = time.perf_counter()

    def __call__(self, r: Round) -> None:
        if not self.drafters or self.drafters[-1] != r.mode:
            self.drafters.append(r.mode)
        self.pending += round_spans(r)
        self.tokens += r.n_tokens  # a Round, or a server's Chunk that reads like one
        self.choice = r.choice
        now = time.perf_counter()
        if self.tokens == r.n_tokens:
            # The first round: the live tok/s counts from its start, not from
            # before prefill and auto's calibration.
            self.t0 = now - r.t_draft - r.t_verify
        if now - self.last >= self.pacer.batch_seconds:
            self.flush(now)

    def read(self, done: int, of: int) -> None:
        """on_prefill for the engine: how the prompt's reading goes, before the first round."""
        self.post(RoundsReady(self.reply, [], 0.0, reading=(done, of)))

    def flush(self, now: float | None = None) -> None:
        now = now or time.perf_counter()
        if self.pending:
            tok_s = self.tokens / (now - self.t0) if now > self.t0 else 0.0
            shown = threading.Event() if self.pacer.cpu_bound else None
            self.post(RoundsReady(self.reply, self.pending, tok_s, self.choice, shown))
            self.pending = []
            if shown is not None:
                t0 = time.perf_counter()
                shown.wait(SHOW_WAIT_SECONDS)
                self.pacer.drawing_wait += time.perf_counter() - t0
        self.last = time.perf_counter()
