"""What the model store holds: `specchat models` (every pair, what is
pulled, sizes, the paths of what is on disk, verified state, how to pull
what is not, the last `models check` verdict;
`--verify` hashes every file again; the local pairs `models add`
registered, with their paths) and `specchat rm`
(delete what no other pulled pair needs; forget a local pair, never its files).
"""

from __future__ import annotations

import os

from rich import filesize
from rich.console import Console

from specchat.errors import SpecchatError
from specchat.store import files as store
from specchat.store import local
from specchat.store.catalog import ModelFile, load_catalog
from specchat.store.pairs import default_pair_name, pair_status, refuse_local_users, remove_pairs
from specchat.store.pull import UI
from specchat.textsafe import safe_json, safe_text

_WHY = {
    "damaged": "changed on disk: its sha256 no longer matches",
    "unverified": "no verification record",
    "foreign": "a link or a folder, not a file the store made",
}


def verify_models(console: Console | None = None) -> int:
    """`specchat models --verify`: hash every pulled file again, whatever its
    mtime says, with a progress bar. Returns 1 when a file failed."""
    console = console or Console(highlight=False)
    catalog = load_catalog()
    files: dict[str, tuple[ModelFile, list[str]]] = {}
    for pair in catalog.pairs.values():
        for _, f in pair.roles():
            if os.path.lexists(store.file_path(f)):  # a link too: it is reported, not followed
                files.setdefault(f.store_key, (f, []))[1].append(pair.name)
    mine = local.load()
    if not files and not mine:
        console.print(safe_text(f"nothing pulled in {store.store_root()}"), markup=False)
        return 0
    ui, failed = UI(True, console), 0
    checked = len(files) + sum(len(p.files()) for p in mine.values())
    for own in mine.values():  # the user's own files, hashed again against what `models add` recorded
        for _, lf in own.files():
            if not _same_bytes(lf, ui):
                failed += 1
                ui.say(
                    f"FAILED   {lf.path}: missing or changed since local pair {own.name} was added; "
                    f"fix: {own.add_command()}"
                )
            else:
                ui.say(f"ok       {lf.path} (local pair {own.name})")
    for f, pairs in files.values():
        path = store.file_path(f)
        with ui.bar(f"hashing {f.filename}", os.lstat(path).st_size) as bar:
            state = store.check(f, rehash=True, on_bytes=bar.advance)
        if state == "verified":
            ui.say(f"ok       {path}")
        else:
            failed += 1
            ui.say(f"FAILED   {path}: {_WHY.get(state, state)}; fix: specchat pull {pairs[0]}")
    ui.say(f"{checked - failed} of {checked} files verified")
    return 1 if failed else 0


def _same_bytes(f: local.LocalFile, ui: UI) -> bool:
    """A local pair's file still holds the bytes recorded for it (hashed with a progress bar)."""
    try:
        if not f.path.is_file():
            return False
        with ui.bar(f"hashing {f.path.name}", f.path.stat().st_size) as bar:
            return local.sha256_of(f.path, bar.advance) == f.sha256
    except OSError:
        return False


def show_models(json_out: bool) -> None:
    """`specchat models`: every pair, what is pulled, sizes, paths, state."""
    everything = pair_status()
    pairs = [p for p in everything if not p["local"]]
    mine = [p for p in everything if p["local"]]
    root = store.store_root()
    if json_out:
        data = {"store": str(root), "default": default_pair_name(), "pairs": pairs, "local": mine}
        print(safe_json(data, indent=2))
        return
    print(safe_text(f"model store: {root}"))
    for p in pairs:  # a custom pair's description or file name is the user's text
        print(safe_text(_pair_lines(p)))
    for entry in mine:
        print(safe_text(_local_lines(entry)))


_LOCAL_STATE = {"verified": "unchanged since added", "missing": "MISSING", "damaged": "CHANGED since added"}


def _local_lines(p: dict) -> str:
    lines = [f"  {p['name']} (local): {'ready' if p['ready'] else 'not usable'}"] + _verdict_lines(p)
    for role in ("target", "draft"):
        f = p[role]
        if role == "draft" and p["same_file"]:
            lines.append("    draft   none: off, ngram, grammar and auto work on it")
            continue
        state = _LOCAL_STATE[f["state"]]
        if f["state"] != "verified":
            state += f"; fix: {p['add_command']}"
        lines += [f"    {role:<7} {filesize.decimal(f['size']):>9}  local, {state}", f"{'':>21}{f['path']}"]
    return "\n".join(lines)


def _pair_lines(p: dict) -> str:
    mark = "*" if p["default"] else " "
    state = "ready" if p["ready"] else ("not pulled" if _none_pulled(p) else "partly pulled")
    tags = " (default)" if p["default"] else ""
    tags += " (custom)" if p["custom"] else ""
    lines = [f"{mark} {p['name']}{tags}: {state}"]
    about = p["description"] + (f"; {p['note']}" if p["note"] else "")
    if about:
        lines.append(f"    {about}")
    lines += _verdict_lines(p)
    lines += _file_lines("target", p["target"], p["name"])
    lines += ["    draft   = target (the same file)"] if p["same_file"] else _file_lines("draft", p["draft"], p["name"])
    if not p["ready"]:
        lines.append(f"    get it: specchat pull {p['name']}")
    return "\n".join(lines)


def _verdict_lines(p: dict) -> list[str]:
    """The last `specchat models check` of the pair, where there is one."""
    return [f"    {p['verdict']}"] if p.get("verdict") else []


def _none_pulled(p: dict) -> bool:
    return all(p[role]["state"] == "missing" for role in ("target", "draft"))


def _file_lines(role: str, f: dict, pair: str) -> list[str]:
    """A file's size, state and where it comes from; its path where there is
    something at it (a file not pulled yet has nothing to show there)."""
    size = filesize.decimal(f["size"]) if f["size"] else ""  # a Hub-only file's size is known once pulled
    state = f["state"]
    if state == "partial" and f["size"]:
        state = f"partial {100 * f['partial_bytes'] // f['size']}%"
    if state == "verified":
        state = f"verified, from {f['source']}"
    elif state == "damaged":
        state = f"DAMAGED: changed on disk, its sha256 no longer matches; fix: specchat pull {pair}"
    elif state == "foreign":
        state = f"FOREIGN: {_WHY['foreign']}; fix: specchat pull {pair}"
    else:
        state += ", from the Hub or the PyPI mirror" if f["mirror"] else ", from the Hub only"
    line = f"    {role:<7} {size:>9}  {state}"
    return [line] if f["state"] == "missing" else [line, f"{'':>21}{f['path']}"]


def run_rm(names: list[str], force: bool = False) -> None:
    """`specchat rm PAIR...`: delete their files unless a pulled pair not named uses them
    (or, without `force`, a local pair not named opens one); forget the local pairs named,
    keeping their files."""
    mine = local.load()
    forgotten = [n for n in dict.fromkeys(names) if n in mine]
    if not force and any(n not in mine for n in names):  # before anything is deleted or forgotten
        refuse_local_users([n for n in names if n not in mine], forgotten)
    for name in forgotten:
        pair = local.remove(name)
        kept = ", ".join(str(f.path) for _, f in pair.files())
        print(safe_text(f"forgot local pair {name}; its files stay where they are: {kept}"))
    names = [n for n in names if n not in mine]
    if not names:
        return
    try:
        result = remove_pairs(names)
    except OSError as err:
        raise SpecchatError(
            f"cannot delete from the model store: {err}", hint="check the store's permissions"
        ) from None
    for path in result["removed"]:
        print(safe_text(f"deleted {path}"))
        for pair in (p for p in mine.values() if p.name not in forgotten):  # a local pair that registered this file
            if any(os.path.realpath(f.path) == os.path.realpath(path) for _, f in pair.files()):
                print(
                    safe_text(
                        f"warning: local pair {pair.name} used {path}; it cannot open now "
                        f"(specchat rm {pair.name} forgets it)"
                    )
                )
    users = set()
    for path, used_by in result["kept"].items():
        print(safe_text(f"kept {path} (used by {', '.join(used_by)})"))
        users.update(used_by)
    if users:
        print(f"to delete it too: specchat rm {' '.join(result['pairs'] + sorted(users))}")
    if not result["removed"] and not result["kept"]:
        print(f"pair {', '.join(result['pairs'])}: nothing to delete (not pulled)")
