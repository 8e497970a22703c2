"""Helpers for the hostile-input tests: the real `specchat`
process and CLI, a read-only folder even for root, escapes to inject, and
store files to plant or damage."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specchat.cli.main import app as cli_app
from specchat.store import files as store
from specchat.store.catalog import ModelFile

ESCAPES = "\x1b]0;PWNED\x07\x1b[2J"  # retitle the terminal, clear the screen
SHOWN = "␛]0;PWNED␇␛[2J"  # the same, made visible


def specchat(
    *args, env: dict | None = None, timeout: int = 120, input: bytes | None = None, stdin=None
) -> subprocess.CompletedProcess:
    """The real command, in its own process. Arguments may be bytes (not UTF-8);
    `input` is piped to its stdin, or `stdin` is a file (descriptor) to read."""
    return subprocess.run(
        [sys.executable, "-m", "specchat.cli.main", *args],
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        input=input,
        stdin=stdin,
    )


def err_lines(done: subprocess.CompletedProcess) -> list[str]:
    text = done.stderr.decode("utf-8")
    assert "Traceback" not in text, text
    return text.splitlines()


def cli(*args: str):
    return CliRunner().invoke(cli_app, list(args))


@contextmanager
def read_only(folder: Path):
    """Make `folder` unwritable, even for root (chattr +i), or skip."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    else:
        folder.chmod(0o555)
        made = True
    try:
        probe = folder / ".probe"
        try:
            probe.touch()
            probe.unlink()
            made = False
        except OSError:
            pass
        if not made:
            pytest.skip("cannot make a read-only folder here")
        yield folder
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        else:
            folder.chmod(0o755)


def no_controls(text: str) -> bool:
    return not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in text)


# --- markup is never parsed -------------------------------------------------------------


def chat_headless(patch: str, home) -> subprocess.CompletedProcess:
    """`specchat chat` in a real process with a headless driver, SpecchatApp
    patched first by `patch` (code that may use the name SpecchatApp)."""
    code = f"from specchat.tui.app import SpecchatApp\n{patch}from specchat.cli.main import main\nmain()\n"
    env = {**os.environ, "SPECCHAT_HOME": str(home), "TEXTUAL_DRIVER": "textual.drivers.headless_driver:HeadlessDriver"}
    return subprocess.run([sys.executable, "-c", code, "chat"], capture_output=True, env=env, timeout=120)


def put(f: ModelFile, data: bytes, record: bool = True) -> Path:
    """Place a file in the store the way pull does: verified, or (record=False)
    without the record that says so."""
    path = store.file_path(f)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = store.partial_path(path)
    partial.write_bytes(data)
    if record:
        store.install(partial, f, sha256=hashlib.sha256(data).hexdigest(), size=len(data), source="hub")
    else:
        partial.rename(path)
    return path


def flip_a_byte(path: Path, keep_mtime: bool = False) -> None:
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.seek(7)
        b = fh.read(1)
        fh.seek(7)
        fh.write(bytes([b[0] ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
