"""ServerSession: a conversation with a llama.cpp server, with ChatSession's
surface (turns, knobs, status, history edits), its speculation from the
server's counters (counts.py).

The baseline (`--baseline`) is the same turn decoded again with speculation
off, measured by the server's own clock: on the same server where it takes
per-request speculative settings (it lists `speculative.n_max` in /props),
or on a second server with the same target and no draft
(`--baseline-server`). A baseline reply that still carries drafted tokens
is refused, not shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypedDict

from specchat.decoding.sampling import SamplingParams
from specchat.display import merge_spans
from specchat.drafters import Name
from specchat.engine.loop import Turn
from specchat.errors import SpecchatError
from specchat.server.answers import Fields, inconsistent, read_event
from specchat.server.client import SERVER_DRAFTER, ServerClient, StreamCut
from specchat.server.counts import Chunk, ServerStats, Totals, _context, check_clock, clock_rate, server_stats
from specchat.session.dialogue import Dialogue, SessionStatus
from specchat.textsafe import safe_text

if TYPE_CHECKING:
    from specchat.decoding.costmodel import Measuring
    from specchat.drafters.memory import Memory

# Speculation off for one request, where the server takes per-request settings.
SPECULATION_OFF = {"speculative.n_max": 0, "speculative.n_min": 0}
LINE_SLACK = 64  # streamed lines beyond two per token (the role, the finish, the usage, comments)


# --- the session ------------------------------------------------------------------------


@dataclass
class ServerTurn(Turn):
    """A reply from the server: its chunks, the final timings, and how it ended."""

    chunks: list[Chunk] = field(default_factory=list)
    stats: ServerStats = field(default_factory=ServerStats)  # the server's counters (counts.server_stats)
    timings: dict | None = None  # the server's final timings, verbatim
    baseline: dict | None = None  # the baseline reply's timings and where it ran
    body: dict = field(default_factory=dict)  # the request, for a baseline of the same turn

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)

    def spans(self) -> list[dict]:
        out: list[dict] = []
        for c in self.chunks:
            merge_spans(out, c.spans())
        return out


class _Speculative(TypedDict):
    """The speculative settings sent with each request (None: the server's own)."""

    n_max: int | None
    n_min: int | None
    p_min: float | None


class ServerSession(Dialogue[ServerTurn]):
    """A conversation with a llama-server: ChatSession's surface, the
    server's model, and the server's own speculation counters."""

    def __init__(
        self,
        url: str,
        *,
        sampling: SamplingParams = SamplingParams(),
        system: str | None = None,
        max_tokens: int = 1024,
        k: int | None = None,
        n_min: int | None = None,
        p_min: float | None = None,
        baseline_url: str | None = None,
        with_baseline: bool = False,
    ) -> None:
        self.client = ServerClient(url)
        try:
            self.info = self.client.probe()
        except BaseException:
            self.client.close()
            raise
        self.baseline_client = ServerClient(baseline_url) if baseline_url else None
        self.with_baseline = with_baseline  # opt-in: every turn decoded again with speculation off
        self.sampling = sampling
        self.system = system
        self.max_tokens = max_tokens
        self.pair = f"server {self.info.model}"
        # Where the server runs the target: the devices it reports (display.device_text words them).
        # Its draft is its own: where that runs the server does not say apart.
        self.devices: dict[str, dict | None] = {
            "target": {"server": self.info.url, "devices": self.info.devices},
            "draft": None,
        }
        super().__init__()
        self._drafter = SERVER_DRAFTER
        self.settings: _Speculative = {"n_max": k, "n_min": n_min, "p_min": p_min}
        self._context_used = 0
        try:
            self._refuse_unaccepted()
        except SpecchatError:
            self.close()
            raise

    # --- knobs -----------------------------------------------------------------

    @property
    def drafter_name(self) -> str:
        return self._drafter

    def drafter_names(self) -> list[str]:
        """What ctrl+d cycles through: the settings this server allows per request."""
        return self.info.drafter_names()

    def set_sampling(self, temp: float, top_p: float) -> None:
        self.sampling = replace(self.sampling, temp=temp, top_p=top_p)  # sent with each request

    def set_drafter(self, name: str) -> None:
        if name not in self.drafter_names():
            raise SpecchatError(f"this server cannot run {name!r} per request", hint=self.knob_hint())
        self._drafter = name

    @property
    def k(self) -> int:
        return self.settings["n_max"] or 0

    def set_k(self, k: int | None) -> None:
        """speculative.n_max for each request; None: the server's own."""
        from specchat.decoding.target import K_MAX, K_MIN

        if k is not None and "n_max" not in self.info.knobs:
            raise SpecchatError("this server does not take k per request", hint=self.knob_hint())
        self.settings["n_max"] = None if k is None else max(K_MIN, min(K_MAX, k))

    def knob_hint(self) -> str:
        return (
            "this llama-server takes no per-request speculative settings (its build lists none in /props); "
            "set them where it starts: --spec-draft-n-max N, --spec-draft-n-min N, --spec-draft-p-min P"
        )

    def _refuse_unaccepted(self) -> None:
        for key, value in self.settings.items():
            if value is not None and key not in self.info.knobs:
                raise SpecchatError(
                    f"this server does not accept speculative.{key} per request", code=2, hint=self.knob_hint()
                )

    cpu_bound = False  # no local model: the server decodes
    draft_model_loaded = False  # the server's draft model is its own

    @property
    def n_ctx(self) -> int:
        return int(self.info.n_ctx or 0)

    @property
    def context_used(self) -> int:
        return self._context_used

    def status(self) -> SessionStatus:
        return SessionStatus(
            self.pair,
            self._drafter,
            self.k,
            self.sampling.temp,
            self.sampling.greedy,
            self._context_used,
            self.n_ctx,
            "",
            None,
        )

    def set_constraint(self, spec) -> None:
        if spec is not None:
            raise SpecchatError(
                "replies on a server are not constrained by specchat", hint="the grammar drafter runs on a local pair"
            )

    constraint_spec = None  # replies on a server are never constrained by specchat

    def request(self) -> dict:
        """The request body of the next turn, with the drafter's settings."""
        s = self.sampling
        body = {
            "messages": ([{"role": "system", "content": self.system}] if self.system else []) + self.messages,
            "stream": True,
            "timings_per_token": True,
            "cache_prompt": True,
            "max_tokens": self.max_tokens,
            "temperature": s.temp,
            "top_k": s.top_k,
            "top_p": s.top_p,
            "seed": s.seed,
        }
        if self._drafter == Name.OFF:
            body.update(SPECULATION_OFF)
        else:
            body.update({f"speculative.{k}": v for k, v in self.settings.items() if v is not None})
        return body

    def _generate(self, on_round, cancel, on_idle) -> ServerTurn:
        turn = ServerTurn(body=self.request())
        totals = Totals(self.client.url)
        t0 = time.perf_counter()
        try:
            self._stream(turn, totals, on_round, cancel, on_idle)
        except StreamCut as cut:
            turn.finish, turn.error = "cut", f"the server closed the stream mid-reply ({cut})"
        wall = time.perf_counter() - t0
        # The reply stays in the conversation as it was shown (a cut stream's part too),
        # even where the checks below refuse the server's figures for it.
        self._messages.append({"role": "assistant", "content": turn.text})
        turn.timings = totals.timings
        turn.stats = server_stats(totals, wall)
        check_clock(Fields(totals.timings or {}, self.client.url, "stream event", "timings"), wall, self.client.url)
        self._context_used = _context(totals.timings, self.client.url)
        if self.info.speculative and not self.info.spec_types and turn.finish in ("eos", "length"):
            try:
                self.client.read_slots(self.info)
            except SpecchatError:
                pass  # the reply stands; the speculation's kind stays unnamed
        if self.with_baseline and turn.finish in ("eos", "length"):
            try:
                self.baseline(turn, cancel)
            except SpecchatError as err:  # the reply stands; the line says why there is no speedup
                turn.stats.baseline_error = err.message
        return turn

    def _stream(self, turn: ServerTurn, totals: Totals, on_round, cancel, on_idle) -> None:
        """The server's events into turn.chunks, each chunk to on_round as it
        comes, on_idle while the server is silent; stopped by `cancel`, and at
        max_tokens whatever the server does."""
        text = ""  # text of events without timings, waiting for the next counters
        texts = 0  # events that brought text: at least one token each
        events = self.client.stream_chat(turn.body, cancel, max_lines=2 * self.max_tokens + LINE_SLACK, on_idle=on_idle)
        try:
            with closing(events):  # however the loop ends, the connection goes at once
                for event in events:
                    content, finish, timings = read_event(event)
                    texts += bool(content)
                    if max(texts, timings.count_or("predicted_n", 0) if timings else 0) > self.max_tokens:
                        turn.finish = "length"  # the server went past max_tokens: the client stops at the cap
                        return
                    text += content
                    if finish:
                        turn.finish = {"stop": "eos", "length": "length"}.get(finish, finish)
                    if timings is None and not finish and totals.timings is not None:
                        continue  # its counters come with the next event
                    if text or timings:
                        chunk, text = totals.chunk(text, timings), ""
                        turn.chunks.append(chunk)
                        if on_round is not None and chunk.text:
                            on_round(chunk)
            if cancel is not None and cancel.is_set():
                turn.finish = "cancelled"
        finally:
            if text:
                turn.chunks.append(totals.chunk(text, None))

    # --- the baseline ---------------------------------------------------------

    def baseline(self, turn: ServerTurn, cancel=None) -> None:
        """Decode `turn` again with speculation off and measure it by the
        server's clock: on this server when it takes speculative.n_max, else
        on the --baseline-server. Sets turn.baseline and the speedup."""
        self.check_baseline()
        client = self.baseline_client or self.client
        body = dict(turn.body, stream=False)
        body.pop("timings_per_token", None)
        if self.baseline_client is None:
            body.update(SPECULATION_OFF)
        t0 = time.perf_counter()
        reply = client.complete(body, cancel)
        if reply is None:
            raise SpecchatError("cancelled before the baseline finished")
        timings = reply.node("timings")
        rate = clock_rate(timings, "predicted", client.url)
        drafted = timings.count_or("draft_n", 0)
        if "predicted_per_second" not in timings:
            raise SpecchatError(f"the baseline server at {client.url} sends no timings", hint="use a llama-server")
        if drafted:
            raise SpecchatError(
                f"the baseline reply from {client.url} still drafted {drafted} tokens: speculation "
                "was not off, so no speedup is shown",
                hint="start the baseline server without -md and without --spec-type",
            )
        if not rate:
            raise inconsistent(
                client.url, f"a --baseline reply of {timings.count_or('predicted_n', 0)} tokens at 0 tok/s"
            )
        check_clock(timings, time.perf_counter() - t0, client.url)
        choices = reply.nodes("choices")
        message = choices[0].node("message") if choices else None
        content = (message.text("content", limit=None) if message else None) or ""
        turn.baseline = {
            "url": client.url,
            "same_server": self.baseline_client is None,
            "timings": timings.value,
            "identical": content == turn.text,
        }
        s = turn.stats
        s.baseline_tok_s = rate
        s.speedup = s.tok_s / s.baseline_tok_s if s.tok_s else None
        s.identical = content == turn.text

    def check_baseline(self) -> None:
        """Refuse --baseline, before any work, where speculation cannot be turned off."""
        if self.baseline_client is None and "n_max" not in self.info.knobs:
            raise SpecchatError(
                f"--baseline needs speculation off for one request, and {self.client.url} takes no per-request "
                "speculative settings (its /props lists none)",
                hint="start a second llama-server with the same -m and no -md, and pass --baseline-server URL",
            )
        if self.baseline_client is not None:
            self._check_same_model(self.baseline_client)

    def _check_same_model(self, baseline: ServerClient) -> None:
        other = baseline.probe()
        keys = ("n_params", "size", "n_vocab", "ftype")
        mine = {k: self.info.meta.get(k) for k in keys}
        theirs = {k: other.meta.get(k) for k in keys}
        if mine != theirs:
            raise SpecchatError(
                f"the baseline server runs another model ({safe_text(other.model)}) than {safe_text(self.info.model)}",
                hint="start it with the same -m file as the speculating server",
            )
        if other.speculative:
            raise SpecchatError(
                f"the baseline server at {other.url} speculates ({other.spec_types})",
                hint="start it without -md and without --spec-type",
            )

    # --- what a local pair measures and keeps: a server does neither -------------
    # The chat asks every session the same; the server's costs and what it
    # drafts from are its own, so these do nothing and `memory` is None.

    memory: Memory | None = None
    memory_owner: object = None

    def on_measure(self, tell: Callable[[Measuring], None] | None) -> None:
        """Nothing is measured here: a server prices its drafts itself."""

    def measure_ahead(self, budget_s: float | None = None) -> str | None:
        return None

    def remember(self, replies: Iterable[tuple[object, str, str]], ticket: int | None = None) -> None:
        """The chat's earlier replies stay here: a server drafts from its own."""

    def set_memory(self, on: bool) -> None:
        """A server has no memory of this user's replies to turn on or off."""

    def close(self) -> None:
        self.client.close()
        if self.baseline_client is not None:
            self.baseline_client.close()
