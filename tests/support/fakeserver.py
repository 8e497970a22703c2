"""A fake llama.cpp server on loopback that answers what a test scripts: well-formed documents, or hostile ones."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


def good_docs() -> dict:
    """What a llama-server with a draft model says, as it says it: "Hello world"
    in four chunks, one verify round that drafted 4 and had 2 accepted."""
    pieces = [("Hel", 1, 0, 0), ("lo", 2, 4, 2), (" wor", 3, 4, 2), ("ld", 4, 4, 2)]
    events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}]}]
    events += [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}], "timings": timings(*c)}
        for text, *c in pieces
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "timings": timings(4, 4, 2)})
    events.append({"choices": [], "usage": {"completion_tokens": 4}, "timings": timings(4, 4, 2)})
    params = {"speculative.n_max": 16, "speculative.n_min": 0, "speculative.p_min": 0.75}
    return {
        "/v1/models": {
            "object": "list",
            "data": [{"id": "/models/tiny.gguf", "meta": {"n_ctx_train": 8192, "n_params": 1000, "n_vocab": 99}}],
        },
        "/props": {
            "default_generation_settings": {"n_ctx": 4096, "params": params},
            "model_alias": "tiny",
            "build_info": "b1-test",
        },
        "/slots": [{"id": 0, "speculative": True, "params": {"speculative.types": "none,draft-simple"}}],
        "stream": events,
        "baseline": {
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "Hello world"}, "finish_reason": "stop"}
            ],
            "timings": {**TIMINGS, "predicted_n": 4, "predicted_ms": 80.0, "predicted_per_second": 50.0},
        },
    }


def encode(doc) -> bytes:
    return doc if isinstance(doc, bytes) else json.dumps(doc).encode()


def sse(events: list) -> bytes:
    """Each event as a `data:` line; an event that is bytes is the line itself."""
    lines = [e if isinstance(e, bytes) else b"data: " + encode(e) for e in events]
    return b"".join(line + b"\n\n" for line in lines) + b"data: [DONE]\n\n"


class Handler(BaseHTTPRequestHandler):
    server: Hostile

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        docs = self.server.docs
        path = self.path.split("?")[0]
        if path == "/v1/chat/completions":
            if callable(docs.get("stream")) and body.get("stream"):
                return docs["stream"](self)
            doc, kind = (
                (sse(docs["stream"]), "text/event-stream")
                if body.get("stream")
                else (encode(docs["baseline"]), "application/json")
            )
        elif path in docs:
            doc, kind = encode(docs[path]), "application/json"
        else:
            doc, kind = b'{"error": {"message": "not found"}}', "application/json"
        self.send_response(200 if path in docs or path == "/v1/chat/completions" else 404)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(doc)))
        self.end_headers()
        self.wfile.write(doc)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


class Hostile(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, docs: dict) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.docs = docs
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def serve():
    servers = []

    def start(docs: dict) -> str:
        servers.append(Hostile(docs))
        return servers[-1].url

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


TIMINGS = {"cache_n": 0, "prompt_n": 5, "prompt_ms": 5.0, "prompt_per_second": 1000.0}


def timings(predicted: int, drafted: int, accepted: int) -> dict:
    return {
        **TIMINGS,
        "predicted_n": predicted,
        "predicted_ms": 10.0 * predicted,
        "predicted_per_second": 100.0,
        "draft_n": drafted,
        "draft_n_accepted": accepted,
    }
