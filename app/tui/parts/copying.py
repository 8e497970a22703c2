"""Copying from the chat: F6 lists the messages on screen, the last reply
first in line, and Enter copies the one picked (`c` copies its code
blocks); F7 copies the last reply's code blocks at once.

A reply is copied as the user reads it once it ends: its own text, never
the rejected drafts shown while it streamed. A message of yours is copied
as it was sent, the files attached to it included. What is copied goes to
the terminal's clipboard (OSC 52, which a terminal may ignore without a
word) and to COPIED in the data folder, which is sure to hold it; the note
says both, or why the file could not be written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from specchat import paths
from specchat.message.attach import first_line
from specchat.message.rewrite import code_blocks
from specchat.textsafe import safe_text

if TYPE_CHECKING:
    from specchat.tui.parts.view import ChatView

COPIED = "copied.txt"  # in the data folder: what F6 or F7 copied last, sure to be there
LINE_CHARS = 60  # of a message's first line in the list: a row of the dialog, with its number and length
COPY_TITLE = "Copy a message  (enter: the message · c: its code blocks · esc)"


def last_reply(messages: list[tuple[str, str]]) -> str | None:
    """The last reply's text among (who, text) messages; None before the first."""
    return next((text for who, text in reversed(messages) if who == "reply"), None)


class CopyScreen(ModalScreen[tuple[int, str] | None]):
    """Pick a message to copy; dismissed with its index and what to copy of it ("message" or "code")."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel"), Binding("c", "pick('code')", "Its code")]

    def __init__(self, messages: list[tuple[str, str]]) -> None:
        super().__init__()
        self.messages = messages

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(COPY_TITLE, classes="dialog-title")
            yield OptionList(
                *(copy_option(i, who, text) for i, (who, text) in enumerate(self.messages)), id="copy-list"
            )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        replies = [i for i, (who, _) in enumerate(self.messages) if who == "reply"]
        options.highlighted = replies[-1] if replies else len(self.messages) - 1  # Enter copies the last reply
        options.focus()

    @on(OptionList.OptionSelected)
    def picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss((int(event.option.id or 0), "message"))

    def action_pick(self, what: str) -> None:
        highlighted = self.query_one(OptionList).highlighted
        if highlighted is not None:
            self.dismiss((highlighted, what))


def copy_option(i: int, who: str, text: str) -> Option:
    """One message as a line of the list: its number, who, its first line and its length (as data, never markup)."""
    lines = text.count("\n") + 1
    first = safe_text(first_line(text)) or ("(code or files only)" if text.strip() else "(empty)")
    first = first if len(first) <= LINE_CHARS else first[: LINE_CHARS - 1] + "…"  # cut as drawn: <U+009B> is 8
    return Option(Content(f"{i + 1:>3} {who:>5}: {first}  · {lines} line{'s' * (lines != 1)}"), id=str(i))


class CopyKeys:
    """The chat's copy keys (F6, F7), acting on its screen."""

    def __init__(self, view: ChatView) -> None:
        self.view = view

    def choose(self) -> None:
        """Ask which message to copy, then copy it (or its code)."""
        messages = self.view.shown_messages()
        if not messages:
            self.view.notify("nothing to copy yet: send a message first", timeout=3)
            return
        self.view.app.push_screen(CopyScreen(messages), lambda picked: self._copy_picked(messages, picked))

    def _copy_picked(self, messages: list[tuple[str, str]], picked: tuple[int, str] | None) -> None:
        if picked is None:
            return
        index, what = picked
        who, text = messages[index]
        name = "the reply" if who == "reply" else "your message"
        if what == "code":
            self._copy_code(text, name)
        else:
            self._copy(text, name)

    def code(self) -> None:
        """The last reply's code blocks, every one of them."""
        self._copy_code(last_reply(self.view.shown_messages()) or "", "the last reply")

    def _copy_code(self, text: str, name: str) -> None:
        blocks = code_blocks(text)
        if not blocks:
            self.view.notify(f"no code block in {name}", severity="warning", timeout=3)
            return
        self._copy("\n".join(blocks), "the code block" if len(blocks) == 1 else f"{len(blocks)} code blocks")

    def _copy(self, text: str, what: str) -> None:
        """To the terminal's clipboard (OSC 52: whether it arrives is the
        terminal's choice, and nothing says), and to a file that is sure to hold it."""
        view = self.view
        view.app.copy_to_clipboard(text)
        sent = f"{what} went to the terminal's clipboard (if it takes OSC 52)"
        kept = paths.data_dir() / COPIED
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            paths.write_atomic(kept, text)
        except OSError as err:
            view.notify(f"{sent}; not saved: {err.strerror or err}", severity="warning")
            return
        view.notify(f"{sent} and to {kept}", timeout=4)
