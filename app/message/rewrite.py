"""A reply that rewrites a file attached to the conversation: which file
and which of the reply's code blocks, the diff against the file, and
writing it back whole or not at all.

The files are the ones the user attached (attach.Attachment, kept beside
their messages), never names read back from a message's text. The block
that rewrites a file is the one most like it (the share of lines they have
in common, at least MIN_LIKENESS): a reply that explains a rename in two
snippets and then gives the whole file writes back the whole file.

Nothing is written to a file that is no longer as it was attached (its
size, mtime and the hash of its bytes; a file that changed is attached
again), nor to a read-only file, nor to one with other hard links (a new
file in its place would part them). A link is written through: its target,
the file attached, is replaced and the link stays. What the file is stays
as it was: its byte order mark, each line's own line end (CR LF, LF or a
lone CR; a line the reply adds takes the file's most common one), a
missing final newline, its mode. paths.replace_bytes writes it: a crash
leaves the old file or the new one, never half of each.
"""

from __future__ import annotations

import codecs
import difflib
import hashlib
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from specchat import paths
from specchat.errors import SpecchatError
from specchat.message import linediff
from specchat.message.attach import Attachment, text_of

MIN_LIKENESS = 0.3  # a block less like every attached file than this rewrites none of them


def code_blocks(text: str) -> list[str]:
    """The fenced code blocks of a reply, in order, each without its fences."""
    return re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)


def lines_of(text: str) -> list[str]:
    """A text's lines split at newlines alone (str.splitlines would split
    at a form feed too, which a source file may hold)."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


@dataclass(frozen=True)
class Changes:
    """What the reply changes in the file: difflib's opcodes, and the diff's lines."""

    codes: list[linediff.Opcode]
    diff: list[str]


@dataclass(frozen=True)
class Rewrite:
    file: Attachment  # the file as it was attached
    new: str  # the reply's block, every line end a newline

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def lines(self) -> int:
        return len(lines_of(self.new))

    def changes(self, stop: Callable[[], bool] = lambda: False) -> Changes | None:
        """The diff of the file into the block (on a worker: a big file
        takes a while); None where `stop()` said to give up."""
        old, new = lines_of(self.file.text), lines_of(self.new)
        codes = linediff.opcodes(old, new, stop)
        if codes is None:
            return None
        return Changes(codes, list(linediff.unified(old, new, codes, f"a/{self.name}", f"b/{self.name}")))


def find_rewrite(reply: str, files: list[Attachment]) -> Rewrite | None:
    """The attached file the reply rewrites and its new text; None where no
    block is like any attached file. A file that is no longer as it was
    attached is a SpecchatError."""
    best: tuple[float, Attachment, str] | None = None
    for block in code_blocks(reply):
        for f in files:  # the share of lines in common, in any order: linear, where difflib's ratio is not
            likeness = difflib.SequenceMatcher(None, lines_of(f.text), lines_of(block), autojunk=False).quick_ratio()
            if likeness >= MIN_LIKENESS and (best is None or likeness > best[0]):
                best = (likeness, f, block)
    if best is None:
        return None
    _, f, block = best
    current(f)
    return Rewrite(f, re.sub(r"\r\n?", "\n", block))


def current(f: Attachment) -> tuple[bytes, os.stat_result]:
    """The attached file's bytes and stat, read again; a SpecchatError
    where it is no longer the file attached, as it was."""
    again = "attach it again (@ or /file PATH)"
    if os.path.realpath(f.path) != str(f.path):
        raise SpecchatError(f"{f.name} is no longer where it was attached ({f.path})", hint=again)
    try:
        data, st = paths.read_regular_stat(f.path, f.size)
    except paths.TooBig:
        raise SpecchatError(f"{f.name} changed since it was attached", hint=again) from None
    except OSError as err:
        raise SpecchatError(f"cannot read {f.name} ({err.strerror or err})", hint=again) from None
    if (st.st_size, st.st_mtime_ns) != (f.size, f.mtime_ns) or hashlib.sha256(data).hexdigest() != f.digest:
        raise SpecchatError(f"{f.name} changed since it was attached", hint=again)
    return data, st


def check_writable(rw: Rewrite) -> tuple[bytes, os.stat_result]:
    """Why the file cannot be written back (a SpecchatError), or its bytes and stat."""
    data, st = current(rw.file)
    if not st.st_mode & 0o222 or not os.access(rw.file.path, os.W_OK):
        raise SpecchatError(f"{rw.name} is read-only", hint="make it writable (chmod u+w) first, or leave it be")
    if st.st_nlink > 1:
        raise SpecchatError(
            f"{rw.name} has {st.st_nlink - 1} other hard link(s): a new file in its place would part them",
            hint="copy the reply's code by hand (F7), or attach a file that has no other links",
        )
    return data, st


def write_back(rw: Rewrite, changes: Changes) -> Attachment:
    """Replace the attached file with the reply's block, as the diff showed
    it; the file as it is now, to attach in the old one's place."""
    raw, st = check_writable(rw)
    data = _as_file(raw, rw.new, changes.codes)
    try:
        new = paths.replace_bytes(rw.file.path, data, st)
    except OSError as err:
        raise SpecchatError(f"cannot write {rw.name} ({err.strerror or err})", hint="nothing was changed") from None
    f = rw.file
    return Attachment(
        f.name, text_of(f.name, data), f.path, new.st_size, new.st_mtime_ns, hashlib.sha256(data).hexdigest()
    )


def _as_file(raw: bytes, new: str, codes: list[linediff.Opcode]) -> bytes:
    """The new text as the old file would hold it: its byte order mark,
    each kept line's line end (a new line: the file's most common one), a
    final newline only where the old file had one."""
    bom = raw.startswith(codecs.BOM_UTF8)
    parts = re.split(r"(\r\n|\r|\n)", raw.removeprefix(codecs.BOM_UTF8).decode("utf-8"))
    ends = parts[1::2] + ([""] if parts[-1] else [])  # each old line's end; "": the last line has none
    usual = Counter(e for e in ends if e).most_common(1)[0][0] if any(ends) else "\n"
    new_lines = lines_of(new)
    new_ends = [usual] * len(new_lines)
    for tag, i1, i2, j1, j2 in codes:
        if tag in ("equal", "replace"):  # a line kept, or changed in its place, keeps its own end
            for k in range(min(i2 - i1, j2 - j1)):
                new_ends[j1 + k] = ends[i1 + k] or usual
    if new_ends and ends and ends[-1] == "":
        new_ends[-1] = ""  # the old file had no final newline: nor has the new one
    text = "".join(line + end for line, end in zip(new_lines, new_ends))
    try:
        return (codecs.BOM_UTF8 if bom else b"") + text.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecchatError("the reply's code is not text that UTF-8 can hold", hint="nothing was changed") from None
