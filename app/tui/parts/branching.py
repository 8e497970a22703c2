"""Branches in the chat (the history's tree is history/tree.py).

ctrl+b lists the conversation's messages. Picking one of yours makes a
branch that holds what came before it and puts your message in the prompt,
to edit and send; picking a reply makes a branch that holds what came
before its question and asks it again. Either way the old branch stays as
it was. alt+← and alt+→ step through the conversation's branches, and the
status bar says which one is on screen ("branch 2/3").

A reply asked again in a branch drafts from its sibling (the memory holds
every branch's replies): when it ends, the chat says its α beside the α of
the reply it branched from.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from specchat.display import NOT_MEASURED, measured_alpha, number
from specchat.history.database import Message as Stored
from specchat.message.attach import first_line
from specchat.textsafe import safe_text

if TYPE_CHECKING:
    from specchat.tui.parts.view import ChatView

BRANCH_TITLE = "Branch from a message  (enter: yours to edit and send again, a reply to have again · esc)"


class BranchScreen(ModalScreen[int | None]):
    """Pick the message to branch from; dismissed with its index."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, messages: list[Stored]) -> None:
        super().__init__()
        self.messages = messages

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(BRANCH_TITLE, classes="dialog-title")
            yield OptionList(*(message_option(i, m) for i, m in enumerate(self.messages)), id="branch-list")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        users = [i for i, m in enumerate(self.messages) if m.role == "user" and not m.problem]
        options.highlighted = users[-1] if users else len(self.messages) - 1  # Enter edits the last question
        options.focus()

    @on(OptionList.OptionSelected)
    def pick(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id or 0))


def message_option(i: int, m: Stored) -> Option:
    """One message as a line of the list: its number, who, its first line (as data, never markup)."""
    who = "you" if m.role == "user" else "reply"
    first = first_line(m.content) if not m.problem else "(unreadable)"
    text = safe_text(f"{i + 1:>3} {who:>5}: {first[:100]}")
    return Option(Content(text), id=str(i), disabled=bool(m.problem))


class Branches:
    """The chat's branch keys (ctrl+b, alt+← alt+→), acting on its screen."""

    def __init__(self, view: ChatView) -> None:
        self.view = view

    def choose(self) -> None:
        """Ask which message to branch from, then branch there."""
        view = self.view
        if view.busy():
            return
        conv = view.chat.conversation
        if conv.history is None:
            view.notify("branches live in the history, which is off in this session", severity="warning")
            return
        try:
            messages = conv.stored_messages()
        except (sqlite3.Error, KeyError) as err:
            view.notify(f"cannot read this conversation from the history ({err})", severity="warning")
            return
        if not messages:
            view.notify("nothing to branch from yet: send a message first", timeout=4)
            return
        view.app.push_screen(BranchScreen(messages), lambda i: self._branch_from(messages, i))

    def _branch_from(self, messages: list[Stored], index: int | None) -> None:
        view = self.view
        if index is None or view.busy():
            return
        asked = index if messages[index].role == "user" else index - 1  # the message of yours the branch sends again
        if asked < 0 or messages[asked].role != "user" or messages[asked].problem:
            view.notify("that reply has no message of yours before it to ask again", severity="warning")
            return
        try:
            view.load_conversation(view.chat.conversation.fork(asked))
        except (sqlite3.Error, KeyError) as err:
            view.notify(f"cannot make the branch in the history ({err})", severity="warning")
            return
        text, where = messages[asked].content, view.chat.conversation.branch
        if asked == index:
            view.edit_in_prompt(text, f"{where}: edit your message and send it; the old branch stays (alt+← alt+→)")
            return
        view.chat.ask_again(messages[index].stats or {})
        view.notify(f"{where}: asking again; the old branch stays (alt+← alt+→)", timeout=4)
        view.start("reply", text)

    def step(self, step: int) -> None:
        """Show this conversation's next (1) or previous (-1) branch."""
        view = self.view
        if view.busy():
            return
        conv = view.chat.conversation
        try:
            family = conv.family()
        except sqlite3.Error as err:
            view.notify(f"cannot read the history ({err})", severity="warning")
            return
        if len(family) < 2 or conv.id not in family:
            view.notify("this conversation has no branches (ctrl+b makes one)", timeout=3)
            return
        view.load_conversation(family[(family.index(conv.id) + step) % len(family)])
        view.notify(conv.branch, timeout=2)


def branch_note(stats: dict, before: dict | None) -> str | None:
    """What a reply asked again in a branch says when it ends (`before`: the
    stats of the reply it branched from; None: the reply is no such branch).
    An α not measured (a server that sent no speculation data) says so."""
    if before is None:
        return None
    alpha, was = (number(measured_alpha(s), missing=NOT_MEASURED) for s in (stats, before))
    return f"this branch's reply: α {alpha} · the reply it branched from: α {was}"
