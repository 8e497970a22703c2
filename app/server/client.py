"""A llama.cpp server (`llama-server`) as the chat's backend: the HTTP
client, what the server says about itself, and the rule that a server's
answers are untrusted input (counts.py turns its counters into
per-chunk counts; session.py offers ChatSession's surface on top, so
the chat and `specchat run` drive it the same way).

Every answer is read through `Fields`, typed readers that turn a missing
field, a wrong type, a number out of range or a body that is not JSON into
one SpecchatError naming the server, the answer and the field. JSON null
reads as a missing field. Every request is read on a daemon thread
(`_Exchange`), so that a silent server never holds the caller: a wait polls
its cancel event, and a cancelled stream's connection is shut at once.
"""

from __future__ import annotations

import json
import math
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

import httpx

from specchat.errors import SpecchatError
from specchat.textsafe import safe_text

KNOBS = ("n_max", "n_min", "p_min")  # per-request speculative settings, as llama-server names them
SERVER_DRAFTER = "server"  # the drafter name of "whatever the server was started with"
CONNECT_S = 5.0
READ_S = 600.0  # a big model's prefill on a busy server can take minutes: the most a stream may stay silent
ANSWER_S = 60.0  # the most a whole answer about the server (/v1/models, /props, /slots) may take
POLL_S = 0.05  # how often a wait looks at its cancel event
QUEUED_LINES = 4096  # lines read ahead of the caller
MAX_BODY = 8 << 20  # bytes of one answer that is not streamed
MAX_LINE = 1 << 20  # bytes of one streamed line
MAX_COUNT = 2**31 - 1  # llama.cpp's counters are 32-bit
MAX_NUMBER = 1e12  # a rate or a time in ms beyond this is not a measurement
TEXT_LIMIT = 200  # characters kept of a name the server gives (its model, its build)

WRONG_URL_HINT = "--server takes the server's base address, e.g. http://127.0.0.1:8080 (no /v1 path)"
BAD_ANSWER_HINT = "is --server a llama.cpp server (llama-server)? its answers cannot be trusted; see its log"


# --- reading a server's answers -------------------------------------------------------------


def bad_answer(server: str, answer: str, what: str) -> SpecchatError:
    """One line about an answer specchat cannot take: the server, which answer, what was wrong."""
    return SpecchatError(f"the server at {server} sent a bad {answer}: {what}", hint=BAD_ANSWER_HINT)


def inconsistent(server: str, what: str) -> SpecchatError:
    """Counters that parse but cannot be true: refused, never shown."""
    return SpecchatError(
        f"the server's counters are inconsistent: {what} (the server at {server})",
        hint="no figures are shown from counters that contradict each other; see the server's log",
    )


def _shown(value: object) -> str:
    """A JSON value in a few words, for an error line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 24 else f"a {len(text)}-digit number"
    if isinstance(value, str):
        return json.dumps(safe_text(value[:40]) + ("…" if len(value) > 40 else ""), ensure_ascii=False)
    return "a list" if isinstance(value, list) else "an object"


def parse_json(data: bytes | str, server: str, answer: str) -> object:
    """A JSON document, with every number finite (Python's json takes NaN,
    Infinity and 1e309, which no measurement is)."""

    def finite(text: str) -> float:
        number = float(text)
        if not math.isfinite(number):
            raise ValueError(f"the number {text[:24]} is out of range")
        return number

    def refuse(name: str) -> float:
        raise ValueError(f"{name} is not a number")

    try:
        return json.loads(data, parse_float=finite, parse_constant=refuse)
    except RecursionError:
        raise bad_answer(server, answer, "JSON nested too deep to read") from None
    except ValueError as err:  # not JSON, not UTF-8, a number out of range, an integer of 4,300 digits
        raise bad_answer(server, answer, f"not JSON ({safe_text(str(err))[:120]})") from None


class Fields:
    """Typed reads of one JSON object in a server's answer. A read that
    fails names the server, the answer and the field's path; null and a
    missing field read as None."""

    def __init__(self, value: object, server: str, answer: str, path: str = "the answer") -> None:
        self.server, self.answer, self.path = server, answer, path
        if not isinstance(value, dict):
            raise bad_answer(server, answer, f"{path} is {_shown(value)}, not an object")
        self.value = value

    def _name(self, key: str) -> str:
        return key if self.path == "the answer" else f"{self.path}.{key}"

    def _wrong(self, key: str, value: object, kind: str) -> SpecchatError:
        return bad_answer(self.server, self.answer, f"{self._name(key)} is {_shown(value)}, not {kind}")

    def __contains__(self, key: str) -> bool:
        return self.value.get(key) is not None

    def node(self, key: str) -> Fields:
        """An object field; an empty one where it is missing."""
        value = self.value.get(key)
        return Fields({} if value is None else value, self.server, self.answer, self._name(key))

    def maybe_node(self, key: str) -> Fields | None:
        return self.node(key) if key in self else None

    def nodes(self, key: str) -> list[Fields]:
        """A list of objects; an empty one where it is missing."""
        value = self.value.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(key, value, "a list")
        return [Fields(item, self.server, self.answer, f"{self._name(key)}[{i}]") for i, item in enumerate(value)]

    def count(self, key: str) -> int | None:
        """A whole number from 0 to MAX_COUNT; None where it is missing."""
        value = self.value.get(key)
        whole = int(value) if isinstance(value, float) and value.is_integer() else value
        if whole is None or (isinstance(whole, int) and not isinstance(whole, bool) and 0 <= whole <= MAX_COUNT):
            return whole
        raise self._wrong(key, value, f"a count from 0 to {MAX_COUNT}")

    def count_or(self, key: str, default: int) -> int:
        found = self.count(key)
        return default if found is None else found

    def number(self, key: str) -> float | None:
        """A finite number from 0 to MAX_NUMBER (a rate, a time); None where it is missing."""
        value = self.value.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_NUMBER:
            raise self._wrong(key, value, f"a number from 0 to {MAX_NUMBER:.0e}")
        return float(value)

    def text(self, key: str, limit: int | None = TEXT_LIMIT) -> str | None:
        """A string, cut to `limit` characters (None: whole)."""
        value = self.value.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._wrong(key, value, "a string")
        return value if limit is None or len(value) <= limit else value[:limit] + "…"

    def flag(self, key: str) -> bool | None:
        value = self.value.get(key)
        if value is not None and not isinstance(value, bool):
            raise self._wrong(key, value, "true or false")
        return value


def answer_list(value: object, server: str, answer: str) -> list[Fields]:
    """A whole answer that is a list of objects."""
    if not isinstance(value, list):
        raise bad_answer(server, answer, f"the answer is {_shown(value)}, not a list")
    return [Fields(item, server, answer, f"item {i}") for i, item in enumerate(value)]


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
        exchange = _Exchange(self.http, "POST", "/v1/chat/completions", body, stream=True)
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

    def _lines(self, exchange: _Exchange, cancel, on_idle, answer: str) -> Iterator[str]:
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
        exchange = _Exchange(self.http, method, path, body, stream=False)
        got: _Answer = (None, None)
        try:
            got = self._next(exchange, cancel, limit_s, None, answer)
        finally:
            exchange.stop(shut=got[0] is None)  # shut unless the answer came whole
        if got[0] is None:
            return None
        assert got[0] == "status"  # an answer read whole is its one item
        return got[1]

    def _next(self, exchange: _Exchange, cancel, limit_s: float, on_idle, answer: str) -> _Answer:
        """The exchange's next item, (None, None) once `cancel` is set; what
        went wrong on the way, in words."""
        try:
            got = exchange.next(cancel, limit_s, on_idle)
        except _Silent:
            raise SpecchatError(
                f"the server at {self.url} sent nothing for {limit_s:.0f} s",
                hint="it may be stuck or overloaded; see its log",
            ) from None
        if got[0] != "error":
            return got
        item = got[1]
        if isinstance(item, _TooBig):
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


class _Silent(Exception):
    """Nothing came from the server for too long."""


class _TooBig(Exception):
    """An answer or a line beyond the limits."""


# An exchange's items (see _Exchange), and (None, None) once the caller cancelled.
_Status = tuple[Literal["status"], tuple[int, bytes]]
_Answer = _Status | tuple[Literal["line"], str] | tuple[Literal["end"], None] | tuple[None, None]
_Item = _Answer | tuple[Literal["error"], BaseException]


class _Exchange:
    """One request, read on a daemon thread: the caller waits on a queue it
    can stop waiting on (its cancel event, a deadline), and stop() shuts the
    connection, so a server that goes silent holds neither the caller nor,
    at exit, the process. The queue carries ("status", (status, body)) where
    body is the whole answer, or the first bytes of an error; then, for a
    stream, ("line", text)… and ("end", None); or ("error", exception)."""

    def __init__(self, http: httpx.Client, method: str, path: str, body: dict | None, *, stream: bool) -> None:
        self.items: queue.Queue = queue.Queue(maxsize=QUEUED_LINES)
        self.stopped = threading.Event()
        self.response: httpx.Response | None = None
        self.started = False  # the server has answered (its status line came)
        threading.Thread(
            target=self._read, args=(http, method, path, body, stream), daemon=True, name="specchat-server-read"
        ).start()

    def _read(self, http: httpx.Client, method: str, path: str, body: dict | None, stream: bool) -> None:
        try:
            with http.stream(method, path, json=body) as response:
                self.response, self.started = response, True
                if self.stopped.is_set():
                    return
                if not stream or response.status_code >= 400:
                    self._put("status", (response.status_code, _read_whole(response)))
                    return
                self._put("status", (response.status_code, b""))
                for line in _lines(response.iter_bytes()):
                    if not self._put("line", line):
                        return
            self._put("end", None)
        except BaseException as err:  # noqa: BLE001 - handed to the caller, who words it
            self._put("error", err)

    def _put(self, kind: str, item: object) -> bool:
        """Queue an item for the caller; False once it stopped listening."""
        while not self.stopped.is_set():
            try:
                self.items.put((kind, item), timeout=POLL_S)
                return True
            except queue.Full:
                pass
        return False

    def next(self, cancel: threading.Event | None, limit_s: float, on_idle=None) -> _Item:
        deadline = time.monotonic() + limit_s
        while not (cancel is not None and cancel.is_set()):
            try:
                return self.items.get(timeout=POLL_S)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise _Silent() from None
                if on_idle is not None:
                    on_idle()
        return None, None

    def stop(self, shut: bool = True) -> None:
        """Stop reading; with `shut`, shut the connection too, where the read
        may still be waiting on it (so the server stops sending)."""
        self.stopped.set()
        response = self.response
        if not shut or response is None:
            return
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None and not response.is_closed:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _read_whole(response: httpx.Response) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > MAX_BODY:
            raise _TooBig(f"an answer over {MAX_BODY >> 20} MiB")
    return bytes(data)


def _lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """The stream's lines, each at most MAX_LINE bytes (UTF-8; a bad byte reads as U+FFFD)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *done, pending = pending.split(b"\n")
        for line in done:
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        if len(pending) > MAX_LINE:
            raise _TooBig(f"a line over {MAX_LINE >> 20} MiB")
    if pending:
        yield pending.decode("utf-8", "replace")


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
