"""A reply that rewrites a file attached to the conversation: which file
and which of the reply's code blocks, the diff against the file as it is on
disk now, and writing it back whole or not at all.

The block that rewrites a file is the one most like it (difflib's ratio
over lines, at least MIN_LIKENESS): a reply that explains a rename in two
snippets and then gives the whole file writes back the whole file. Writing
checks that the file is still what the diff showed (a file edited since is
never overwritten), keeps its line ends, its final newline and its mode,
and goes through paths.write_atomic: a crash leaves the old file or the new
one, never half of each.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from specchat import paths
from specchat.attach import Attachment, read_attachment
from specchat.errors import SpecchatError

MIN_LIKENESS = 0.3  # a block less like every attached file than this rewrites none of them


def code_blocks(text: str) -> list[str]:
    """The fenced code blocks of a reply, in order, each without its fences."""
    return re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)


@dataclass(frozen=True)
class Rewrite:
    name: str  # the file as it was attached (a path, relative to the folder specchat runs in)
    old: str  # its text on disk when the diff was made
    new: str  # the reply's block

    def diff(self) -> list[str]:
        """The unified diff, one line each (no line ends)."""
        return list(
            difflib.unified_diff(
                self.old.splitlines(), self.new.splitlines(), f"a/{self.name}", f"b/{self.name}", lineterm=""
            )
        )

    @property
    def lines(self) -> int:
        return len(self.new.splitlines())


def find_rewrite(reply: str, files: list[Attachment]) -> Rewrite | None:
    """The attached file the reply rewrites and its new text, with the file
    read from disk again; None where no block is like any attached file.
    A file that cannot be read now is a SpecchatError."""
    best: tuple[float, Attachment, str] | None = None
    for block in code_blocks(reply):
        for f in files:
            likeness = difflib.SequenceMatcher(None, f.text.splitlines(), block.splitlines()).ratio()
            if likeness >= MIN_LIKENESS and (best is None or likeness > best[0]):
                best = (likeness, f, block)
    if best is None:
        return None
    _, f, block = best
    return Rewrite(f.name, read_attachment(f.name).text, block)


def write_back(rw: Rewrite) -> None:
    """Replace the file with the reply's block, as the diff showed it."""
    path = Path(rw.name).expanduser()
    try:
        raw = path.read_bytes()
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as err:
        raise SpecchatError(f"cannot read {rw.name} ({err.strerror or err})", hint="attach it again") from None
    if raw.decode("utf-8", errors="replace").replace("\r\n", "\n") != rw.old:
        raise SpecchatError(f"{rw.name} changed on disk since the diff", hint="show the diff again (F9)")
    text = rw.new if rw.new.endswith("\n") or not rw.old.endswith("\n") else rw.new + "\n"
    if b"\r\n" in raw:
        text = text.replace("\n", "\r\n")
    try:
        paths.write_atomic(path, text)
    except OSError as err:
        raise SpecchatError(f"cannot write {rw.name} ({err.strerror or err})", hint="nothing was changed") from None
    with contextlib.suppress(OSError):  # the new file is in place; its mode is the old one's where it can be
        os.chmod(path, mode)
