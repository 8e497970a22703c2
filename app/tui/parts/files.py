"""Files in the chat: `@` picks one to attach, F9 writes a reply back
(copying from the chat is tui/parts/copying.py).

`@` typed at the start of the prompt or after a space opens the file picker:
the files under the folder specchat runs in, narrowed as you type (fuzzy,
as the command palette matches). They are found on a worker, the list
growing as the walk goes (Esc stops it), MAX_FILES at most: the picker says
when it shows only the first ones. Binary files (a NUL in their first
SNIFF bytes, which attaching refuses) are left out, and counted under the
list; each file listed shows its size. Enter attaches the file to the next
message, as a message that starts `/file PATH` does; Esc types the `@` after all.

F9 shows the last reply's code against the attached file it rewrites (the
block most like one of the files attached to the conversation's messages,
as the conversation keeps them: never a name read from a message's text),
as a diff made on a worker (tui/parts/writeback.py). There `w` asks before
writing, and only `y` writes: atomically, and only while the file is still
as it was attached (message/rewrite.py).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.fuzzy import Matcher
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from specchat.checks import blank
from specchat.errors import SpecchatError
from specchat.message.attach import Attachment, file_prefix, holds_nul
from specchat.message.rewrite import find_rewrite
from specchat.paths import open_regular
from specchat.textsafe import safe_text
from specchat.tui.parts.copying import last_reply
from specchat.tui.parts.writeback import DiffScreen
from specchat.walk import walk

if TYPE_CHECKING:
    from specchat.tui.parts.view import ChatView

MAX_FILES = 5000  # the picker lists at most this many, and says so when a folder holds more
MAX_FOLDERS = 50_000  # folders it walks at most: a tree bigger than that (a home folder, a disk) is left unwalked
SHOWN = 50  # matches listed at once
BATCH_SECONDS = 0.1  # how often the list grows while the walk goes on
SNIFF = 4096  # bytes read of each file found: a NUL among them says binary, as attaching finds it
SKIPPED = {
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".mypy_cache",
    "dist",
    "build",
}


def files_under(root: Path) -> Iterator[list[str]]:
    """For each folder under root as the walk meets it (walk.walk: no
    recursion, links to folders not followed), its files as paths relative
    to root: hidden and build folders left out, and hidden files. A folder
    with none gives an empty list, so a caller counts folders and may stop
    at any of them."""
    for folder, names in walk(root, keep=lambda name: name not in SKIPPED and not name.startswith(".")):
        rel = folder.relative_to(root)
        yield [str(rel / name) if rel.parts else name for name in names if not name.startswith(".")]


def is_binary(path: Path) -> bool:
    """A regular file whose first SNIFF bytes hold a NUL, which attaching
    refuses: the picker leaves it out. Opened without following a link or
    blocking; a FIFO, a device or a folder is never opened."""
    try:
        st = os.lstat(path)  # before any open: opening a FIFO would wake whoever waits to write to it
        if not stat.S_ISREG(st.st_mode) or not st.st_size:
            return False
        with open_regular(path) as f:
            return holds_nul(f.read(SNIFF))
    except OSError:
        return False  # listed: attaching it says what is wrong


def size_label(path: Path) -> str:
    """What the picker shows beside a file: its size, read from the entry
    itself (never opened, never followed: a FIFO or a link costs nothing)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "gone"
    except OSError:  # a path too long to name, a folder it may not read
        return "?"
    if stat.S_ISLNK(st.st_mode):
        return "link"
    if not stat.S_ISREG(st.st_mode):
        return "not a file"
    size = float(st.st_size)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


class FilePicker(ModalScreen[str | None]):
    """Pick a file to attach: type to narrow, Enter attaches, Esc leaves
    (as does Enter where no file matches), and what was typed after the @
    goes back to the prompt. The files are found on a worker and the list
    grows as they come: a big folder never holds up the chat, and Esc
    stops the walk."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel"), Binding("down", "down", show=False)]

    @dataclass
    class Found(Message):
        paths: list[tuple[str, str]]  # files found since the last message, each with its size_label
        binary: int = 0  # binary files found since then, not listed
        done: bool = False  # the walk has ended
        cut: str = ""  # why the list stops short of every file ("" where it holds them all)

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.files: list[str] = []
        self.sizes: dict[str, str] = {}  # each file's size_label
        self.binary = 0  # binary files the walk found and left out
        self.matches: list[str] = []
        self.typed = ""  # what was typed after the @: the prompt's again where no file is picked

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="file-picker"):
            yield Static("Attach a file  (type to narrow · enter attaches · esc)", classes="dialog-title")
            yield Input(placeholder="file name", id="file-query")
            yield OptionList(id="file-list")
            yield Static(Content("listing the files…"), id="file-count")

    def on_mount(self) -> None:
        self.show_matches("")
        self.list_files()

    @work(thread=True, exclusive=True, group="file-picker", exit_on_error=False)
    def list_files(self) -> None:
        """Walk the folder, MAX_FILES files and MAX_FOLDERS folders at most,
        posting what it finds every BATCH_SECONDS; the picker's closing
        cancels the worker, and the walk stops at the next folder."""
        worker = get_current_worker()
        batch: list[tuple[str, str]] = []
        found, binary, sent, cut = 0, 0, 0.0, ""  # the first files show at once
        try:
            for folders, names in enumerate(files_under(self.root), 1):
                if worker.is_cancelled:
                    return
                if folders > MAX_FOLDERS:
                    cut = f"the walk stopped after {MAX_FOLDERS:,} folders: {found:,} files shown"
                    break
                paths = [p for p in names if not is_binary(self.root / p)]
                binary += len(names) - len(paths)
                if found + len(paths) > MAX_FILES:
                    batch += self._sized(paths[: MAX_FILES - found])
                    found = MAX_FILES
                    cut = f"first {MAX_FILES:,} files shown"
                    break
                batch += self._sized(paths)
                found += len(paths)
                if (batch or binary) and time.monotonic() - sent >= BATCH_SECONDS:
                    self.post_message(self.Found(batch, binary))
                    batch, binary, sent = [], 0, time.monotonic()
        except Exception as err:  # the picker stays; say what stopped the walk
            cut = f"the walk stopped ({type(err).__name__}: {err}): {found:,} files shown"
        self.post_message(self.Found(batch, binary, done=True, cut=cut))

    def _sized(self, paths: list[str]) -> list[tuple[str, str]]:
        return [(p, size_label(self.root / p)) for p in paths]

    def on_file_picker_found(self, msg: FilePicker.Found) -> None:
        self.files += [p for p, _ in msg.paths]
        self.sizes.update(msg.paths)
        self.binary += msg.binary
        if msg.done:
            count = msg.cut or (f"{len(self.files):,} files" if self.files else "no files here")
            count += f" · {self.binary:,} binary not listed" if self.binary else ""
        else:
            count = f"listing the files… {len(self.files):,} so far"
        self.query_one("#file-count", Static).update(Content(safe_text(count)))
        self.show_matches(self.query_one(Input).value)

    @on(Input.Changed)
    def narrowed(self, event: Input.Changed) -> None:
        self.typed = event.value
        self.show_matches(event.value)

    def show_matches(self, query: str) -> None:
        if query:
            matcher = Matcher(query)
            scored = sorted(((matcher.match(f), f) for f in self.files), key=lambda x: -x[0])
            matches = [f for score, f in scored if score > 0][:SHOWN]
        else:
            matches = self.files[:SHOWN]
        if matches == self.matches and self.matches:
            return  # more files came, the list is the same: the highlight stays where the user moved it
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(
            Option(Content.assemble(safe_text(f), (f"  {self.sizes.get(f, '')}", "dim")), id=str(i))
            for i, f in enumerate(matches)
        )
        self.matches = matches
        if matches:
            options.highlighted = 0

    @on(Input.Submitted)
    def submitted(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is not None and self.matches:
            self.dismiss(self.matches[options.highlighted])
        else:
            self.dismiss(None)  # no file by that name: it was text after all

    @on(OptionList.OptionSelected)
    def picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.matches[int(event.option.id or 0)])

    def action_down(self) -> None:
        self.query_one(OptionList).focus()


class FileKeys:
    """The chat's keys for files (@, F9), acting on its screen."""

    def __init__(self, view: ChatView) -> None:
        self.view = view

    def attach(self, text: str) -> str | None:
        """A "/file PATH rest" message attaches PATH: the rest to send, or
        None when there is nothing to send yet (or the file cannot be read)."""
        view = self.view
        try:
            path, rest = file_prefix(text)
        except SpecchatError as err:
            view.notify(err.one_line(), title="file", severity="error", timeout=10)
            return None
        if path is None:
            return text
        notice = view.chat.attach_file(path)
        view.tell(notice)
        view.set_status()
        if notice.severity == "error":
            return None
        if blank(rest):
            view.clear_prompt()
            return None
        return rest

    def pick(self) -> None:
        """The file picker (an @ typed in the prompt): the file picked is attached."""
        view = self.view

        picker = FilePicker(Path.cwd())

        def picked(path: str | None) -> None:
            if path is None:
                view.type_in_prompt("@" + picker.typed)  # an @ after all (an address, @property), as typed
                return
            view.tell(view.chat.attach_file(path))
            view.set_status()

        view.app.push_screen(picker, picked)

    def diff(self) -> None:
        """Show the last reply's rewrite of an attached file as a diff, to write back or not."""
        view = self.view
        conversation = view.chat.conversation
        files = conversation.attached()
        if not files:
            view.notify(REOPENED if conversation.reopened else NO_FILE, timeout=6)
            return
        try:
            rw = find_rewrite(last_reply(view.shown_messages()) or "", files)
        except SpecchatError as err:
            view.notify(err.one_line(), severity="error", timeout=10)
            return
        if rw is None:
            view.notify("the last reply has no code block like an attached file", timeout=5)
            return

        def done(written: Attachment | None) -> None:
            if written is not None:
                conversation.rewritten(rw.file, written)  # the next F9 diffs against the file as written
                view.notify(f"wrote {rw.lines} lines to {rw.name}", timeout=5)

        view.app.push_screen(DiffScreen(rw), done)


NO_FILE = "no file attached in this chat to write back to (@ or /file PATH attaches one)"
REOPENED = (
    "no file attached since this conversation was reopened: files attached before are not kept"
    " for writing back (attach the file again: @ or /file PATH)"
)
