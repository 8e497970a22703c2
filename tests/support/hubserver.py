"""A loopback HTTP server that speaks the Hugging Face Hub's resolve protocol.

HEAD/GET /{owner}/{repo}/resolve/{revision}/{file} answer as huggingface.co
does for an LFS file: 302 to a CDN URL, with X-Repo-Commit, X-Linked-Etag
(the sha256) and X-Linked-Size. The "CDN" is this same server reached as
`localhost` instead of `127.0.0.1`, so it is another host and must not get
the token. GET /cdn/{id} serves the bytes and honours `Range: bytes=N-`.

Per-file switches make it misbehave: cut the connection after N bytes,
serve other bytes than it announces, or refuse as a gated repo.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Served:
    content: bytes  # what the Hub announces (sha256, size)
    body: bytes | None = None  # what GET sends instead, to test corruption
    cut_after: int | None = None  # close the connection at this byte offset...
    cuts: int = 1  # ...this many times
    gated: bool = False
    ignore_range: bool = False

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)


class _Quiet(ThreadingHTTPServer):
    """A client that hangs up mid-body (pull refusing a file past its size)
    is what some tests ask for: not an error to print. Others still are."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class HubServer:
    def __init__(self) -> None:
        self.files: dict[tuple[str, str, str], Served] = {}
        self.requests: list[Request] = []
        self.token: str | None = None  # a gated repo lets this token through
        self._server = _Quiet(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, repo: str, filename: str, content: bytes, revision: str = "main", **switches) -> Served:
        served = Served(content, **switches)
        self.files[(repo, revision, filename)] = served
        return served

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def gets(self) -> list[Request]:
        return [r for r in self.requests if r.method == "GET"]


def _handler(hub: HubServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def do_GET(self) -> None:
            self._answer(head=False)

        def _answer(self, head: bool) -> None:
            hub.requests.append(Request(self.command, self.path, dict(self.headers)))
            parts = self.path.split("/", 5)
            if self.path.startswith("/cdn/"):
                self._cdn(self.path.removeprefix("/cdn/"), head)
            elif len(parts) == 6 and parts[3] == "resolve":
                _, owner, name, _, revision, filename = parts
                self._resolve(f"{owner}/{name}", revision, filename)
            else:
                self._status(404, "EntryNotFound")

        def _resolve(self, repo: str, revision: str, filename: str) -> None:
            served = hub.files.get((repo, revision, filename))
            if served is None:
                known = any(r == repo for r, _, _ in hub.files)
                # the real Hub: 401 RepoNotFound for an unknown repo, 404 for a missing file
                self._status(404, "EntryNotFound") if known else self._status(401, "RepoNotFound")
                return
            auth = self.headers.get("Authorization")
            if served.gated and auth != f"Bearer {hub.token}":
                self._status(403 if auth else 401, "GatedRepo")
                return
            key = f"{repo}/{revision}/{filename}".replace("/", "~")
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{hub.port}/cdn/{key}")
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{served.sha256}"')
            self.send_header("X-Linked-Size", str(len(served.content)))
            self.send_header("ETag", '"not-the-sha256"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _cdn(self, key: str, head: bool) -> None:
            repo_rev_file = key.replace("~", "/")
            served = next((s for (r, v, f), s in hub.files.items() if f"{r}/{v}/{f}" == repo_rev_file), None)
            if served is None:
                self._status(404, "")
                return
            body = served.body if served.body is not None else served.content
            start = _range_start(self.headers.get("Range"))
            if served.ignore_range or start is None:
                start = 0
                self.send_response(200)
            else:
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            if head:
                return
            end = len(body)
            if served.cut_after is not None and served.cuts > 0 and served.cut_after > start:
                served.cuts -= 1
                end = served.cut_after
                self.close_connection = True
            self.wfile.write(body[start:end])
            self.wfile.flush()

        def _status(self, code: int, error_code: str) -> None:
            self.send_response(code)
            if error_code:
                self.send_header("X-Error-Code", error_code)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


def _range_start(header: str | None) -> int | None:
    if not header or not header.startswith("bytes=") or not header.endswith("-"):
        return None
    return int(header.removeprefix("bytes=").removesuffix("-"))
