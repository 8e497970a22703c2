"""Pairs in the store: the catalog's and the local ones (`specchat models
add`), whether each is pulled and ready, the paths a pair resolves to, its
status for `specchat models` (with the last verdict of `models check`), and
removing a pair's files (those no other pulled pair uses).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from specchat.errors import SpecchatError
from specchat.store import local, verdicts
from specchat.store.catalog import Catalog, ModelFile, Pair, load_catalog
from specchat.store.files import (
    check,
    check_folder,
    clean_legacy_scratch,
    file_path,
    is_ready,
    lock,
    lstat,
    partial_meta_path,
    partial_path,
    read_only,
    read_record,
    record_path,
    remove_stray,
    sibling,
    store_folders,
)
from specchat.store.local import LocalPair
from specchat.store.scratch import clean_scratch


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
    partial, partial_bytes = lstat(partial_path(path)), None
    if state == "missing" and partial is not None and stat.S_ISREG(partial.st_mode):
        state, partial_bytes = "partial", partial.st_size
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
        "partial_bytes": partial_bytes,
    }


def known_pair(name: str) -> None:
    """The catalog's one-line error unless `name` is a catalog pair or a local one."""
    if local.get(name) is None:
        load_catalog().get(name)


def pair_status(name: str | None = None, root: Path | None = None) -> list[dict]:
    """Every catalog pair (or just `name`) with what the store holds of it,
    then the local pairs (`specchat models add`), marked "local"; each with
    the last verdict `specchat models check` gave it ("" if never checked)."""
    mine = local.load()
    if name and name in mine:
        entries = [local_entry(mine[name])]
    else:
        catalog = load_catalog()
        pairs = [catalog.get(name)] if name else list(catalog.pairs.values())
        entries = [_pair_entry(pair, catalog, root) for pair in pairs]
        entries += [] if name else [local_entry(p) for p in mine.values()]
    checked = verdicts.load_summaries()
    return [{**e, "verdict": checked.get(e["name"], "")} for e in entries]


_LOCAL_STATE = {"ok": "verified", "changed": "damaged", "missing": "missing"}


def local_entry(pair: LocalPair) -> dict:
    """A local pair in pair_status's shape; a target alone is its own draft there ("same_file")."""
    files = {
        role: {
            "path": str(f.path),
            "filename": f.path.name,
            "state": _LOCAL_STATE[local.state(f)],
            "size": f.size,
            "sha256": f.sha256,
            "source": "local",
            "partial_bytes": None,
        }
        for role, f in pair.files()
    }
    about = f"local: {pair.target.path.name}" + (f" drafted by {pair.draft.path.name}" if pair.draft else "")
    return {
        "name": pair.name,
        "default": False,
        "description": about,
        "note": "",
        "custom": False,
        "local": True,
        "same_file": pair.draft is None,
        "ready": all(f["state"] == "verified" for f in files.values()),
        "target": files["target"],
        "draft": files.get("draft", files["target"]),
        "add_command": pair.add_command(),
    }


def _pair_entry(pair: Pair, catalog: Catalog, root: Path | None) -> dict:
    files = {role: file_state(f, root) for role, f in pair.roles()}
    return {
        "name": pair.name,
        "default": pair.name == catalog.default,
        "description": pair.description,
        "note": pair.note,
        "custom": pair.custom,
        "local": False,
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
    pairs, doomed, kept = _removal(names, root)
    with contextlib.suppress(OSError):  # what dead pulls left; a read-only store says so below
        clean_scratch(root)
    removed = [str(file_path(f, root)) for f in doomed if has_folder(file_path(f, root), root) and delete_file(f, root)]
    return {"pair": pairs[0].name, "pairs": [p.name for p in pairs], "removed": removed, "kept": kept}


def _removal(names: list[str], root: Path | None) -> tuple[list[Pair], list[ModelFile], dict[str, list[str]]]:
    """(the pairs named, the files removing them deletes, {path: pulled pairs not named that keep it})."""
    catalog = load_catalog()
    pairs = [catalog.get(n) for n in dict.fromkeys(names)]
    chosen = {p.name for p in pairs}
    others = [p for p in catalog.pairs.values() if p.name not in chosen and pair_ready(p, root)]
    doomed: list[ModelFile] = []
    kept: dict[str, list[str]] = {}
    for f in {f.store_key: f for p in pairs for _, f in p.roles()}.values():
        users = [p.name for p in others if f.store_key in {g.store_key for _, g in p.roles()}]
        if users:
            kept[str(file_path(f, root))] = users
        else:
            doomed.append(f)
    return pairs, doomed, kept


def refuse_local_users(names: list[str], forgotten: list[str], root: Path | None = None) -> None:
    """Before `rm` deletes anything: one line naming each store file it would
    delete that a local pair (`models add`, other than those it forgets)
    opens, since that pair could not open afterwards."""
    _, doomed, _ = _removal(names, root)
    gone = {os.path.realpath(file_path(f, root)): file_path(f, root) for f in doomed}
    users = {
        (pair.name, gone[real])
        for pair in local.load().values()
        if pair.name not in forgotten
        for _, f in pair.files()
        if (real := os.path.realpath(f.path)) in gone and Path(real).is_file()
    }
    if users:
        opens = "; ".join(f"local pair {name} opens {path}" for name, path in sorted(users))
        everyone = " ".join([*dict.fromkeys(names), *sorted({name for name, _ in users})])
        raise SpecchatError(
            f"nothing deleted: {opens}, which this would delete",
            hint=f"--force deletes it anyway (that pair then cannot open); `specchat rm {everyone}` forgets it too",
        )


def has_folder(path: Path, root: Path | None) -> bool:
    """The store holds the folders on the way to `path`; a link among them is refused."""
    for folder in store_folders(path, root):
        if lstat(folder) is None:
            return False
        check_folder(folder)
    return True


def delete_file(f: ModelFile, root: Path | None) -> bool:
    """Remove a file and everything the store keeps beside it, holding its
    lock. A link goes, never what it points to; a folder is refused."""
    path = file_path(f, root)
    existed = False
    try:
        with lock(f, root, wait=False):
            for p in (path, record_path(path), partial_path(path), partial_meta_path(path), sibling(path, ".lock")):
                if lstat(p) is not None:
                    existed = existed or p == path or p == partial_path(path)
                    remove_stray(p)
            clean_legacy_scratch(path.parent)
    except OSError as err:
        if not read_only(err):
            raise
        raise SpecchatError(
            f"cannot delete {path}: the model store is read-only ({err.strerror})",
            hint=f"fix the permissions of {path.parent}, or run rm as the user who pulled it",
        ) from None
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only when empty
    return existed
