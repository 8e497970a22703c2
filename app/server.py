"""A llama.cpp server (`llama-server`) as the chat's backend: the HTTP
client and what the server says about itself (server_counts.py turns its
counters into per-chunk counts; server_session.py offers ChatSession's
surface on top, so the chat and `specchat run` drive it the same way).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Iterator
from urllib.parse import urlsplit

import httpx
from specchat.errors import SpecchatError
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
