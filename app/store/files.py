"""The model store: where pulled GGUF files live and which of them are ready.

Layout under paths.models_dir() (or an explicit `root`):

    OWNER--REPO/FILE                  the model file, moved here only after it verified
    OWNER--REPO/FILE.verified.json    its verification record: sha256, size, mtime, source
    OWNER--REPO/FILE.partial          a download in progress
    OWNER--REPO/FILE.partial.json     what that partial download expects (for resume)
    OWNER--REPO/FILE.lock             held while one process pulls or deletes the file
    OWNER--REPO@REV/FILE              the same for a revision other than main
    .tmp/pip-*/                       a PyPI-mirror download in progress (`scratch`)

The store writes, reads and deletes only files and folders it made itself.
It never follows a link below its root: a link, a folder or a pipe where
one of its files should be, or a link where one of its folders should be,
is never written through, read through or called verified ("foreign"). A
stale link among its own files is removed (the link, never what it points
to); a folder or other file it did not make is refused, naming it. A
download lands only in a file created here, new (`open_partial`), and moves
into place by rename.

A file is ready ("verified") only when it is in place, its record's sha256
matches the catalog's pin where there is one, and its bytes hashed to that
sha256: when the file's size or mtime differ from the record's, it is hashed
again (`check`), and `specchat models --verify` hashes every file whatever
its mtime. A file that two pairs share is stored once, because its place
depends on repo, revision and name.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

from specchat import paths
from specchat.errors import SpecchatError
from specchat.store.catalog import ModelFile

try:  # file locks are POSIX-only; elsewhere concurrent pulls are not guarded
    import fcntl as _fcntl

    fcntl: ModuleType | None = _fcntl
except ImportError:  # pragma: no cover
    fcntl = None


def store_root(root: Path | None = None) -> Path:
    return Path(root) if root is not None else paths.models_dir()


def file_path(f: ModelFile, root: Path | None = None) -> Path:
    return store_root(root) / f.store_key


def sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def record_path(path: Path) -> Path:
    return sibling(path, ".verified.json")


def partial_path(path: Path) -> Path:
    return sibling(path, ".partial")


def partial_meta_path(path: Path) -> Path:
    return sibling(path, ".partial.json")


def read_json(path: Path) -> dict | None:
    try:
        with paths.open_regular(path) as src:
            data = json.loads(src.read().decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: a file nested past any parser
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict) -> None:
    """Write atomically: a reader sees the old record or the new one. The
    record is written into a new file of its own, then renamed over `path`
    (which replaces a link there instead of following it): paths.write_atomic."""
    paths.write_atomic(path, json.dumps(data, indent=2) + "\n")


def read_record(f: ModelFile, root: Path | None = None) -> dict | None:
    return read_json(record_path(file_path(f, root)))


def sha256_of(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """A store file's sha256 (never through a link)."""
    with paths.open_regular(path) as src:
        return digest_of(src, on_bytes)


def digest_of(src: BinaryIO, on_bytes: Callable[[int], None] | None = None) -> str:
    """The sha256 of what `src` holds, read 1 MiB at a time; `on_bytes` hears of each read."""
    digest = hashlib.sha256()
    while chunk := src.read(1 << 20):
        digest.update(chunk)
        if on_bytes:
            on_bytes(len(chunk))
    return digest.hexdigest()


def check(
    f: ModelFile, root: Path | None = None, *, rehash: bool = False, on_bytes: Callable[[int], None] | None = None
) -> str:
    """What the store holds of `f`: "verified", "damaged" (its bytes no longer
    hash to the sha256 it was pulled with), "unverified" (no usable record),
    "foreign" (a link, a folder or the like, not a file the store made) or
    "missing". The bytes are hashed again when the file's size or mtime
    differ from the record's, or always with `rehash`."""
    path = file_path(f, root)
    st = lstat(path)
    if st is None:
        return "missing"
    if not stat.S_ISREG(st.st_mode) or not _folders_are_own(path, root):
        return "foreign"
    record = read_json(record_path(path))
    if record is None or not isinstance(record.get("sha256"), str):
        return "unverified"
    if f.sha256 and record["sha256"] != f.sha256 or f.size is not None and record.get("size") != f.size:
        return "unverified"  # recorded for other bytes than the catalog pins
    if st.st_size != record.get("size"):
        return "damaged"
    if not rehash and record.get("mtime_ns") == st.st_mtime_ns:
        return "damaged" if record.get("damaged_sha256") else "verified"
    digest = sha256_of(path, on_bytes)
    record.update(mtime_ns=st.st_mtime_ns, damaged_sha256=None if digest == record["sha256"] else digest)
    with contextlib.suppress(OSError):  # a read-only store: hashed again next time
        write_json(record_path(path), record)
    return "damaged" if record["damaged_sha256"] else "verified"


def is_ready(f: ModelFile, root: Path | None = None) -> bool:
    return check(f, root) == "verified"


def install(
    partial: Path, f: ModelFile, *, sha256: str, size: int, source: str, root: Path | None = None, **extra
) -> Path:
    """Move a verified partial download into place and record how it verified.

    The stale record goes first and the new one last, so a crash in between
    leaves a file without a record: not ready, and re-hashed on the next pull.
    """
    path = file_path(f, root)
    if not stat.S_ISREG(os.lstat(partial).st_mode):
        raise _not_ours(partial, "a link or the like")  # a download lands only in a file of the store's own
    record_path(path).unlink(missing_ok=True)
    os.replace(partial, path)
    partial_meta_path(path).unlink(missing_ok=True)
    record = {
        "sha256": sha256,
        "size": size,
        "mtime_ns": path.stat().st_mtime_ns,  # hashed at this mtime; another one means hash again
        "source": source,
        "repo": f.repo,
        "filename": f.filename,
        "revision": f.revision,
        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **extra,
    }
    write_json(record_path(path), record)
    return path


def inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


class Busy(SpecchatError):
    """Another process holds a file's lock (a pull under way)."""


@contextlib.contextmanager
def lock(f: ModelFile, root: Path | None = None, wait: bool = True) -> Iterator[None]:
    """Hold the file's lock, so two pulls of one file never share a partial
    and `rm` never deletes a file while a pull writes it. With wait=False a
    held lock raises Busy at once."""
    path = file_path(f, root)
    lock_path = sibling(path, ".lock")
    while True:
        make_folder(f, root)
        with _open_lock(lock_path) as handle:
            if fcntl is not None:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    raise Busy(
                        f"{f.filename} is being pulled by another specchat",
                        hint="wait for that pull to end (or stop it), then run the command again",
                    ) from None
            try:
                # `rm` deletes the lock file while holding it: a lock taken on
                # a deleted file guards nothing, so take the new one.
                if inode(lock_path) == os.fstat(handle.fileno()).st_ino:
                    yield
                    return
            finally:
                if fcntl is not None:
                    fcntl.flock(handle, fcntl.LOCK_UN)


def _open_lock(path: Path) -> BinaryIO:
    """The lock file, made here if need be; a link there is removed, not followed."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as err:
            if err.errno != errno.ELOOP and not isinstance(err, IsADirectoryError):
                raise
            remove_stray(path)  # a link goes; a folder is refused
            continue
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return os.fdopen(fd, "r+b")
        os.close(fd)
        remove_stray(path)  # a pipe or the like


# --- the store's own files and folders ----------------------------------------------------


def lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _not_ours(path: Path, what: str) -> SpecchatError:
    return SpecchatError(
        f"{path} is {what}, not a file the store made; specchat does not delete it",
        hint="move it out of the model store, then run the command again",
    )


def _linked_folder(folder: Path) -> SpecchatError:
    return SpecchatError(
        f"{folder} is a link, not a folder of the model store; specchat writes and deletes only inside folders it made",
        hint=f"delete the link (rm {folder}; what it points to stays), then run the command again",
    )


def store_folders(path: Path, root: Path | None) -> list[Path]:
    """The store's own folders on the way from its root to `path`, outermost first."""
    base = store_root(root)
    parts = path.relative_to(base).parts
    return [base.joinpath(*parts[:n]) for n in range(1, len(parts))]


def _folders_are_own(path: Path, root: Path | None) -> bool:
    """Every folder between the store's root and `path` is a real folder, not a link."""
    return all((st := lstat(d)) is not None and stat.S_ISDIR(st.st_mode) for d in store_folders(path, root))


def make_folder(f: ModelFile, root: Path | None = None) -> Path:
    """The folder that holds `f`, made where missing. The root is where the
    user put the store, links and all; below it a link or a file where a
    folder should be is refused."""
    base = store_root(root)
    try:
        base.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in (base, *base.parents) if p.exists() and not p.is_dir()), base)
        raise SpecchatError(
            f"cannot make the model store in {base}: {blocker} is a file, not a folder",
            hint="point SPECCHAT_HOME (or SPECCHAT_MODELS) at a folder",
        ) from None
    path = file_path(f, root)
    for folder in store_folders(path, root):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
        check_folder(folder)
    return path.parent


def check_folder(folder: Path) -> None:
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode):
        raise _linked_folder(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise SpecchatError(
            f"{folder} is a file, not a folder of the model store; specchat does not delete it",
            hint="move it out of the model store, then run the command again",
        )


def remove_stray(path: Path) -> None:
    """Clear one of the store's names for a file it is about to make: a file,
    a link (never what it points to) or a pipe there goes; a folder, which
    may hold someone's files, is refused, never deleted."""
    st = lstat(path)
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        raise _not_ours(path, "a folder")
    os.unlink(path)


def clear_strays(f: ModelFile, root: Path | None = None) -> None:
    """Before a pull, holding the file's lock: links among the file's names
    go, and so do the pip folders older specchat left beside it; a folder or
    the like where one of its files should be is refused (see remove_stray)."""
    path = file_path(f, root)
    for name in (path, record_path(path), partial_path(path), partial_meta_path(path)):
        st = lstat(name)
        if st is not None and not stat.S_ISREG(st.st_mode):
            remove_stray(name)
    clean_legacy_scratch(path.parent)


def resumable_size(partial: Path) -> int:
    """How many bytes of a partial download can be resumed: 0 unless it is a
    file of the store's own (a regular file with no other name)."""
    st = lstat(partial)
    return st.st_size if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1 else 0


def open_partial(partial: Path, resume: bool = False) -> BinaryIO:
    """The partial download, open for reading and writing. With `resume`, the
    file already there if the store made it (a regular file with no other
    name); otherwise a new file, made here and now (O_EXCL: no link, no file
    that someone else holds, is ever written into). The caller seeks."""
    if resume:
        try:
            fd = os.open(partial, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            fd = -1
        if fd >= 0:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                return os.fdopen(fd, "r+b")
            os.close(fd)
    remove_stray(partial)
    return os.fdopen(os.open(partial, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "r+b")


def clean_legacy_scratch(folder: Path) -> None:
    """Older specchat kept its pip folders (.pip-*) beside the file; the
    caller holds the file's lock."""
    for entry in os.scandir(folder):
        if entry.name.startswith(".pip-") and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)


# --- errors ------------------------------------------------------


def read_only(err: OSError) -> bool:
    """The store cannot be written: permissions, or a read-only disk."""
    return isinstance(err, PermissionError) or err.errno == errno.EROFS
