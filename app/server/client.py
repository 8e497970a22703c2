"""A llama.cpp server (`llama-server`) as the chat's backend: the HTTP
client, what the server says about itself, and the rule that a server's
answers are untrusted input (counts.py turns its counters into
per-chunk counts; session.py offers ChatSession's surface on top, so
the chat and `specchat run` drive it the same way).

Every answer is read through `Fields`, typed readers that turn a missing
field, a wrong type, a number out of range or a body that is not JSON into
one SpecchatError naming the server, the answer and the field. JSON null
reads as a missing field. Every request is read on a daemon thread
(`Exchange`), so that a silent server never holds the caller: a wait polls
its cancel event, and a cancelled stream's connection is shut at once.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from specchat.errors import SpecchatError
from specchat.server.answers import Fields, answer_list, bad_answer, parse_json
from specchat.server.exchange import Answer, AnswerTooBig, Exchange, Silent
from specchat.textsafe import safe_text

KNOBS = ("n_max", "n_min", "p_min")  # per-request speculative settings, as llama-server names them
SERVER_DRAFTER = "server"  # the drafter name of "whatever the server was started with"
CONNECT_S = 5.0
READ_S = 600.0  # a big model's prefill on a busy server can take minutes: the most a stream may stay silent
ANSWER_S = 60.0  # the most a whole answer about the server (/v1/models, /props, /slots) may take

WRONG_URL_HINT = "--server takes the server's base address, e.g. http://127.0.0.1:8080 (no /v1 path)"


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
    devices: list[dict] | None = None  # /props or /slots: {"name", "description"} of each device; None: none listed

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
        return {
            "url": self.url,
            "model": self.model,
            "n_ctx": self.n_ctx,
            "speculative": self.speculative,
            "spec_types": self.spec_types,
            "knobs": list(self.knobs),
            "build": self.build,
            "devices": self.devices,
        }


def read_devices(doc: Fields) -> list[dict] | None:
    """The devices an answer lists under "devices", by llama.cpp's names
    ({"name": "RPC0", "description": "host:port"} for an RPC worker); None
    where it lists none. llama-server as vendored in llama-cpp-python 0.3.36
    lists none in /props or /slots."""
    listed = doc.nodes("devices")
    if not listed:
        return None
    return [{"name": d.text("name") or "?", "description": d.text("description") or ""} for d in listed]


def check_url(url: str) -> str:
    """The server's base address, checked at the edge: one line for anything
    httpx could not connect to (no scheme, a broken IPv6 bracket, a bad port)."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is not a number from 0 to 65535
        httpx.URL(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except (ValueError, httpx.InvalidURL):
        ok = False
    if not ok:
        raise SpecchatError(
            f"--server {safe_text(shown_url(url))!r} is not an http(s) address",
            code=2,
            hint="give the server's base address, e.g. --server http://127.0.0.1:8080",
        )
    return url.rstrip("/")


def shown_url(url: str) -> str:
    """The address as specchat shows and stores it: a password in it is masked
    (http://user:***@host:8080); the connection alone uses the real one."""
    try:
        parts = urlsplit(url)
        if parts.password is None and parts.username is None:
            return url
        user = f"{parts.username}:***" if parts.password is not None else "***"
        host = parts.netloc.rpartition("@")[2]
        return parts._replace(netloc=f"{user}@{host}").geturl()
    except ValueError:
        return re.sub(r"//[^/@]*@", "//***@", url)


class ServerClient:
    """One kept HTTP connection to a llama-server, with its errors in words.
    `url` is the address as shown (credentials masked: shown_url)."""

    def __init__(self, url: str) -> None:
        real = check_url(url)
        self.url = shown_url(real)
        self.http = httpx.Client(base_url=real, timeout=httpx.Timeout(READ_S, connect=CONNECT_S))

    def close(self) -> None:
        self.http.close()

    def get(self, path: str, *, optional: bool = False) -> object:
        """GET a JSON document; None for an optional one the server does not serve."""
        reply = self._whole("GET", path, None, None, ANSWER_S, path)
        assert reply is not None  # None only once a cancel event is set, and there is none
        status, body = reply
        if optional and status in (404, 501):
            return None
        self._check(status, body, path)
        return parse_json(body, self.url, path)

    def probe(self) -> ServerInfo:
        """Ask the server what it runs; a wrong URL or a dead server fails here."""
        data = Fields(self.get("/v1/models"), self.url, "/v1/models").nodes("data")
        if not data:
            raise SpecchatError(f"{self.url} lists no model at /v1/models", hint=WRONG_URL_HINT)
        first, meta = data[0], data[0].node("meta")
        props_doc = self.get("/props", optional=True)
        props = Fields({} if props_doc is None else props_doc, self.url, "/props")
        settings = props.node("default_generation_settings")
        params = settings.node("params")
        model = first.text("id") or props.text("model_alias") or "?"
        info = ServerInfo(
            url=self.url,
            model=model.rsplit("/", 1)[-1] or model,  # llama-server's id is the file's path
            n_ctx=settings.count("n_ctx") or meta.count("n_ctx"),
            knobs=tuple(k for k in KNOBS if f"speculative.{k}" in params),
            build=props.text("build_info") or "",
            meta=meta.value,
            devices=read_devices(props),
        )
        self.read_slots(info)
        return info

    def read_slots(self, info: ServerInfo) -> None:
        """Whether the server speculates, and how (/slots; its types only once a request has run),
        and its devices where /props did not list them."""
        slots = self.get("/slots", optional=True)
        listed = [] if slots is None else answer_list(slots, self.url, "/slots")
        if listed:
            info.devices = info.devices or read_devices(listed[0])
            info.speculative = bool(listed[0].flag("speculative"))
            types = (listed[0].node("params").text("speculative.types") or "").split(",")
            info.spec_types = ",".join(t for t in types if t and t != "none")  # llama.cpp lists "none" first

    def stream_chat(
        self,
        body: dict,
        cancel: threading.Event | None,
        *,
        max_lines: int | None = None,
        on_idle: Callable[[], object] | None = None,
    ) -> Generator[Fields, None, None]:
        """POST /v1/chat/completions with stream=true; yields each event, read
        through Fields. Returns at once when `cancel` is set (the connection
        shut, so the server stops too), calls `on_idle` while the server is
        silent, and refuses more than `max_lines` lines. Raises StreamCut when
        the stream ends before the server finished."""
        answer = "stream event"
        exchange = Exchange(self.http, "POST", "/v1/chat/completions", body, stream=True)
        done = False
        try:
            lines = self._lines(exchange, cancel, on_idle, answer)
            for n, line in enumerate(lines, 1):
                if max_lines is not None and n > max_lines:
                    raise bad_answer(self.url, "stream", f"more than {max_lines} lines without ending the reply")
                if line.startswith("error:"):
                    raise SpecchatError(f"the server stopped with an error: {_error_text(line[6:])}")
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    return
                event = Fields(parse_json(payload, self.url, answer), self.url, answer)
                if "error" in event:
                    raise SpecchatError(f"the server stopped with an error: {_error_text(event.value['error'])}")
                yield event
        finally:
            exchange.stop(shut=not done)  # after [DONE] the connection is the pool's again
        if not (cancel is not None and cancel.is_set()):
            raise StreamCut("the stream ended without [DONE]")

    def _lines(self, exchange: Exchange, cancel, on_idle, answer: str) -> Iterator[str]:
        """The stream's lines that are not blank, until its end or `cancel`."""
        got = self._next(exchange, cancel, READ_S, on_idle, answer)
        if got[0] is None:
            return
        assert got[0] == "status"  # the answer's status comes first
        status, first = got[1]
        self._check(status, first, "/v1/chat/completions")
        while True:
            got = self._next(exchange, cancel, READ_S, on_idle, answer)
            if got[0] != "line":  # the end, or cancelled
                return
            if got[1].strip():
                yield got[1].strip()

    def complete(self, body: dict, cancel: threading.Event | None = None) -> Fields | None:
        """POST /v1/chat/completions without streaming (for the baseline); None when cancelled."""
        answer = "--baseline reply"
        reply = self._whole("POST", "/v1/chat/completions", body, cancel, READ_S, answer)
        if reply is None:
            return None
        status, data = reply
        self._check(status, data, "/v1/chat/completions")
        return Fields(parse_json(data, self.url, answer), self.url, answer)

    # --- waiting, and errors in words ---------------------------------------------------

    def _whole(
        self, method: str, path: str, body: dict | None, cancel, limit_s: float, answer: str
    ) -> tuple[int, bytes] | None:
        """(status, body) of a request read whole; None when cancelled."""
        exchange = Exchange(self.http, method, path, body, stream=False)
        got: Answer = (None, None)
        try:
            got = self._next(exchange, cancel, limit_s, None, answer)
        finally:
            exchange.stop(shut=got[0] is None)  # shut unless the answer came whole
        if got[0] is None:
            return None
        assert got[0] == "status"  # an answer read whole is its one item
        return got[1]

    def _next(self, exchange: Exchange, cancel, limit_s: float, on_idle, answer: str) -> Answer:
        """The exchange's next item, (None, None) once `cancel` is set; what
        went wrong on the way, in words."""
        try:
            got = exchange.next(cancel, limit_s, on_idle)
        except Silent:
            raise SpecchatError(
                f"the server at {self.url} sent nothing for {limit_s:.0f} s",
                hint="it may be stuck or overloaded; see its log",
            ) from None
        if got[0] != "error":
            return got
        item = got[1]
        if isinstance(item, AnswerTooBig):
            raise bad_answer(self.url, answer, str(item))
        if isinstance(item, (httpx.ConnectError, httpx.ConnectTimeout)) or (
            isinstance(item, httpx.TransportError) and not exchange.started
        ):
            raise self._unreachable(item)
        if isinstance(item, httpx.TransportError):  # the server answered, then the connection broke
            raise StreamCut(safe_text(str(item)) or type(item).__name__)
        raise item

    def _check(self, status: int, body: bytes, path: str) -> None:
        if status < 400:
            return
        if status == 404:
            raise SpecchatError(
                f"{self.url} has no {path} (HTTP 404): it is not a llama.cpp server's base address", hint=WRONG_URL_HINT
            )
        message = _error_text(body.decode("utf-8", "replace"))
        if status == 503:
            raise SpecchatError(
                f"the server is not ready (HTTP 503): {message}",
                hint="it is probably still loading the model; try again in a moment",
            )
        kind = "refused the request" if status < 500 else "failed"
        raise SpecchatError(
            f"the server {kind} (HTTP {status}): {message}", hint="see the server's log for the details"
        )

    def _unreachable(self, err: Exception) -> SpecchatError:
        return SpecchatError(
            f"cannot reach the llama.cpp server at {self.url}: {safe_text(err) or type(err).__name__}",
            hint="start it (llama-server -m MODEL.gguf --port 8080) or check --server",
        )


class StreamCut(Exception):
    """The server's stream ended mid-reply."""


def _error_text(raw: object) -> str:
    """The message of a llama-server error body ({"error": {"message": ...}}), or the raw text."""
    data = raw
    if isinstance(raw, str):
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return safe_text(raw.strip()[:200]) or "no message"
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict):
            message = inner.get("message")
            return safe_text(message[:200] if isinstance(message, str) and message else json.dumps(inner)[:200])
        return safe_text(str(inner)[:200])
    return safe_text(str(data)[:200])
