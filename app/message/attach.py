"""Files attached to a message: `run --file PATH` and `/file PATH` in the
chat. Each file's text goes into the message as a fenced block under its
name, before the user's words, so every drafter can copy from it (a rename
in an attached file is the case where speculation pays most).

A file is read whole or refused with one line: not found, a folder, a link
that leads nowhere, a pipe or device (never waited on), over MAX_BYTES, not
UTF-8 text (a NUL byte says binary), a name with a control character or a
line break in it (a message holds the name on a line of its own), or a
link in the folder specchat runs in that leads out of it (paths.link_out:
the line says where it points; the file attached by its own path is fine).

An Attachment records the file as it was read (its real path, size, mtime
and a hash of its bytes), kept beside the message in memory: a reply is
written back only to a file the user attached, and only while it is still
as it was (rewrite.py). A name and a fence in a message's text are never
read back as an attachment.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from specchat import paths
from specchat.errors import SpecchatError
from specchat.message.slash import prefixed

MAX_BYTES = 256 * 1024  # a source file or a report; a bigger one would not fit most contexts anyway
FILE_PREFIX = "/file"
HINT = "attach a text file (source, notes, a log) of at most 256 KiB"


@dataclass(frozen=True)
class Attachment:
    name: str  # as the user gave it
    text: str  # as the message holds it: without a byte order mark, every line end a "\n"
    path: Path  # the file itself, every link resolved: what a reply may be written back to
    size: int  # st_size, st_mtime_ns and the bytes' sha256 when it was read
    mtime_ns: int
    digest: str

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
    check_name(path)
    p = Path(path).expanduser()
    out = paths.link_out(p, Path.cwd())
    if out is not None:
        raise SpecchatError(
            f"{path} links to {out}, outside the folder specchat runs in",
            hint=f"attach {out} by its own path if you mean that file",
            code=2,
        )
    real = Path(os.path.realpath(p))
    try:
        if real.is_dir():
            raise SpecchatError(f"{path} is a folder, not a file", hint=HINT, code=2)
        data, st = paths.read_regular_stat(real, MAX_BYTES)  # a named pipe would block a plain open forever
    except paths.TooBig:
        raise SpecchatError(f"{path} is over {MAX_BYTES // 1024} KiB", hint=HINT, code=2) from None
    except paths.NotRegularFile:
        raise SpecchatError(f"{path} is not a regular file", hint=HINT, code=2) from None
    except FileNotFoundError:
        raise SpecchatError(
            f"no file {path}", hint="check the path (relative to the folder specchat runs in)", code=2
        ) from None
    except OSError as err:
        raise SpecchatError(f"cannot read {path} ({err.strerror or err})", hint=HINT, code=2) from None
    return Attachment(path, text_of(path, data), real, st.st_size, st.st_mtime_ns, hashlib.sha256(data).hexdigest())


def check_name(name: str) -> None:
    """Refuse a name that holds a control character or a line break: the
    message puts a file's name on a line of its own, and shows it."""
    for ch in name:
        kind = unicodedata.category(ch)
        if kind in ("Cc", "Zl", "Zp"):
            said = "a line break" if ch in "\n\r\x0b\x0c\x1c\x1d\x1e\x85" or kind != "Cc" else "a control character"
            raise SpecchatError(
                f"the name {name!r} holds {said}", hint="rename the file (or attach a copy with a plain name)", code=2
            )
        if kind == "Cs":  # a byte of the name that is not UTF-8
            raise SpecchatError(f"the name {name!r} is not UTF-8", hint="rename the file (or attach a copy)", code=2)


def holds_nul(data: bytes) -> bool:
    """Whether a file's bytes say it is binary: a NUL, which text never holds.
    Attaching refuses such a file, and the `@` picker leaves it out."""
    return b"\0" in data


def text_of(name: str, data: bytes) -> str:
    """A file's bytes as the message holds them: UTF-8 without its byte
    order mark, every line end (CR LF, a lone CR) a newline."""
    if holds_nul(data):
        raise SpecchatError(f"{name} is not text (it holds NUL bytes)", hint=HINT, code=2)
    try:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError:
        raise SpecchatError(f"{name} is not UTF-8 text", hint=HINT, code=2) from None
    return re.sub(r"\r\n?", "\n", text)


_BLOCK = re.compile(r"^(?P<name>[^\n`]+):\n(?P<fence>`{3,})\n(?P<text>.*?)\n(?P=fence)$", re.M | re.S)


def words_of(message: str) -> str:
    """The user's own words of a message, each attached file as "[+ NAME]"
    (a title, a line in a list)."""
    return _BLOCK.sub(lambda b: f"[+ {b['name']}]", message).replace("]\n\n", "] ").strip()


def leading_files(message: str) -> tuple[list[tuple[str, int]], str]:
    """The files a message starts with, as with_files puts them there (each
    its name and its number of lines), and the rest of the message: the
    user's words. A block the user wrote after their words is words."""
    files, pos = [], 0
    while (block := _BLOCK.match(message, pos)) is not None:
        text = block["text"]
        files.append((block["name"], text.count("\n") + 1 if text else 0))
        pos = block.end()
        if not message.startswith("\n\n", pos):
            break
        pos += 2
    return files, message[pos:]


def first_line(message: str) -> str:
    """The first line of a message's own words (words_of) that is not blank
    and opens no code fence: what a title or a list shows of it ("" for none)."""
    lines = words_of(message).splitlines()
    return next((line.strip() for line in lines if line.strip() and not line.lstrip().startswith("```")), "")


def with_files(message: str, files: list[Attachment]) -> str:
    """The message as sent: each file's block, then the user's words."""
    return "\n\n".join([*(f.block() for f in files), message]) if files else message


def file_prefix(message: str) -> tuple[str | None, str]:
    """Split a chat message "/file PATH rest" into (PATH, rest); a message
    without the prefix gives (None, message)."""
    return prefixed(message, FILE_PREFIX, "a path", "/file src/app.py Rename x to count")
