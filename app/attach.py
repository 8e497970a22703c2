"""Files attached to a message: `run --file PATH` and `/file PATH` in the
chat. Each file's text goes into the message as a fenced block under its
name, before the user's words, so every drafter can copy from it (a rename
in an attached file is the case where speculation pays most).

A file is read whole or refused with one line: not found, a folder, a link
that leads nowhere, a pipe or device (never waited on), over MAX_BYTES, or
not UTF-8 text (a NUL byte says binary).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from specchat.errors import SpecchatError
from specchat.slash import prefixed

MAX_BYTES = 256 * 1024  # a source file or a report; a bigger one would not fit most contexts anyway
FILE_PREFIX = "/file"


@dataclass(frozen=True)
class Attachment:
    name: str  # as the user gave it
    text: str

    @property
    def lines(self) -> int:
        return self.text.count("\n") + (not self.text.endswith("\n"))

    def block(self) -> str:
        """The file as the message holds it: its name, then its text fenced
        by more backticks than any run inside it."""
        run, fence = 0, 3
        for ch in self.text:
            run = run + 1 if ch == "`" else 0
            fence = max(fence, run + 1)
        ticks = "`" * fence
        return f"{self.name}:\n{ticks}\n{self.text.rstrip(chr(10))}\n{ticks}"


def read_attachment(path: str) -> Attachment:
    """The file at `path`, read as text; a SpecchatError says why it cannot be."""
    p = Path(path).expanduser()
    hint = "attach a text file (source, notes, a log) of at most 256 KiB"
    try:
        if p.is_dir():
            raise SpecchatError(f"{path} is a folder, not a file", hint=hint, code=2)
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)  # a named pipe would block a plain open forever
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SpecchatError(f"{path} is not a regular file", hint=hint, code=2)
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise SpecchatError(
            f"no file {path}", hint="check the path (relative to the folder specchat runs in)", code=2
        ) from None
    except OSError as err:
        raise SpecchatError(f"cannot read {path} ({err.strerror or err})", hint=hint, code=2) from None
    if len(data) > MAX_BYTES:
        raise SpecchatError(f"{path} is over {MAX_BYTES // 1024} KiB", hint=hint, code=2)
    if b"\0" in data:
        raise SpecchatError(f"{path} is not text (it holds NUL bytes)", hint=hint, code=2)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecchatError(f"{path} is not UTF-8 text", hint=hint, code=2) from None
    return Attachment(path, text.replace("\r\n", "\n"))


_BLOCK = re.compile(r"^(?P<name>[^\n`]+):\n(?P<fence>`{3,})\n(?P<text>.*?)\n(?P=fence)$", re.M | re.S)


def attached_in(messages: list[dict]) -> list[Attachment]:
    """The files the user's messages carry, as with_files put them there (a
    reply may write one back: rewrite.py), most recent last."""
    found = []
    for m in messages:
        if m["role"] == "user":
            found += [Attachment(b["name"], b["text"] + "\n") for b in _BLOCK.finditer(m["content"])]
    return found


def words_of(message: str) -> str:
    """The user's own words of a message, each attached file as "[+ NAME]"
    (a title, a line in a list)."""
    return _BLOCK.sub(lambda b: f"[+ {b['name']}]", message).replace("]\n\n", "] ").strip()


def with_files(message: str, files: list[Attachment]) -> str:
    """The message as sent: each file's block, then the user's words."""
    return "\n\n".join([*(f.block() for f in files), message]) if files else message


def file_prefix(message: str) -> tuple[str | None, str]:
    """Split a chat message "/file PATH rest" into (PATH, rest); a message
    without the prefix gives (None, message)."""
    return prefixed(message, FILE_PREFIX, "a path", "/file src/app.py Rename x to count")
