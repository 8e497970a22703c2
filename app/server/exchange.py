"""One HTTP request to a server, read on a daemon thread (`Exchange`), so
that a silent server never holds the caller: a wait polls its cancel event,
and a cancelled stream's connection is shut at once. Answers and lines have
size limits."""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Iterator
from typing import Literal

import httpx

POLL_S = 0.05  # how often a wait looks at its cancel event
QUEUED_LINES = 4096  # lines read ahead of the caller
MAX_BODY = 8 << 20  # bytes of one answer that is not streamed
MAX_LINE = 1 << 20  # bytes of one streamed line


class Silent(Exception):
    """Nothing came from the server for too long."""


class AnswerTooBig(Exception):
    """An answer or a line beyond the limits."""


# An exchange's items (see Exchange), and (None, None) once the caller cancelled.
Status = tuple[Literal["status"], tuple[int, bytes]]
Answer = Status | tuple[Literal["line"], str] | tuple[Literal["end"], None] | tuple[None, None]
Item = Answer | tuple[Literal["error"], BaseException]


class Exchange:
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
                    self._put("status", (response.status_code, read_whole(response)))
                    return
                self._put("status", (response.status_code, b""))
                for line in stream_lines(response.iter_bytes()):
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

    def next(self, cancel: threading.Event | None, limit_s: float, on_idle=None) -> Item:
        deadline = time.monotonic() + limit_s
        while not (cancel is not None and cancel.is_set()):
            try:
                return self.items.get(timeout=POLL_S)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise Silent() from None
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


def read_whole(response: httpx.Response) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > MAX_BODY:
            raise AnswerTooBig(f"an answer over {MAX_BODY >> 20} MiB")
    return bytes(data)


def stream_lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """The stream's lines, each at most MAX_LINE bytes (UTF-8; a bad byte reads as U+FFFD)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *done, pending = pending.split(b"\n")
        for line in done:
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        if len(pending) > MAX_LINE:
            raise AnswerTooBig(f"a line over {MAX_LINE >> 20} MiB")
    if pending:
        yield pending.decode("utf-8", "replace")
