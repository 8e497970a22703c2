"""Files in the chat: `@` picks one to attach, F9 writes a reply back,
F6 and F7 copy the last reply and its code.

`@` typed at the start of the prompt or after a space opens the file picker:
the files under the folder specchat runs in, narrowed as you type (fuzzy,
as the command palette matches). Enter attaches the file to the next
message, as `/file PATH` does; Esc types the `@` after all.

F9 shows the last reply's code against the attached file it rewrites (the
block most like one of the files the conversation's messages carry), as a diff against
the file on disk. There `w` asks before writing, and only `y` writes:
atomically, and only if the file is still what the diff showed
(rewrite.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.fuzzy import Matcher
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from specchat.attach import attached_in
from specchat.errors import SpecchatError
from specchat.rewrite import Rewrite, code_blocks, find_rewrite, write_back
from specchat.textsafe import safe_text

if TYPE_CHECKING:
    from textual.app import App

    from specchat.tui.controller import ChatController, Notice

MAX_FILES = 5000  # a folder with more shows the first ones found
SHOWN = 50  # matches listed at once
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


def files_under(root: Path, limit: int = MAX_FILES) -> list[str]:
    """Files under root, as paths relative to it: hidden and build folders
    left out, links not followed, at most `limit`."""
    found: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith("."))
        rel = Path(folder).relative_to(root)
        for name in sorted(names):
            if not name.startswith("."):
                found.append(str(rel / name) if rel.parts else name)
                if len(found) >= limit:
                    return found
    return found


class FilePicker(ModalScreen[str | None]):
    """Pick a file to attach: type to narrow, Enter attaches, Esc leaves."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel"), Binding("down", "down", show=False)]

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.files = files_under(root)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="file-picker"):
            yield Static("Attach a file  (type to narrow · enter attaches · esc)", classes="dialog-title")
            yield Input(placeholder="file name", id="file-query")
            yield OptionList(id="file-list")

    def on_mount(self) -> None:
        self.show_matches("")

    @on(Input.Changed)
    def narrowed(self, event: Input.Changed) -> None:
        self.show_matches(event.value)

    def show_matches(self, query: str) -> None:
        if query:
            matcher = Matcher(query)
            scored = sorted(((matcher.match(f), f) for f in self.files), key=lambda x: -x[0])
            matches = [f for score, f in scored if score > 0][:SHOWN]
        else:
            matches = self.files[:SHOWN]
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(Option(Content(safe_text(f)), id=str(i)) for i, f in enumerate(matches))
        self.matches = matches
        if matches:
            options.highlighted = 0

    @on(Input.Submitted)
    def submitted(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is not None and self.matches:
            self.dismiss(self.matches[options.highlighted])

    @on(OptionList.OptionSelected)
    def picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.matches[int(event.option.id or 0)])

    def action_down(self) -> None:
        self.query_one(OptionList).focus()


class ConfirmWrite(ModalScreen[bool]):
    """y writes, anything else does not."""

    BINDINGS = [Binding("y", "dismiss(True)", "Write"), Binding("n,escape", "dismiss(False)", "Cancel")]

    def __init__(self, rw: Rewrite) -> None:
        super().__init__()
        self.rw = rw

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Content(safe_text(f"Write {self.rw.lines} lines to {self.rw.name}, replacing it?  (y / n)")))


class DiffScreen(ModalScreen[bool]):
    """The diff; w asks before writing it back. Dismissed with whether it was written."""

    BINDINGS = [Binding("escape,q", "dismiss(False)", "Close"), Binding("w", "write", "Write it back")]

    def __init__(self, rw: Rewrite) -> None:
        super().__init__()
        self.rw = rw

    def compose(self) -> ComposeResult:
        title = f"{self.rw.name}: the last reply's code against the file on disk  (w write it back · esc)"
        with Vertical(classes="dialog", id="diff"):
            yield Static(Content(safe_text(title)), classes="dialog-title")
            with VerticalScroll():
                yield Static(diff_content(self.rw.diff()), id="diff-lines")

    def action_write(self) -> None:
        def confirmed(yes: bool | None) -> None:
            if not yes:
                self.notify("nothing written", timeout=3)
                return
            try:
                write_back(self.rw)
            except SpecchatError as err:
                self.notify(err.one_line(), severity="error", timeout=10)
                return
            self.dismiss(True)

        self.app.push_screen(ConfirmWrite(self.rw), confirmed)


def diff_content(lines: list[str]) -> Content:
    """The diff's lines, added and removed in the theme's colours; the text is data, never markup."""
    if not lines:
        return Content("the reply's code is the file as it is: nothing to write")
    styles = {"+": "$success", "-": "$error", "@": "$accent"}
    out = []
    for line in lines:
        style = "bold" if line.startswith(("+++", "---")) else styles.get(line[:1], "")
        out.append(Content.styled(safe_text(line), style) if style else Content(safe_text(line)))
    return Content("\n").join(out)


class FileView(Protocol):
    chat: ChatController

    @property
    def app(self) -> App: ...
    def notify(self, message: str, *, severity: str = "information", timeout: float | None = None) -> None: ...
    def tell(self, notice: Notice | None) -> None: ...
    def set_status(self, note: str | None = None) -> None: ...
    def reply_text(self) -> str | None: ...
    def type_in_prompt(self, text: str) -> None: ...


class FileKeys:
    """ChatScreen's keys for files and a reply's code, mixed into it."""

    def action_copy_reply(self) -> None:
        view = cast(FileView, self)
        text = view.reply_text()
        if text is not None:
            view.app.copy_to_clipboard(text)
            view.notify("reply copied", timeout=2)

    def action_copy_code(self) -> None:
        view = cast(FileView, self)
        blocks = code_blocks(view.reply_text() or "")
        if not blocks:
            view.notify("no code block in the last reply", severity="warning", timeout=3)
            return
        view.app.copy_to_clipboard("\n".join(blocks))
        view.notify("code block copied" if len(blocks) == 1 else f"{len(blocks)} code blocks copied", timeout=2)

    def pick_file(self) -> None:
        view = cast(FileView, self)

        def picked(path: str | None) -> None:
            if path is None:
                view.type_in_prompt("@")  # an @ after all: an address, a handle
                return
            view.tell(view.chat.attach_file(path))
            view.set_status()

        view.app.push_screen(FilePicker(Path.cwd()), picked)

    def action_diff(self) -> None:
        view = cast(FileView, self)
        session = view.chat.session
        text, files = view.reply_text(), attached_in(session.messages if session is not None else [])
        if not files:
            view.notify("no file attached in this chat to write back to (@ or /file PATH attaches one)", timeout=5)
            return
        try:
            rw = find_rewrite(text or "", files)
        except SpecchatError as err:
            view.notify(err.one_line(), severity="error", timeout=10)
            return
        if rw is None:
            view.notify("the last reply has no code block like an attached file", timeout=5)
            return

        def done(written: bool | None) -> None:
            if written:
                view.notify(f"wrote {rw.lines} lines to {rw.name}", timeout=5)

        view.app.push_screen(DiffScreen(rw), done)
