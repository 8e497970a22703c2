"""Pairs in the store: the catalog's and the local ones (`specchat models
add`), whether each is pulled and ready, the paths a pair resolves to, its
status for `specchat models` (with the last verdict of `models check`), and
removing a pair's files (those no other pulled pair uses).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from specchat.errors import SpecchatError
from specchat.store import local, verdicts
from specchat.store.catalog import Catalog, Pair, load_catalog
from specchat.store.files import (
    check,
    clean_scratch,
    damaged,
    delete_file,
    file_path,
    file_state,
    has_folder,
    is_ready,
)
from specchat.store.local import LocalPair


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
    catalog = load_catalog()
    pairs = [catalog.get(n) for n in dict.fromkeys(names)]
    chosen = {p.name for p in pairs}
    others = [p for p in catalog.pairs.values() if p.name not in chosen and pair_ready(p, root)]
    with contextlib.suppress(OSError):  # what dead pulls left; a read-only store says so below
        clean_scratch(root)
    removed: list[str] = []
    kept: dict[str, list[str]] = {}
    for f in {f.store_key: f for p in pairs for _, f in p.roles()}.values():
        path = file_path(f, root)
        users = [p.name for p in others if f.store_key in {g.store_key for _, g in p.roles()}]
        if users:
            kept[str(path)] = users
        elif has_folder(path, root) and delete_file(f, root):
            removed.append(str(path))
    return {"pair": pairs[0].name, "pairs": [p.name for p in pairs], "removed": removed, "kept": kept}
