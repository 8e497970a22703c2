"""A llama.cpp server (`llama-server`) as the chat's backend: the HTTP
client, what the server says about itself, and `ServerSession`, which
offers the surface of `ChatSession` so that the chat and `specchat run`
drive it the same way.

Speculation is reported from the server's own counters only. Every
streamed chunk asked with `timings_per_token: true` carries the running
totals `draft_n` (tokens drafted) and `draft_n_accepted` (drafts the target
accepted) and `predicted_n` (tokens generated). Their differences between
chunks say how many of the new tokens were accepted drafts; nothing finer
(which token, what was rejected) is known, so nothing finer is claimed:

- a chunk all of whose new tokens are accepted drafts is coloured as
  accepted, with the provenance SERVER_TOTALS; a chunk that mixes them with
  the target's own tokens stays plain (its count still goes into the stats);
- the counters of a verify round come with its first token, and llama.cpp
  sends the round's accepted drafts before the target's own token, so the
  accepted count is spent on the tokens from that chunk on;
- α needs the number of verify rounds, which is the number of chunks where
  `draft_n` grew; that is exact only when every chunk brought at most one
  token, otherwise α is not given;
- a server that sends no counters gets "no speculation data from this
  server", never zeros.

The baseline (`--baseline`) is the same turn decoded again with speculation
off, measured by the server's own clock: on the same server where it takes
per-request speculative settings (it lists `speculative.n_max` in /props),
or on a second server with the same target and no draft
(`--baseline-server`). A baseline reply that still carries drafted tokens
is refused, not shown.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator
from urllib.parse import urlsplit

import httpx

from specchat.chat import SessionStatus
from specchat.engine import Turn
from specchat.errors import SpecchatError
from specchat.sampling import SamplingParams
from specchat.stats import SERVER_TOTALS, TurnStats, merge_spans, round_spans
from specchat.textsafe import safe_text

KNOBS = ("n_max", "n_min", "p_min")  # per-request speculative settings, as llama-server names them
SERVER_DRAFTER = "server"  # the drafter name of "whatever the server was started with"
CONNECT_S = 5.0
READ_S = 600.0  # a big model's prefill on a busy server can take minutes


# --- what the server is ---------------------------------------------------------------


@dataclass
class ServerInfo:
    """What a llama-server says about itself (/props, /v1/models, /slots)."""

    url: str
    model: str  # the model's id, or its file name
    n_ctx: int | None = None
    speculative: bool | None = None  # /slots: does a slot speculate? None: the server does not say
    spec_types: str = ""  # /slots: e.g. "draft-simple"
    knobs: tuple[str, ...] = ()  # per-request speculative settings it accepts (of KNOBS)
    build: str = ""
    meta: dict = field(default_factory=dict)  # /v1/models meta: n_params, size, vocab

    @property
    def draft(self) -> str:
        """The server's speculation, in words."""
        if self.speculative is None:
            return "unknown (the server does not list its slots)"
        if not self.speculative:
            return "none (started without -md or --spec-type)"
        return self.spec_types or "on"

    def drafter_names(self) -> list[str]:
        """The speculation settings this server allows per request: its own,
        and off where it takes speculative.n_max."""
        return [SERVER_DRAFTER] + (["off"] if "n_max" in self.knobs else [])

    def to_dict(self) -> dict:
        return {"url": self.url, "model": self.model, "n_ctx": self.n_ctx, "speculative": self.speculative,
                "spec_types": self.spec_types, "knobs": list(self.knobs), "build": self.build}


def check_url(url: str) -> str:
    """The server's base address, checked at the edge."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SpecchatError(f"--server {url!r} is not an http(s) address", code=2,
                            hint="give the server's base address, e.g. --server http://127.0.0.1:8080")
    return url.strip().rstrip("/")


class ServerClient:
    """One kept HTTP connection to a llama-server, with its errors in words."""

    def __init__(self, url: str) -> None:
        self.url = check_url(url)
        self.http = httpx.Client(base_url=self.url, timeout=httpx.Timeout(READ_S, connect=CONNECT_S))

    def close(self) -> None:
        self.http.close()

    def get(self, path: str, *, optional: bool = False) -> dict | list | None:
        """GET a JSON document; None for an optional one the server does not serve."""
        try:
            response = self.http.get(path)
        except httpx.HTTPError as err:
            raise self._unreachable(err) from None
        if optional and response.status_code in (404, 501):
            return None
        self._check(response, path)
        try:
            return response.json()
        except ValueError:
            raise SpecchatError(f"{self.url}{path} did not answer with JSON", hint=WRONG_URL_HINT) from None

    def probe(self) -> ServerInfo:
        """Ask the server what it runs; a wrong URL or a dead server fails here."""
        models = self.get("/v1/models")
        data = models.get("data") if isinstance(models, dict) else None
        if not data:
            raise SpecchatError(f"{self.url} lists no model at /v1/models", hint=WRONG_URL_HINT)
        first = data[0]
        props = self.get("/props", optional=True) or {}
        settings = props.get("default_generation_settings") or {}
        params = settings.get("params") or {}
        model = str(first.get("id") or props.get("model_alias") or "?")
        info = ServerInfo(
            url=self.url,
            model=model.rsplit("/", 1)[-1] or model,  # llama-server's id is the file's path
            n_ctx=settings.get("n_ctx") or (first.get("meta") or {}).get("n_ctx"),
            knobs=tuple(k for k in KNOBS if f"speculative.{k}" in params),
            build=str(props.get("build_info", "")),
            meta=first.get("meta") or {},
        )
        self.read_slots(info)
        return info

    def read_slots(self, info: ServerInfo) -> None:
        """Whether the server speculates, and how (/slots; its types only once a request has run)."""
        slots = self.get("/slots", optional=True)
        if isinstance(slots, list) and slots:
            info.speculative = bool(slots[0].get("speculative"))
            types = str((slots[0].get("params") or {}).get("speculative.types", "")).split(",")
            info.spec_types = ",".join(t for t in types if t and t != "none")  # llama.cpp lists "none" first

    def stream_chat(self, body: dict, cancel: threading.Event | None) -> Iterator[dict]:
        """POST /v1/chat/completions with stream=true; yields each event's JSON.
        Raises StreamCut when the stream ends before the server finished."""
        finished = False
        try:
            with self.http.stream("POST", "/v1/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    self._check(response, "/v1/chat/completions")
                for line in response.iter_lines():
                    if cancel is not None and cancel.is_set():
                        return
                    if line.startswith("error:"):
                        raise SpecchatError(f"the server stopped with an error: {_error_text(line[6:])}")
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        finished = True
                        break
                    event = json.loads(payload)
                    if "error" in event:
                        raise SpecchatError(f"the server stopped with an error: {_error_text(event['error'])}")
                    yield event
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ReadTimeout) as err:
            raise StreamCut(str(err) or type(err).__name__) from None
        except httpx.ConnectError as err:
            raise self._unreachable(err) from None
        if not finished and not (cancel is not None and cancel.is_set()):
            raise StreamCut("the stream ended without [DONE]")

    def complete(self, body: dict) -> dict:
        """POST /v1/chat/completions without streaming (for the baseline)."""
        try:
            response = self.http.post("/v1/chat/completions", json=body)
        except httpx.HTTPError as err:
            raise self._unreachable(err) from None
        self._check(response, "/v1/chat/completions")
        return response.json()

    def _check(self, response: httpx.Response, path: str) -> None:
        code = response.status_code
        if code < 400:
            return
        if code == 404:
            raise SpecchatError(f"{self.url} has no {path} (HTTP 404): it is not a llama.cpp server's base address",
                                hint=WRONG_URL_HINT)
        message = _error_text(response.text)
        if code == 503:
            raise SpecchatError(f"the server is not ready (HTTP 503): {message}",
                                hint="it is probably still loading the model; try again in a moment")
        kind = "refused the request" if code < 500 else "failed"
        raise SpecchatError(f"the server {kind} (HTTP {code}): {message}",
                            hint="see the server's log for the details")

    def _unreachable(self, err: Exception) -> SpecchatError:
        return SpecchatError(f"cannot reach the llama.cpp server at {self.url}: {safe_text(err) or type(err).__name__}",
                             hint="start it (llama-server -m MODEL.gguf --port 8080) or check --server")


WRONG_URL_HINT = "--server takes the server's base address, e.g. http://127.0.0.1:8080 (no /v1 path)"


class StreamCut(Exception):
    """The server's stream ended mid-reply."""


def _error_text(raw: object) -> str:
    """The message of a llama-server error body ({"error": {"message": ...}}), or the raw text."""
    data = raw
    if isinstance(raw, str):
        try:
            data = json.loads(raw)
        except ValueError:
            return safe_text(raw.strip()[:200]) or "no message"
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict):
            return safe_text(inner.get("message") or json.dumps(inner)[:200])
        return safe_text(str(inner)[:200])
    return safe_text(str(data)[:200])


# --- the counters, chunk by chunk -------------------------------------------------------


@dataclass
class Chunk:
    """The text of one streamed chunk, and what the server's totals say about
    it. It reads like a Round where the chat's stream reads one (its text by
    kind, mode, n_tokens), so the same spans, colours and pacing apply."""

    text: str
    tokens: int | None  # new tokens by predicted_n; None without counters
    accepted: int = 0  # of them, accepted drafts (by draft_n_accepted)
    drafted: int = 0  # draft_n grew by this much at this chunk: a verify round began here

    mode = SERVER_DRAFTER  # the drafter that ran it: the server's own setting
    drafter = SERVER_TOTALS  # the provenance of its accepted text
    choice = ""
    forced_text = rejected_text = ""  # the server sends no rejected drafts
    t_draft = t_verify = 0.0

    @property
    def kind(self) -> str:
        return "accepted" if self.tokens and self.accepted == self.tokens else "target"

    @property
    def accepted_text(self) -> str:
        return self.text if self.kind == "accepted" else ""

    @property
    def target_text(self) -> str:
        return self.text if self.kind == "target" else ""

    @property
    def n_tokens(self) -> int:
        return self.tokens or 0

    def spans(self) -> list[dict]:
        return round_spans(self)


class Totals:
    """Turns the running totals of successive chunks into per-chunk counts."""

    def __init__(self) -> None:
        self.predicted = self.drafted = self.accepted = 0
        self.pending = 0  # accepted drafts announced but not yet streamed
        self.rounds = 0  # chunks where draft_n grew
        self.exact = True  # every chunk brought at most one token, so every round was seen
        self.counters = False  # the server sent draft_n at least once
        self.timings: dict | None = None  # the latest timings as the server sent them

    def chunk(self, text: str, timings: dict | None) -> Chunk:
        if not timings:
            return Chunk(text, None)
        self.timings = timings
        predicted = int(timings.get("predicted_n", self.predicted))
        drafted = int(timings.get("draft_n", self.drafted))
        accepted = int(timings.get("draft_n_accepted", self.accepted))
        self.counters |= "draft_n" in timings
        new, grew = predicted - self.predicted, drafted - self.drafted
        self.pending += accepted - self.accepted
        self.predicted, self.drafted, self.accepted = predicted, drafted, accepted
        self.rounds += grew > 0
        self.exact &= new <= 1
        mine = min(self.pending, max(new, 0))
        self.pending -= mine
        return Chunk(text, new, mine, grew)


# --- the session ------------------------------------------------------------------------


@dataclass
class ServerTurn(Turn):
    """A reply from the server: its chunks, the final timings, and how it ended."""

    chunks: list[Chunk] = field(default_factory=list)
    timings: dict | None = None  # the server's final timings, verbatim
    error: str = ""  # why the stream was cut, when finish == "cut"
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


class ServerSession:
    """A conversation with a llama-server: ChatSession's surface, the
    server's model, and the server's own speculation counters."""

    def __init__(self, url: str, *, sampling: SamplingParams = SamplingParams(), system: str | None = None,
                 max_tokens: int = 1024, k: int | None = None, n_min: int | None = None,
                 p_min: float | None = None, baseline_url: str | None = None, with_baseline: bool = False) -> None:
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
        self.devices: dict[str, dict | None] = {"target": None, "draft": None}  # the server's, not reported
        self.target = None  # no local model: the server decodes (so nothing here is CPU-bound)
        self._messages: list[dict] = []
        self._drafter = SERVER_DRAFTER
        self.settings = {"n_max": k, "n_min": n_min, "p_min": p_min}
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

    def set_drafter(self, name: str) -> None:
        if name not in self.drafter_names():
            raise SpecchatError(f"this server cannot run {name!r} per request", hint=self.knob_hint())
        self._drafter = name

    @property
    def k(self) -> int:
        return self.settings["n_max"] or 0

    def set_k(self, k: int) -> None:
        from specchat.drafters import K_MAX, K_MIN

        if "n_max" not in self.info.knobs:
            raise SpecchatError("this server does not take k per request", hint=self.knob_hint())
        self.settings["n_max"] = max(K_MIN, min(K_MAX, k))

    def knob_hint(self) -> str:
        return ("this llama-server takes no per-request speculative settings (its build lists none in /props); "
                "set them where it starts: --spec-draft-n-max N, --spec-draft-n-min N, --spec-draft-p-min P")

    def _refuse_unaccepted(self) -> None:
        for key, value in self.settings.items():
            if value is not None and key not in self.info.knobs:
                raise SpecchatError(f"this server does not accept speculative.{key} per request", code=2,
                                    hint=self.knob_hint())

    @property
    def n_ctx(self) -> int:
        return int(self.info.n_ctx or 0)

    @property
    def context_used(self) -> int:
        return self._context_used

    def status(self) -> SessionStatus:
        return SessionStatus(self.pair, self._drafter, self.k, self.sampling.temp, self.sampling.greedy,
                             self._context_used, self.n_ctx, "", None)

    def set_constraint(self, spec) -> None:
        if spec is not None:
            raise SpecchatError("replies on a server are not constrained by specchat",
                                hint="the grammar drafter runs on a local pair")

    def constraint_label(self) -> str:
        return ""

    # --- the conversation ----------------------------------------------------

    @property
    def messages(self) -> list[dict]:
        return [dict(m) for m in self._messages]

    def replace_messages(self, messages: list[dict]) -> None:
        self._messages = [{"role": m["role"], "content": m["content"]} for m in messages]

    def last_user_text(self) -> str | None:
        users = [m["content"] for m in self._messages if m["role"] == "user"]
        return users[-1] if users else None

    def clear(self) -> None:
        self._messages.clear()

    # --- turns -----------------------------------------------------------------

    def reply(self, user_text: str, on_round: Callable[[Chunk], None] | None = None,
              cancel: threading.Event | None = None) -> ServerTurn:
        self._messages.append({"role": "user", "content": user_text})
        return self._generate(on_round, cancel)

    def regenerate(self, on_round=None, cancel=None) -> ServerTurn:
        if self._messages and self._messages[-1]["role"] == "assistant":
            self._messages.pop()
        if not self._messages:
            raise SpecchatError("nothing to regenerate", hint="send a message first")
        return self._generate(on_round, cancel)

    def edit_last(self, user_text: str, on_round=None, cancel=None) -> ServerTurn:
        while self._messages and self._messages[-1]["role"] == "assistant":
            self._messages.pop()
        if self._messages:
            self._messages.pop()
        return self.reply(user_text, on_round, cancel)

    def request(self, drafter: str | None = None) -> dict:
        """The request body of the next turn (with `drafter`'s settings)."""
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
        if (drafter or self._drafter) == "off":
            body["speculative.n_max"] = 0
            body["speculative.n_min"] = 0
        else:
            body.update({f"speculative.{k}": v for k, v in self.settings.items() if v is not None})
        return body

    def _generate(self, on_round, cancel) -> ServerTurn:
        turn = ServerTurn(body=self.request())
        totals = Totals()
        text = ""  # text of events without timings, waiting for the next counters
        t0 = time.perf_counter()
        try:
            for event in self.client.stream_chat(turn.body, cancel):
                choice = (event.get("choices") or [{}])[0]
                text += (choice.get("delta") or {}).get("content") or ""
                timings = event.get("timings")
                if choice.get("finish_reason"):
                    turn.finish = {"stop": "eos", "length": "length"}.get(choice["finish_reason"], choice["finish_reason"])
                if timings is None and not choice.get("finish_reason") and totals.timings is not None:
                    continue  # its counters come with the next event
                if text or timings:
                    chunk = totals.chunk(text, timings)
                    text = ""
                    turn.chunks.append(chunk)
                    if on_round is not None and chunk.text:
                        on_round(chunk)
            if text:
                turn.chunks.append(totals.chunk(text, None))
            if cancel is not None and cancel.is_set():
                turn.finish = "cancelled"
        except StreamCut as cut:
            if text:
                turn.chunks.append(totals.chunk(text, None))
            turn.finish, turn.error = "cut", f"the server closed the stream mid-reply ({cut})"
        turn.timings = totals.timings
        turn.stats = server_stats(totals, time.perf_counter() - t0)
        self._context_used = _context(totals.timings)
        if self.info.speculative and not self.info.spec_types and turn.finish != "cut":
            self.client.read_slots(self.info)
        # The partial reply of a cut stream stays in the conversation, as it was shown.
        self._messages.append({"role": "assistant", "content": turn.text})
        if self.with_baseline and turn.finish in ("eos", "length"):
            try:
                self.baseline(turn)
            except SpecchatError as err:  # the reply stands; the line says why there is no speedup
                turn.stats.baseline_error = err.message
        return turn

    # --- the baseline ---------------------------------------------------------

    def baseline(self, turn: ServerTurn) -> None:
        """Decode `turn` again with speculation off and measure it by the
        server's clock: on this server when it takes speculative.n_max, else
        on the --baseline-server. Sets turn.baseline and the speedup."""
        self.check_baseline()
        client = self.baseline_client or self.client
        body = dict(turn.body, stream=False)
        body.pop("timings_per_token", None)
        if self.baseline_client is None:
            body.update({"speculative.n_max": 0, "speculative.n_min": 0})
        reply = client.complete(body)
        timings = reply.get("timings") or {}
        if not timings.get("predicted_per_second"):
            raise SpecchatError(f"the baseline server at {client.url} sends no timings", hint="use a llama-server")
        if timings.get("draft_n"):
            raise SpecchatError(
                f"the baseline reply from {client.url} still drafted {timings['draft_n']} tokens: speculation "
                "was not off, so no speedup is shown",
                hint="start the baseline server without -md and without --spec-type")
        content = ((reply.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        turn.baseline = {"url": client.url, "same_server": self.baseline_client is None, "timings": timings,
                         "identical": content == turn.text}
        s = turn.stats
        s.baseline_tok_s = float(timings["predicted_per_second"])
        s.speedup = s.tok_s / s.baseline_tok_s if s.tok_s else None
        s.identical = content == turn.text

    def check_baseline(self) -> None:
        """Refuse --baseline, before any work, where speculation cannot be turned off."""
        if self.baseline_client is None and "n_max" not in self.info.knobs:
            raise SpecchatError(
                f"--baseline needs speculation off for one request, and {self.client.url} takes no per-request "
                "speculative settings (its /props lists none)",
                hint="start a second llama-server with the same -m and no -md, and pass --baseline-server URL")
        if self.baseline_client is not None:
            self._check_same_model()

    def _check_same_model(self) -> None:
        other = self.baseline_client.probe()
        keys = ("n_params", "size", "n_vocab", "ftype")
        mine = {k: self.info.meta.get(k) for k in keys}
        theirs = {k: other.meta.get(k) for k in keys}
        if mine != theirs:
            raise SpecchatError(
                f"the baseline server runs another model ({safe_text(other.model)}) than {safe_text(self.info.model)}",
                hint="start it with the same -m file as the speculating server")
        if other.speculative:
            raise SpecchatError(f"the baseline server at {other.url} speculates ({other.spec_types})",
                                hint="start it without -md and without --spec-type")

    def close(self) -> None:
        self.client.close()
        if self.baseline_client is not None:
            self.baseline_client.close()


def _context(timings: dict | None) -> int:
    if not timings:
        return 0
    return int(timings.get("cache_n", 0)) + int(timings.get("prompt_n", 0)) + int(timings.get("predicted_n", 0))


@dataclass
class ServerStats(TurnStats):
    """TurnStats from a server's counters, and what it sent: to_dict() carries
    these too, so the stats line (stats.server_fields) says what is known."""

    source: str = "server"
    timings_sent: bool = False  # the server sent timings at all
    counters: bool = False  # it sent draft_n / draft_n_accepted
    alpha_exact: bool = True  # every chunk brought at most one token, so α counts every verify round
    baseline_error: str = ""  # why --baseline gave no figure


def server_stats(totals: Totals, wall: float) -> ServerStats:
    """A turn's stats from the server's final counters; nothing estimated."""
    s = ServerStats(timings_sent=totals.timings is not None, counters=totals.counters, alpha_exact=totals.exact)
    t = totals.timings or {}
    s.tokens = int(t.get("predicted_n", 0))
    s.t_decode = float(t.get("predicted_ms", 0.0)) / 1000 if t else wall
    s.tok_s = s.spec_tok_s = float(t.get("predicted_per_second", 0.0))
    s.prefill_tokens = int(t.get("prompt_n", 0))
    s.prefill_tok_s = float(t.get("prompt_per_second", 0.0))
    if totals.counters:
        s.drafted, s.accepted = totals.drafted, totals.accepted
        s.acceptance_rate = s.accepted / s.drafted if s.drafted else 0.0
        s.verify_rounds = totals.rounds
        s.plain_steps = max(0, s.tokens - s.accepted - s.verify_rounds)
        if totals.exact and totals.rounds:
            s.alpha = (s.accepted + totals.rounds) / totals.rounds
    return s


def open_server_session(url: str | None, *, pair: str | None = None, target: str | None = None,
                        draft: str | None = None, drafter: str = "auto", k: int | None = None,
                        n_min: int | None = None, p_min: float | None = None, baseline: bool = False,
                        baseline_server: str | None = None, **kwargs) -> ServerSession:
    """A ServerSession from the command line's options, each checked at the edge:
    the server runs its own model and drafter, so the local ones do not apply."""
    from specchat import checks

    if url is None:
        raise SpecchatError("--baseline and --baseline-server need --server URL", code=2,
                            hint="specchat run --server http://127.0.0.1:8080 --baseline \"…\"")
    for flag, value in (("--pair", pair), ("--target", target), ("--draft", draft)):
        if value is not None:
            raise SpecchatError(f"{flag} cannot be used with --server: the server runs its own model", code=2,
                                hint="drop it, or drop --server to run a local pair")
    if baseline_server and not baseline:
        raise SpecchatError("--baseline-server needs --baseline", code=2, hint="add --baseline")
    if drafter not in ("auto", SERVER_DRAFTER, "off"):
        raise SpecchatError(f"--drafter {drafter} cannot run on a server", code=2,
                            hint="with --server the drafter is the server's own, or off where it allows")
    if k is not None:
        checks.k(k)
    if n_min is not None and n_min < 0:
        raise SpecchatError(f"--draft-min {n_min} is out of range: it must be ≥ 0", code=2, hint="0 drafts always")
    if p_min is not None and not 0 <= p_min <= 1:
        raise SpecchatError(f"--draft-p-min {p_min} is out of range: it must be 0 to 1", code=2, hint="0.75 is common")
    session = ServerSession(check_url(url), k=k, n_min=n_min, p_min=p_min, with_baseline=baseline,
                            baseline_url=check_url(baseline_server) if baseline_server else None, **kwargs)
    try:
        session.set_drafter(SERVER_DRAFTER if drafter == "auto" else drafter)
        if baseline:
            session.check_baseline()
    except SpecchatError:
        session.close()
        raise
    return session


class ServerModels:
    """The chat's model source (tui.models.Models' methods) for a server:
    one "pair", the server's model, always there, opened as a ServerSession."""

    remembers_pair = False  # the settings keep the last local pair, never a server
    # F1's legend: what the accepted colour claims on a server.
    legend_note = (": a llama.cpp server's accepted drafts, from the differences of its running totals "
                   "(draft_n_accepted, predicted_n) between streamed chunks; a chunk is coloured only when all "
                   "its tokens were accepted drafts. The server sends no rejected drafts.")

    def __init__(self, url: str, baseline: bool = False, baseline_url: str | None = None, model: str = "") -> None:
        self.url = check_url(url)
        self.baseline = baseline
        self.baseline_url = check_url(baseline_url) if baseline_url else None
        self.name = f"{model or 'server'} @ {urlsplit(self.url).netloc}"

    def pairs(self) -> list:
        from specchat.tui.models import PairInfo

        return [PairInfo(self.name, "the llama.cpp server's model and speculation", True, True)]

    def default_pair(self) -> str:
        return self.name

    def is_pulled(self, name: str) -> bool:
        return name == self.name

    def pull(self, name: str) -> None:
        raise SpecchatError("a server's model is not pulled", hint="the server loads its own model")

    def pull_progress(self, name: str) -> tuple[int, int | None]:
        return 0, None

    def open(self, pair: str, drafter: str, k: int, settings) -> ServerSession:
        session = ServerSession(self.url, sampling=SamplingParams(temp=settings.temperature),
                                system=settings.system_prompt or None, baseline_url=self.baseline_url,
                                with_baseline=self.baseline)
        session.pair = self.name
        if "n_max" in session.info.knobs:
            session.set_k(k)  # the chat's k goes out as speculative.n_max where the server takes it
        if drafter in session.drafter_names():
            session.set_drafter(drafter)
        return session


def chat_models(url: str | None, *, pair: str | None, drafter: str | None, baseline: bool,
                baseline_server: str | None) -> ServerModels | None:
    """The chat's model source for `specchat --server URL`, checked before the
    app starts (an unreachable server is one line, not an app with no model);
    None without --server."""
    if url is None:
        if baseline or baseline_server:
            raise SpecchatError("--baseline and --baseline-server need --server URL", code=2,
                                hint="specchat --server http://127.0.0.1:8080 --baseline")
        return None
    if pair is not None:
        raise SpecchatError("--pair cannot be used with --server: the server runs its own model", code=2,
                            hint="drop it, or drop --server to chat with a local pair")
    if drafter not in (None, "auto", SERVER_DRAFTER, "off"):
        raise SpecchatError(f"--drafter {drafter} cannot run on a server", code=2,
                            hint="with --server the drafter is the server's own, or off where it allows")
    if baseline_server and not baseline:
        raise SpecchatError("--baseline-server needs --baseline", code=2, hint="add --baseline")
    probe = ServerSession(check_url(url), with_baseline=baseline,
                          baseline_url=check_url(baseline_server) if baseline_server else None)
    try:
        if baseline:
            probe.check_baseline()
    finally:
        probe.close()
    return ServerModels(url, baseline=baseline, baseline_url=baseline_server, model=probe.info.model)
