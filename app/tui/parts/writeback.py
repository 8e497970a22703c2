"""F9's screens: the last reply's code against the attached file it
rewrites, as a diff, and writing it back after `w` and then `y`.

The diff is made on a worker, so a big file never freezes the chat: the
screen says "diffing N lines…" until it is ready, and Esc stops it. A diff
longer than MAX_SHOWN lines shows its first ones and says how many more
there are. What is written, and what is refused, is message/rewrite.py's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import get_current_worker

from specchat.errors import SpecchatError
from specchat.message.attach import Attachment
from specchat.message.rewrite import Changes, Rewrite, check_writable, write_back
from specchat.textsafe import safe_text

MAX_SHOWN = 2000  # diff lines drawn at most: the screen stays quick to open and scroll


class ConfirmWrite(ModalScreen[bool]):
    """y writes, anything else does not."""

    BINDINGS = [Binding("y", "dismiss(True)", "Write"), Binding("n,escape", "dismiss(False)", "Cancel")]

    def __init__(self, rw: Rewrite) -> None:
        super().__init__()
        self.rw = rw

    def compose(self) -> ComposeResult:
        f = self.rw.file
        link = os.path.abspath(os.path.expanduser(f.name)) != str(f.path)
        where = f"{f.name} (a link: the file it leads to, {f.path})" if link else f.name
        with Vertical(classes="dialog"):
            part = ""  # a snippet that only looks like the file would replace all of it
            if self.rw.lines < f.lines / 2:
                part = f" (it has {f.lines}: the reply's code may be a part of it, not the whole file)"
            yield Static(Content(safe_text(f"Write {self.rw.lines} lines to {where}{part}, replacing it?  (y / n)")))


class DiffScreen(ModalScreen[Attachment | None]):
    """The diff, made on a worker; w asks before writing it back. Dismissed
    with the file as written (the attachment it now is), or None."""

    BINDINGS = [Binding("escape,q", "close", "Close"), Binding("w", "write", "Write it back")]

    @dataclass
    class Compared(Message):
        changes: Changes | None  # None: the diff could not be made
        shown: Content  # the diff as drawn (made on the worker too), or why there is none

    def __init__(self, rw: Rewrite) -> None:
        super().__init__()
        self.rw = rw
        self.changes: Changes | None = None

    def compose(self) -> ComposeResult:
        title = f"{self.rw.name}: the last reply's code against the file as attached  (w write it back · esc)"
        with Vertical(classes="dialog", id="diff"):
            yield Static(Content(safe_text(title)), classes="dialog-title")
            with VerticalScroll():
                yield Static(Content(f"diffing {self.rw.file.lines:,} lines…"), id="diff-lines")

    def on_mount(self) -> None:
        self.compare()

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def compare(self) -> None:
        """Make the diff off the chat's thread; closing the screen stops it."""
        worker = get_current_worker()
        try:
            changes = self.rw.changes(stop=lambda: worker.is_cancelled)
            shown = diff_content(changes.diff) if changes is not None else None
        except Exception as err:  # the screen stays and says why
            self.post_message(self.Compared(None, Content(safe_text(f"the diff failed ({type(err).__name__}: {err})"))))
            return
        if changes is not None and shown is not None and not worker.is_cancelled:
            self.post_message(self.Compared(changes, shown))

    def on_diff_screen_compared(self, msg: DiffScreen.Compared) -> None:
        self.changes = msg.changes
        self.query_one("#diff-lines", Static).update(msg.shown)

    def action_close(self) -> None:
        self.workers.cancel_node(self)
        self.dismiss(None)

    def action_write(self) -> None:
        changes = self.changes
        if changes is None:
            self.notify("the diff is not ready yet (esc stops it)", timeout=3)
            return
        if not changes.diff:
            self.notify("the reply's code is the file as it is: nothing to write", timeout=3)
            return
        try:
            check_writable(self.rw)
        except SpecchatError as err:
            self.notify(err.one_line(), severity="error", timeout=10)
            return

        def confirmed(yes: bool | None) -> None:
            if not yes:
                self.notify("nothing written", timeout=3)
                return
            try:
                written = write_back(self.rw, changes)
            except SpecchatError as err:
                self.notify(err.one_line(), severity="error", timeout=10)
                return
            self.dismiss(written)

        self.app.push_screen(ConfirmWrite(self.rw), confirmed)


def diff_content(lines: list[str]) -> Content:
    """The diff's lines, added and removed in the theme's colours, the first
    MAX_SHOWN of them; the text is data, never markup."""
    if not lines:
        return Content("the reply's code is the file as it is: nothing to write")
    styles = {"+": "$success", "-": "$error", "@": "$accent"}
    out = []
    for line in lines[:MAX_SHOWN]:
        style = "bold" if line.startswith(("+++", "---")) else styles.get(line[:1], "")
        out.append(Content.styled(safe_text(line), style) if style else Content(safe_text(line)))
    if len(lines) > MAX_SHOWN:
        more = f"… and {len(lines) - MAX_SHOWN:,} more lines of the diff: too large to show whole (w writes all of it)"
        out.append(Content.styled(more, "bold $warning"))
    return Content("\n").join(out)
