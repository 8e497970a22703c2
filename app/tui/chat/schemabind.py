"""Binding a JSON schema to the chat's replies (F8, or a message that starts
with "/schema FILE"): the file is read and compiled to a grammar on a
worker, the status bar says so meanwhile, and a notice says how it went;
"off" frees the replies again. A component of the app, not a mixin: it
holds the app and reaches it only through what the app shows to all."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from textual.message import Message

from specchat.checks import blank
from specchat.errors import SpecchatError
from specchat.tui.chat.chatscreen import ChatScreen
from specchat.tui.chat.widgets import PromptInput
from specchat.tui.parts.screens import TextPrompt
from specchat.tui.state.controller import ChatController


@dataclass
class SchemaBound(Message):
    """A schema was bound (or "off" freed the replies) on a worker, or could not be."""

    then_send: str | None  # the rest of a "/schema FILE rest" message, to send once bound
    error: str = ""
    warning: str = ""  # keywords the grammar ignores


class Host(Protocol):
    """What the binder uses of the app (SpecchatApp has it all)."""

    chat: ChatController
    chat_screen: ChatScreen

    def notify(
        self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None
    ) -> None: ...
    def push_screen(self, screen: Any, callback: Any = None) -> Any: ...
    def post_message(self, message: Message) -> bool: ...
    def run_worker(
        self, work: Any, *, thread: bool = False, group: str = "default", exit_on_error: bool = True
    ) -> Any: ...


class SchemaBinder:
    def __init__(self, app: Host) -> None:
        self.app = app

    def ask(self) -> None:
        """F8: ask for the file's path."""
        app = self.app
        if app.chat_screen.busy() or app.chat.session is None:
            return
        title = "Reply as JSON matching… (a JSON schema file's path; off: free text)"
        app.push_screen(TextPrompt(title), lambda path: self.bind(path) if path else None)

    def bind(self, path: str, then_send: str | None = None) -> None:
        """Constrain the next replies to the JSON schema file at `path` ("off":
        free text again), bound on a worker; then send `then_send` (the rest of
        a "/schema FILE rest" message). A file that cannot be used is an error
        notice, and the message stays in the prompt to fix the path."""
        app, chat = self.app, self.app.chat
        if chat.session is None or app.chat_screen.busy():
            return
        if path == "off":
            chat.session.set_constraint(None)
            app.post_message(SchemaBound(then_send))
            return
        chat.binding_started(Path(path).name)
        app.chat_screen.set_status(note=f"binding {chat.binding}…")
        work = partial(self._bind, chat.session, path, then_send)
        app.run_worker(work, thread=True, group="schema", exit_on_error=False)

    def _bind(self, session, path: str, then_send: str | None) -> None:
        """On the worker: read the file and bind it; the app hears how it went."""
        from specchat.decoding.schema import load_schema

        try:
            spec = load_schema(path, warn=None)
            session.set_constraint(spec)
        except SpecchatError as err:
            self.app.post_message(SchemaBound(then_send, error=err.one_line()))
        except Exception as err:  # the app stays: say what happened
            self.app.post_message(SchemaBound(then_send, error=f"{type(err).__name__}: {err}"))
        else:
            self.app.post_message(SchemaBound(then_send, warning=spec.warning))

    def bound(self, msg: SchemaBound) -> None:
        """Back on the app's thread: say how it went, then send what waited for it."""
        app, chat = self.app, self.app.chat
        chat.binding_ended()
        app.chat_screen.set_status(note="")
        if msg.error:
            app.notify(msg.error, title="schema", severity="error", timeout=10)
            return
        if msg.warning:
            app.notify(msg.warning, title="schema", severity="warning", timeout=15)
        if chat.session is None:  # the pair failed to load meanwhile
            return
        label = chat.session.status().constraint
        app.notify(f"replies must match {label}" if label else "replies are free text again", timeout=4)
        if msg.then_send is None:  # from F8: the prompt is the user's
            return
        if msg.then_send and not blank(msg.then_send):
            app.chat_screen.send(msg.then_send)
        else:
            app.chat_screen.query_one(PromptInput).clear()
