"""Local pairs: GGUF files the user already has, registered by reference.

`specchat models add NAME --target PATH [--draft PATH]` records each file's
path, size, mtime and sha256 in local-pairs.json in the config dir; nothing
is copied, and `rm NAME` forgets the pair without touching its files. A
pair is checked with llama.cpp's rule (compat.check_pair) when it is added.
A target alone is a pair too: off, ngram, grammar and auto draft for it.

Before a local pair is opened its files are checked as pulled files are
(files.check): a size other than the recorded one, or another mtime whose
bytes no longer hash to the recorded sha256, refuses the pair, naming the
file and the command that registers it again.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from specchat import paths
from specchat.errors import SpecchatError
from specchat.store.catalog import check_name, load_catalog
from specchat.store.compat import check_pair, check_whole, read_vocab
from specchat.store.files import digest_of, read_json, write_json

LOCAL_FILE = "local-pairs.json"


@dataclass(frozen=True)
class LocalFile:
    path: Path
    size: int
    mtime_ns: int
    sha256: str

    def as_dict(self) -> dict:
        return {"path": str(self.path), "size": self.size, "mtime_ns": self.mtime_ns, "sha256": self.sha256}


@dataclass(frozen=True)
class LocalPair:
    name: str
    target: LocalFile
    draft: LocalFile | None

    def files(self) -> list[tuple[str, LocalFile]]:
        return [("target", self.target)] + ([("draft", self.draft)] if self.draft else [])

    def add_command(self) -> str:
        """The command that registers this pair again."""
        draft = f" --draft {shlex.quote(str(self.draft.path))}" if self.draft else ""
        return f"specchat models add {self.name} --target {shlex.quote(str(self.target.path))}{draft}"


def local_pairs_path() -> Path:
    return paths.config_dir() / LOCAL_FILE


def load() -> dict[str, LocalPair]:
    """Every local pair, by name."""
    path = local_pairs_path()
    if not os.path.lexists(path):
        return {}
    data = read_json(path)
    try:
        assert data is not None
        return {name: _pair(name, spec) for name, spec in data["pairs"].items()}
    except (AssertionError, KeyError, TypeError, ValueError, AttributeError):
        raise SpecchatError(
            f"{path} is not a local-pairs file specchat can read",
            hint="delete it, then run `specchat models add` again",
        ) from None


def _pair(name: str, spec: dict) -> LocalPair:
    draft = spec["draft"]
    return LocalPair(name, _file(spec["target"]), _file(draft) if draft is not None else None)


def _file(spec: dict) -> LocalFile:
    values = (spec["size"], spec["mtime_ns"], spec["sha256"])
    if not isinstance(spec["path"], str) or not all(isinstance(v, int) for v in values[:2]):
        raise ValueError("bad file record")
    return LocalFile(Path(spec["path"]), spec["size"], spec["mtime_ns"], str(spec["sha256"]))


def get(name: str | None) -> LocalPair | None:
    """The local pair called `name`, if there is one."""
    return load().get(name) if name else None


def _save(pairs: dict[str, LocalPair]) -> None:
    data = {
        "pairs": {
            p.name: {"target": p.target.as_dict(), "draft": p.draft.as_dict() if p.draft else None}
            for p in pairs.values()
        }
    }
    path = local_pairs_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)


def add(name: str, target: str, draft: str | None = None, on_file: Callable[[Path], None] | None = None) -> LocalPair:
    """Check and register a local pair (replacing one of the same name)."""
    check_name(name)
    if name in load_catalog().pairs:
        raise SpecchatError(f"'{name}' is the name of a catalog pair", hint="give the local pair another name")
    t = _model_path(target, "--target")
    d = _model_path(draft, "--draft") if draft else None
    if d is not None and d != t:
        check_pair(t, d)
    for path in filter(None, (t, d)):  # a GGUF model: a tokenizer and every tensor's bytes, or one line why not
        if not read_vocab(path).tokens:
            raise SpecchatError(
                f"{path} holds no tokenizer: not a model to chat with", hint="pass a model's .gguf file"
            )
        check_whole(path)
    _writable(local_pairs_path().parent)  # before the hashing, which takes a while
    pair = LocalPair(name, _record(t, on_file), _record(d, on_file) if d is not None and d != t else None)
    pairs = load()
    pairs[name] = pair
    _save(pairs)
    return pair


def _writable(folder: Path) -> None:
    """The folder the record goes in exists (or can be made) and is a folder."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        why = "a file is where that folder should be" if isinstance(err, FileExistsError) else err.strerror or err
        raise SpecchatError(
            f"cannot keep local pairs in {folder} ({why})",
            hint="check that folder (SPECCHAT_HOME moves it)",
        ) from None
    if not os.access(folder, os.W_OK):
        raise SpecchatError(
            f"cannot keep local pairs in {folder} (not writable)", hint="check that folder's permissions"
        )


def _model_path(text: str, option: str) -> Path:
    path = Path(text).expanduser().absolute()
    if not path.is_file():
        raise SpecchatError(f"{option}: no model file at {path}", hint="pass the path of a .gguf file")
    return path


def _record(path: Path, on_file: Callable[[Path], None] | None) -> LocalFile:
    if on_file:
        on_file(path)
    st = path.stat()
    digest = sha256_of(path)
    return LocalFile(path, st.st_size, st.st_mtime_ns, digest)


def sha256_of(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """A user's file's sha256 (through links: a local pair's file may be one)."""
    with open(path, "rb") as src:
        return digest_of(src, on_bytes)


def remove(name: str) -> LocalPair:
    """Forget a local pair; its files stay where they are."""
    pairs = load()
    pair = pairs.pop(name, None)
    if pair is None:
        raise SpecchatError(f"no local pair '{name}'", hint="see `specchat models`")
    _save(pairs)
    return pair


def state(f: LocalFile) -> str:
    """ "ok", "missing" or "changed": the file hashed again when its mtime differs.
    Same bytes under a new mtime are recorded, so the next look hashes nothing."""
    try:
        st = f.path.stat()
    except OSError:
        return "missing"
    if not stat.S_ISREG(st.st_mode):
        return "missing"
    if st.st_size != f.size:
        return "changed"
    if st.st_mtime_ns == f.mtime_ns:
        return "ok"
    try:
        same = sha256_of(f.path) == f.sha256
    except OSError:
        return "missing"
    if same:
        _restamp(f, st.st_mtime_ns)
    return "ok" if same else "changed"


def _restamp(f: LocalFile, mtime_ns: int) -> None:
    """Record f's new mtime in every local pair that holds it (best effort: a
    read-only config only means hashing again next time)."""
    new = replace(f, mtime_ns=mtime_ns)
    with contextlib.suppress(OSError, SpecchatError):
        pairs = load()
        for name, p in pairs.items():
            draft = new if p.draft == f else p.draft
            pairs[name] = replace(p, target=new if p.target == f else p.target, draft=draft)
        _save(pairs)


def resolve(pair: LocalPair) -> tuple[Path, Path | None]:
    """(target path, draft path or None) of a local pair whose files are unchanged."""
    for role, f in pair.files():
        what = state(f)
        if what == "missing":
            raise SpecchatError(
                f"the {role} of local pair '{pair.name}' is gone: no file at {f.path}",
                hint=f"put it back, or register the pair again: {pair.add_command()}",
            )
        if what == "changed":
            raise SpecchatError(
                f"the {role} of local pair '{pair.name}' changed since it was added: "
                f"{f.path} no longer matches its recorded size and sha256",
                hint=f"if the new file is what you want, register it again: {pair.add_command()}",
            )
    return pair.target.path, pair.draft.path if pair.draft else None
