"""Scratch folders in the model store for the PyPI mirror's downloads:
each locked while a pull uses it and removed after; what a pull that died
left is cleared by the next pull or rm."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from specchat.store.files import check_folder, fcntl, inode, lstat, store_root

TEMP = ".tmp"  # no catalog folder starts with a dot


@contextlib.contextmanager
def scratch(root: Path | None = None) -> Iterator[Path]:
    """A new folder in the store's temp area, locked while in use and removed
    after, even on failure. One left by a process that died is removed by
    the next `clean_scratch` (every pull and rm)."""
    base = store_root(root) / TEMP
    base.mkdir(parents=True, exist_ok=True)
    check_folder(base)
    while True:
        folder = Path(tempfile.mkdtemp(prefix="pip-", dir=base))
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            if inode(folder) != os.fstat(fd).st_ino:
                continue  # a cleaner took it before we locked it: make another
            try:
                yield folder
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            return
        finally:
            os.close(fd)


def clean_scratch(root: Path | None = None) -> None:
    """Remove what pulls that died left in the temp area: every folder there
    that no running pull holds, and anything else there."""
    base = store_root(root) / TEMP
    st = lstat(base)
    if st is None or fcntl is None:  # without locks a folder in use cannot be told apart
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(base)  # a link or a file: the temp area is the store's own name
        return
    for entry in os.scandir(base):
        with contextlib.suppress(FileNotFoundError):  # another pull cleaned it first
            if entry.is_dir(follow_symlinks=False):
                _remove_unheld(entry.path)
            else:
                os.unlink(entry.path)


def _remove_unheld(folder: str) -> None:
    """Remove a scratch folder unless a running pull holds its lock."""
    assert fcntl is not None  # clean_scratch comes here only where folders can be locked
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        shutil.rmtree(folder, ignore_errors=True)  # scratch() checks, once locked, that its folder is still there
    except BlockingIOError:
        pass  # a pull under way holds it
    finally:
        os.close(fd)
