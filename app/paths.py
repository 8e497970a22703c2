"""Where specchat keeps things: models, history, settings.

Paths come from platformdirs. SPECCHAT_HOME moves all of them under one
folder, which is how the tests isolate themselves.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

import platformdirs


def _home() -> Path | None:
    home = os.environ.get("SPECCHAT_HOME")
    return Path(home).expanduser() if home else None


def data_dir() -> Path:
    home = _home()
    return home / "data" if home else Path(platformdirs.user_data_dir("specchat"))


def config_dir() -> Path:
    home = _home()
    return home / "config" if home else Path(platformdirs.user_config_dir("specchat"))


def models_dir() -> Path:
    """The model store. SPECCHAT_MODELS moves only the store (CI shares one)."""
    override = os.environ.get("SPECCHAT_MODELS")
    return Path(override).expanduser() if override else data_dir() / "models"


def history_db() -> Path:
    return data_dir() / "history.sqlite3"


def settings_file() -> Path:
    return config_dir() / "settings.toml"


class NotRegularFile(OSError):
    """What `open_regular` found is a FIFO, a device, a socket or a folder."""


def open_regular(path: Path | str, *, follow_links: bool = False, buffering: int = -1) -> BinaryIO:
    """`path` opened for reading where it is a regular file: the one way
    specchat opens a file it did not just make. Opened without blocking, so
    a FIFO or a device never hangs the open, and checked on the open file,
    not on its name, so nothing can be swapped in between; never through a
    link unless `follow_links`. NotRegularFile where it is no regular file,
    another OSError where it cannot be opened (ELOOP: it is a link)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


class TooBig(ValueError):
    """What `read_regular` found holds more than it was asked to read."""

    def __init__(self, path: Path | str, size: int, limit: int) -> None:
        super().__init__(f"{path} holds {size} bytes, over the limit of {limit}")
        self.size = size
        self.limit = limit


def read_regular(path: Path | str, limit: int, *, follow_links: bool = False) -> bytes:
    """A regular file's bytes, opened as `open_regular` opens it; TooBig
    where it holds more than `limit`, by its size or by what a read finds
    (a file that grows while it is read)."""
    return read_regular_stat(path, limit, follow_links=follow_links)[0]


def read_regular_stat(path: Path | str, limit: int, *, follow_links: bool = False) -> tuple[bytes, os.stat_result]:
    """`read_regular`, with the status of the file it read (taken on the
    open file, so it is that file's, whatever the name points at now)."""
    with open_regular(path, follow_links=follow_links) as f:
        st = os.fstat(f.fileno())
        if st.st_size > limit:
            raise TooBig(path, st.st_size, limit)
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooBig(path, len(data), limit)
    return data, st


def write_atomic(path: Path, text: str) -> None:
    """Write a file whole or not at all: into a new file of its own beside
    `path` (created exclusively, never through a link someone planted
    there), then renamed over `path`. OSError where it cannot."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_bytes(path: Path, data: bytes, like: os.stat_result) -> os.stat_result:
    """Write a file whole or not at all, as write_atomic does, keeping what
    the file it replaces was (`like`: its mode, and its owner where this
    user may set it), and on the disk before it takes the old one's place.
    The new file's stat; OSError where it cannot."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            with contextlib.suppress(OSError):  # only root may give a file to another user
                os.fchown(fd, like.st_uid, like.st_gid)
            os.fchmod(fd, stat.S_IMODE(like.st_mode))
            os.fsync(fd)
            new = os.fstat(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return new


def link_out(path: Path, folder: Path) -> Path | None:
    """Where `path` leads (links resolved) when it lies in `folder` but a
    link takes it out; None where it stays in, or where the path names a
    place outside the folder itself. The one rule for what a file given
    in a folder may be: `--prompts` (bench) and attached files follow it."""
    inside = Path(os.path.abspath(path)).is_relative_to(os.path.abspath(folder))
    target = Path(os.path.realpath(path))
    return target if inside and not target.is_relative_to(os.path.realpath(folder)) else None
