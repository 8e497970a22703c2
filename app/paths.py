"""Where specchat keeps things: models, history, settings.

Paths come from platformdirs. SPECCHAT_HOME moves all of them under one
folder, which is how the tests isolate themselves.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import platformdirs


def _home() -> Path | None:
    home = os.environ.get("SPECCHAT_HOME")
    return Path(home).expanduser() if home else None


def data_dir() -> Path:
    home = _home()
    return home / "data" if home else Path(platformdirs.user_data_dir("specchat"))


def config_dir() -> Path:
    home = _home()
    return home / "config" if home else Path(platformdirs.user_config_dir("specchat"))


def models_dir() -> Path:
    """The model store. SPECCHAT_MODELS moves only the store (CI shares one)."""
    override = os.environ.get("SPECCHAT_MODELS")
    return Path(override).expanduser() if override else data_dir() / "models"


def history_db() -> Path:
    return data_dir() / "history.sqlite3"


def settings_file() -> Path:
    return config_dir() / "settings.toml"


def write_atomic(path: Path, text: str) -> None:
    """Write a file whole or not at all: into a new file of its own beside
    `path` (created exclusively, never through a link someone planted
    there), then renamed over `path`. OSError where it cannot."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_kept(name: str) -> dict:
    """A JSON record specchat keeps in its data folder (cost-curves.json,
    kernels.json): {} where there is none yet or it does not read as one."""
    try:
        data = json.loads((data_dir() / name).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested past any parser
        return {}
    return data if isinstance(data, dict) else {}


def keep(name: str, data: dict) -> None:
    """Write such a record whole; a data folder that cannot be written costs
    only the work of finding the record again next time."""
    path = data_dir() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, indent=1))
    except OSError:
        pass
