"""The files specchat keeps for itself in its data folder (kernels.json,
cost-curves.json, the memory's token cache), read as untrusted.

Whoever can write the data folder may have left anything there: a named
pipe (a plain open waits for a writer forever), a link to /dev/zero (a read
that never ends), a file of any size. So a kept file is read only where it
is a regular file of at most its cap in bytes, opened without following a
link and without waiting; anything else reads as none, said once in a
warning line, and is replaced whole the next time specchat saves it
(paths.write_atomic renames a new file over the name: a link or a pipe
planted there is replaced, never followed or opened).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import threading
from pathlib import Path

from specchat import paths
from specchat.textsafe import safe_text

_said: set[str] = set()  # warnings already given by this process
_saying = threading.Lock()


def warn(line: str, once_for: str | None = None) -> None:
    """One warning line on stderr, once per process for `once_for` (the line itself unless told)."""
    key = line if once_for is None else once_for
    with _saying:
        if key in _said:
            return
        _said.add(key)
    sys.stderr.write(safe_text(f"warning: {line}") + "\n")


def damaged(path: Path, why: str) -> None:
    """Say once that the kept file at `path` is not read, and why."""
    warn(f"{path} {why}: specchat ignores it and writes a new one when it next saves", once_for=str(path))


NOT_REGULAR = "is not a regular file (a folder, a link, a pipe or a device)"


def problem(st: os.stat_result, cap: int) -> str | None:
    """Why a file with this status is not one to read (None: it is)."""
    if not stat.S_ISREG(st.st_mode):
        return NOT_REGULAR
    if st.st_size > cap:
        return f"is over {cap:,} bytes"
    return None


def read(path: Path, cap: int) -> bytes | None:
    """The bytes of the kept file at `path`: None where there is none, or
    where what is there is no regular file of at most `cap` bytes (said once)."""
    try:
        return paths.read_regular(path, cap)
    except FileNotFoundError:
        return None
    except paths.TooBig:
        why = f"is over {cap:,} bytes"  # by its size, or it grew while it was read
    except OSError as err:
        not_regular = isinstance(err, paths.NotRegularFile) or err.errno == errno.ELOOP
        why = NOT_REGULAR if not_regular else f"cannot be read ({err.strerror})"
    damaged(path, why)
    return None


def usable(path: Path, cap: int) -> bool:
    """Whether the kept file at `path` is absent or a regular file of at
    most `cap` bytes, for a reader that opens it itself (SQLite); said once where not."""
    try:
        why = problem(os.lstat(path), cap)
    except FileNotFoundError:
        return True
    except OSError as err:
        why = f"cannot be read ({err.strerror})"
    if why is not None:
        damaged(path, why)
    return why is None


def read_json(name: str, cap: int) -> dict:
    """A JSON record kept in the data folder: {} where there is none yet or
    it does not read as one (said once)."""
    path = paths.data_dir() / name
    raw = read(path, cap)
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested past any parser
        data = None
    if not isinstance(data, dict):
        damaged(path, "does not read as a JSON object")
        return {}
    return data


def keep(name: str, data: dict) -> None:
    """Write such a record whole; a data folder that cannot be written costs
    only the work of finding the record again next time."""
    path = paths.data_dir() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomic(path, json.dumps(data, indent=1))
    except OSError:
        pass
