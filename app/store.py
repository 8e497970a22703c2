"""The model store: where pulled GGUF files live and which of them are ready.

Layout under paths.models_dir() (or an explicit `root`):

    OWNER--REPO/FILE                  the model file, moved here only after it verified
    OWNER--REPO/FILE.verified.json    its verification record: sha256, size, mtime, source
    OWNER--REPO/FILE.partial          a download in progress
    OWNER--REPO/FILE.partial.json     what that partial download expects (for resume)
    OWNER--REPO/FILE.lock             held while one process pulls or deletes the file
    OWNER--REPO@REV/FILE              the same for a revision other than main

A file is ready ("verified") only when it is in place, its record's sha256
matches the catalog's pin where there is one, and its bytes hashed to that
sha256: when the file's size or mtime differ from the record's, it is hashed
again (`check`), and `specchat models --verify` hashes every file whatever
its mtime. A file that two pairs share is stored once, because its place
depends on repo, revision and name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from specchat import paths
from specchat.catalog import Catalog, ModelFile, Pair, load_catalog
from specchat.errors import SpecchatError

try:  # file locks are POSIX-only; elsewhere concurrent pulls are not guarded
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


def store_root(root: Path | None = None) -> Path:
    return Path(root) if root is not None else paths.models_dir()


def file_path(f: ModelFile, root: Path | None = None) -> Path:
    return store_root(root) / f.store_key


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def record_path(path: Path) -> Path:
    return _sibling(path, ".verified.json")


def partial_path(path: Path) -> Path:
    return _sibling(path, ".partial")


def partial_meta_path(path: Path) -> Path:
    return _sibling(path, ".partial.json")


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: dict) -> None:
    """Write atomically: a reader sees the old record or the new one."""
    tmp = _sibling(path, f".{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer
    tmp.write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    os.replace(tmp, path)


def read_record(f: ModelFile, root: Path | None = None) -> dict | None:
    return read_json(record_path(file_path(f, root)))


def sha256_of(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            if on_bytes:
                on_bytes(len(chunk))
    return digest.hexdigest()


def check(f: ModelFile, root: Path | None = None, *, rehash: bool = False,
          on_bytes: Callable[[int], None] | None = None) -> str:
    """What the store holds of `f`: "verified", "damaged" (its bytes no longer
    hash to the sha256 it was pulled with), "unverified" (no usable record)
    or "missing". The bytes are hashed again when the file's size or mtime
    differ from the record's, or always with `rehash`."""
    path = file_path(f, root)
    if not path.is_file():
        return "missing"
    record = read_json(record_path(path))
    if record is None or not isinstance(record.get("sha256"), str):
        return "unverified"
    if f.sha256 and record["sha256"] != f.sha256 or f.size is not None and record.get("size") != f.size:
        return "unverified"  # recorded for other bytes than the catalog pins
    st = path.stat()
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


def install(partial: Path, f: ModelFile, *, sha256: str, size: int, source: str, root: Path | None = None, **extra) -> Path:
    """Move a verified partial download into place and record how it verified.

    The stale record goes first and the new one last, so a crash in between
    leaves a file without a record: not ready, and re-hashed on the next pull.
    """
    path = file_path(f, root)
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


def _inode(path: Path) -> int | None:
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
    lock_path = _sibling(path, ".lock")
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "a") as handle:
            if fcntl is not None:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    raise Busy(f"{f.filename} is being pulled by another specchat",
                               hint="wait for that pull to end (or stop it), then run the command again") from None
            try:
                # `rm` deletes the lock file while holding it: a lock taken on
                # a deleted file guards nothing, so take the new one.
                if _inode(lock_path) == os.fstat(handle.fileno()).st_ino:
                    yield
                    return
            finally:
                if fcntl is not None:
                    fcntl.flock(handle, fcntl.LOCK_UN)


# --- pairs ------------------------------------------------------------------------


def default_pair_name() -> str:
    return load_catalog().default


def pair_ready(pair: Pair, root: Path | None = None) -> bool:
    return all(is_ready(f, root) for _, f in pair.roles())


def resolve_pair(name: str | None = None, root: Path | None = None) -> tuple[Path, Path]:
    """(target path, draft path) of a pulled pair whose bytes check out;
    None means the default pair."""
    pair = load_catalog().get(name)
    for _, f in pair.roles():
        state = check(f, root)
        if state == "damaged":
            raise damaged(f, pair.name, root)
        if state != "verified":
            raise SpecchatError(f"pair '{pair.name}' is not pulled yet", hint=f"specchat pull {pair.name}")
    return file_path(pair.target, root), file_path(pair.draft, root)


def damaged(f: ModelFile, pair: str, root: Path | None = None) -> SpecchatError:
    return SpecchatError(
        f"{file_path(f, root)} does not match the sha256 it was pulled with: the file changed on disk",
        hint=f"run `specchat pull {pair}` to download it again",
    )


def file_state(f: ModelFile, root: Path | None = None) -> dict:
    """What the store holds of one file, for `specchat models`."""
    path = file_path(f, root)
    state = check(f, root)
    record = read_record(f, root) or {}
    partial = partial_path(path)
    if state == "missing" and partial.is_file():
        state = "partial"
    return {
        "repo": f.repo,
        "filename": f.filename,
        "revision": f.revision,
        "path": str(path),
        "state": state,
        "size": f.size or record.get("size"),
        "sha256": f.sha256 or (record.get("sha256") if state == "verified" else None),
        "pinned": f.sha256 is not None,
        "mirror": f.mirror is not None,
        "source": record.get("source") if state == "verified" else None,
        "partial_bytes": partial.stat().st_size if state == "partial" else None,
    }


def pair_status(name: str | None = None, root: Path | None = None) -> list[dict]:
    """Every catalog pair (or just `name`) with what the store holds of it."""
    catalog = load_catalog()
    pairs = [catalog.get(name)] if name else list(catalog.pairs.values())
    return [_pair_entry(pair, catalog, root) for pair in pairs]


def _pair_entry(pair: Pair, catalog: Catalog, root: Path | None) -> dict:
    files = {role: file_state(f, root) for role, f in pair.roles()}
    return {
        "name": pair.name,
        "default": pair.name == catalog.default,
        "description": pair.description,
        "note": pair.note,
        "custom": pair.custom,
        "same_file": pair.same_file,
        "ready": all(f["state"] == "verified" for f in files.values()),
        "target": files["target"],
        "draft": files["draft"],
    }


def remove_pair(name: str, root: Path | None = None) -> dict:
    """Delete a pair's files that no other pulled pair uses (see remove_pairs)."""
    return remove_pairs([name], root)


def remove_pairs(names: list[str], root: Path | None = None) -> dict:
    """Delete these pairs' files that no pulled pair outside them uses, so
    pairs that share their files go together. Each file is deleted under its
    lock: never while a pull writes it (that raises Busy).

    Returns {"pair": the first name, "pairs": [names], "removed": [paths],
    "kept": {path: [pairs that still use it]}}.
    """
    catalog = load_catalog()
    pairs = [catalog.get(n) for n in dict.fromkeys(names)]
    chosen = {p.name for p in pairs}
    others = [p for p in catalog.pairs.values() if p.name not in chosen and pair_ready(p, root)]
    removed: list[str] = []
    kept: dict[str, list[str]] = {}
    for f in {f.store_key: f for p in pairs for _, f in p.roles()}.values():
        path = file_path(f, root)
        users = [p.name for p in others if f.store_key in {g.store_key for _, g in p.roles()}]
        if users:
            kept[str(path)] = users
        elif path.parent.is_dir() and _delete_file(f, root):
            removed.append(str(path))
    return {"pair": pairs[0].name, "pairs": [p.name for p in pairs], "removed": removed, "kept": kept}


def _delete_file(f: ModelFile, root: Path | None) -> bool:
    """Remove a file and everything the store keeps beside it, holding its lock."""
    path = file_path(f, root)
    existed = False
    try:
        with lock(f, root, wait=False):
            for p in (path, record_path(path), partial_path(path), partial_meta_path(path), _sibling(path, ".lock")):
                if p.exists():
                    existed = existed or p == path or p == partial_path(path)
                    p.unlink()
    except PermissionError as err:
        raise SpecchatError(
            f"cannot delete {path}: the model store is read-only ({err.strerror})",
            hint=f"fix the permissions of {path.parent}, or run rm as the user who pulled it",
        ) from None
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only when empty
    return existed
