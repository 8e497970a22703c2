"""Settings: one TOML file in the config dir (`paths.settings_file()`).

Read with tomllib, written with tomlkit so a user's comments and layout
survive when the app saves a choice (the theme, the drafter, the pair).
A file that cannot be used never stops the app: `load_settings()` falls back
to the defaults and reports a clear message naming the line.

    pair = "qwen2.5-coder-1.5b"
    drafter = "auto"           # off | ngram | draft | mtp | hybrid | grammar | memory | auto
    k = 16                     # the most a drafter may propose per round (unset: each
                               # drafter's own: 64 auto/memory, 16 ngram, 4 draft/mtp/hybrid)
    temperature = 0.0          # the chat's /temp; 0 = greedy
    top_p = 1.0                # the chat's /top-p; 1 = off
    theme = "specchat-dark"
    system_prompt = ""
    threads = 0                # 0 = physical cores
    ctx = 0                    # 0 = min(8192, trained)
    extra_bufts = "auto"       # llama.cpp's extra CPU buffer types: auto | on | off

    [keymap]                   # binding id = keys (see `specchat` F1)
    cycle_drafter = "ctrl+d"
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit

from specchat import checks, paths
from specchat.errors import SpecchatError


@dataclass
class Settings:
    pair: str | None = None  # None: the catalog's default pair
    drafter: str = "auto"  # picks drafter and length per round; never loses to off by much
    k: int | None = None  # None: each drafter's own k (drafters.default_k)
    temperature: float = 0.0
    top_p: float = 1.0
    theme: str = "specchat-dark"
    system_prompt: str = ""  # a new conversation's; each keeps its own (/system)
    threads: int = 0  # 0 = let llama.cpp / the loader choose
    ctx: int = 0  # 0 = the loader's default
    memory: bool = True  # draft from this user's earlier replies in the history (F10: off for one chat)
    extra_bufts: str = "auto"  # llama.cpp's repacked/AMX CPU buffers: off on AMX CPUs, else probed (llamacpp.kernels)
    keymap: dict[str, str] = field(default_factory=dict)
    # Where each [keymap] entry sits ("PATH, line N"), so the chat's warning
    # about an entry it cannot bind (tui/chat/keys.py) names its line.
    keymap_where: dict[str, str] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class Loaded:
    settings: Settings
    errors: list[str]  # one human line per problem; empty when the file was fine
    path: Path


_TYPES: dict[str, type | tuple[type, ...]] = {
    "pair": str,
    "drafter": str,
    "k": int,
    "temperature": (int, float),
    "top_p": (int, float),
    "theme": str,
    "system_prompt": str,
    "threads": int,
    "ctx": int,
    "memory": bool,
    "extra_bufts": str,
    "keymap": dict,
}


def load_settings(path: Path | None = None, warn: Callable[[str], None] | None = None) -> Settings:
    """The settings, or the defaults where the file is missing or bad; each
    problem found goes to `warn` (a command's warning line: the chat shows
    them as notices instead, from read_settings)."""
    loaded = read_settings(path)
    if warn is not None:
        for problem in loaded.errors:
            warn(problem)
    return loaded.settings


def read_settings(path: Path | None = None) -> Loaded:
    """Settings plus the problems found, for the UI to show."""
    path = path or paths.settings_file()
    try:
        text = _read(path)
    except FileNotFoundError:
        return Loaded(Settings(), [], path)
    except paths.NotRegularFile:
        return Loaded(Settings(), [f"{path} is not a regular file; using the defaults"], path)
    except paths.TooBig as err:
        return Loaded(Settings(), [f"{path} is {err.size} bytes, too big for settings; using the defaults"], path)
    except OSError as err:
        return Loaded(Settings(), [f"{path}: {err.strerror or err}; using the defaults"], path)
    except ValueError as err:
        return Loaded(Settings(), [f"{path}: {err}; using the defaults"], path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        return Loaded(Settings(), [f"{path}: {err}; using the defaults"], path)
    except RecursionError:
        return Loaded(Settings(), [f"{path}: nested too deep to be settings; using the defaults"], path)
    settings, errors = _from_dict(data, text, path)
    return Loaded(settings, errors, path)


MAX_SETTINGS_BYTES = 1024 * 1024  # settings.toml is a few lines: past this it is no settings file


def _read(path: Path) -> str:
    """The file's text, read as `paths.read_regular` reads (a link is
    followed: settings may be kept with the user's dotfiles); ValueError
    naming the line of a byte that is not UTF-8."""
    raw = paths.read_regular(path, MAX_SETTINGS_BYTES, follow_links=True)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ValueError(f"line {line} is not valid UTF-8 (byte 0x{raw[err.start]:02x})") from None


# The range of each number, from the one owner of each rule (checks.py).
_RANGES: dict[str, Callable[..., object]] = {
    "k": checks.k,
    "temperature": checks.temperature,
    "top_p": checks.top_p,
    "threads": checks.threads,
    "ctx": checks.ctx,
    "drafter": checks.drafter,
    "extra_bufts": checks.extra_bufts,
}


def _from_dict(data: dict, text: str, path: Path) -> tuple[Settings, list[str]]:
    """Keep every valid key; name the line of each bad one."""
    s, errors = Settings(), []
    for key, value in data.items():
        where = f"{path}, line {_line_of(text, key)}"
        if key not in _TYPES:
            errors.append(f"{where}: unknown setting {key!r}; ignored")
        elif not _has_type(key, value):
            errors.append(f"{where}: {key} should be {_type_name(key)}, not {value!r}; using {_default(s, key)}")
        elif key == "keymap":
            s.keymap, s.keymap_where = _keymap(value, text, path, errors)
        elif (problem := _out_of_range(key, value)) is not None:
            errors.append(f"{where}: {problem}; using {_default(s, key)}")
        else:
            setattr(s, key, float(value) if key in ("temperature", "top_p") else value)
    return s, errors


def _keymap(table: dict, text: str, path: Path, errors: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The [keymap] entries whose value is a string, and where each sits;
    every other entry is named by its line and left out, the rest kept.
    Which ids and keys exist is the chat's to check (tui/chat/keys.py)."""
    keymap, where = {}, {}
    for name, keys in table.items():
        at = f"{path}, line {_keymap_line(text, name)}"
        if isinstance(keys, str):
            keymap[name], where[name] = keys, at
        else:
            errors.append(f'{at}: keymap.{name} should be a key string like "ctrl+d", not {keys!r}; ignored')
    return keymap, where


def _keymap_line(text: str, name: str) -> int:
    """The line of `name` under [keymap] (or written keymap.NAME); else the table's own."""
    entry = rf"\s*[\"']?{re.escape(name)}[\"']?\s*="
    in_table = False
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(r"\s*\[", line):
            in_table = re.match(r"\s*\[\s*[\"']?keymap[\"']?\s*\]", line) is not None
        elif (in_table and re.match(entry, line)) or re.match(rf"\s*keymap\s*\.{entry}", line):
            return i
    return _line_of(text, "keymap")


def _has_type(key: str, value: object) -> bool:
    return isinstance(value, _TYPES[key]) and (_TYPES[key] is bool or not isinstance(value, bool))


def _default(s: Settings, key: str) -> str:
    value = getattr(s, key)
    return "each drafter's own" if key == "k" and value is None else repr(value)


def _out_of_range(key: str, value) -> str | None:
    if key not in _RANGES:
        return None
    try:
        _RANGES[key](value, flag=key)
    except SpecchatError as err:
        return err.message
    return None


def _type_name(key: str) -> str:
    t = _TYPES[key]
    names: dict[type | tuple[type, ...], str] = {
        str: "a string",
        int: "a whole number",
        dict: "a table",
        bool: "true or false",
    }
    return names.get(t, "a number")


def _line_of(text: str, key: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*\[?\s*\"?{re.escape(key)}\"?\s*[\]=]", line):
            return i
    return 1


def save_settings(changes: dict, path: Path | None = None) -> None:
    """Set these keys in the file, keeping everything else (comments too).
    A file that does not parse is left alone: the user's text wins. A link
    (settings kept with the user's dotfiles) is written through, at the file
    it points to; a read-only file is the user's choice, left alone: OSError,
    as where the folder cannot be written."""
    path = path or paths.settings_file()
    if path.is_symlink():
        path = Path(os.path.realpath(path))  # replacing the link would cut it from the user's copy
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and _read_only(path):
        raise OSError(f"{path} is read-only")
    try:
        doc = tomlkit.parse(_read(path))
    except FileNotFoundError:
        doc = tomlkit.document()
    except (paths.NotRegularFile, paths.TooBig):
        raise OSError(f"{path} is not a settings file specchat can rewrite") from None
    except ValueError:  # not UTF-8, or not TOML
        return
    for key, value in changes.items():
        if key not in _TYPES:
            raise KeyError(key)
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    paths.write_atomic(path, tomlkit.dumps(doc))  # beside the file, then renamed over it


def _read_only(path: Path) -> bool:
    """No write bit (chmod a-w), or none for this user. Root may write any
    file, so the bits are what says the user wants it kept as it is."""
    return not path.stat().st_mode & 0o222 or not os.access(path, os.W_OK)
