"""The model store: where pulled GGUF files live and which of them are ready.

Layout under paths.models_dir() (or an explicit `root`):

    OWNER--REPO/FILE                  the model file, moved here only after it verified
    OWNER--REPO/FILE.verified.json    its verification record: sha256, size, source
    OWNER--REPO/FILE.partial          a download in progress
    OWNER--REPO/FILE.partial.json     what that partial download expects (for resume)
    OWNER--REPO/FILE.lock             held while one process pulls the file

A file is ready only when it is in place, its record matches its size, and
the record's sha256 matches the catalog's pin where there is one. A file that
two pairs share is stored once, because its place depends on repo and name.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Iterator

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
    tmp = _sibling(path, ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    os.replace(tmp, path)


def read_record(f: ModelFile, root: Path | None = None) -> dict | None:
    return read_json(record_path(file_path(f, root)))


def is_ready(f: ModelFile, root: Path | None = None) -> bool:
    path = file_path(f, root)
    record = read_json(record_path(path))
    if record is None or not path.is_file():
        return False
    if record.get("size") != path.stat().st_size:
        return False
    if f.sha256 and record.get("sha256") != f.sha256:
        return False
    return f.size is None or f.size == record["size"]


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
        "source": source,
        "repo": f.repo,
        "filename": f.filename,
        "revision": f.revision,
        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **extra,
    }
    write_json(record_path(path), record)
    return path


@contextlib.contextmanager
def lock(f: ModelFile, root: Path | None = None) -> Iterator[None]:
    """Hold the file's lock, so two pulls of one file never share a partial."""
    path = file_path(f, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(_sibling(path, ".lock"), "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


# --- pairs ------------------------------------------------------------------------


def default_pair_name() -> str:
    return load_catalog().default


def pair_ready(pair: Pair, root: Path | None = None) -> bool:
    return all(is_ready(f, root) for _, f in pair.roles())


def resolve_pair(name: str | None = None, root: Path | None = None) -> tuple[Path, Path]:
    """(target path, draft path) of a pulled pair; None means the default pair."""
    pair = load_catalog().get(name)
    if not pair_ready(pair, root):
        raise SpecchatError(f"pair '{pair.name}' is not pulled yet", hint=f"specchat pull {pair.name}")
    return file_path(pair.target, root), file_path(pair.draft, root)


def file_state(f: ModelFile, root: Path | None = None) -> dict:
    """What the store holds of one file, for `specchat models`."""
    path = file_path(f, root)
    record = read_record(f, root) or {}
    partial = partial_path(path)
    if is_ready(f, root):
        state = "verified"
    elif path.is_file():
        state = "unverified"
    elif partial.is_file():
        state = "partial"
    else:
        state = "missing"
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
    """Delete a pair's files that no other pulled pair uses.

    Returns {"removed": [paths], "kept": {path: [pairs that still use it]}}.
    """
    catalog = load_catalog()
    pair = catalog.get(name)
    others = [p for p in catalog.pairs.values() if p.name != pair.name and pair_ready(p, root)]
    removed: list[str] = []
    kept: dict[str, list[str]] = {}
    for f in {f.store_key: f for _, f in pair.roles()}.values():
        path = file_path(f, root)
        users = [p.name for p in others if f.store_key in {g.store_key for _, g in p.roles()}]
        if users:
            kept[str(path)] = users
            continue
        if _delete_file(path):
            removed.append(str(path))
    return {"pair": pair.name, "removed": removed, "kept": kept}


def _delete_file(path: Path) -> bool:
    """Remove a file and everything the store keeps beside it."""
    existed = False
    for p in (path, record_path(path), partial_path(path), partial_meta_path(path), _sibling(path, ".lock")):
        if p.exists():
            existed = existed or p == path or p == partial_path(path)
            p.unlink()
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only when empty
    return existed
