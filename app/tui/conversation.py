"""The chat's conversation: the one owner of its messages (in the session,
for the prompt), its record in the history database and the stats of each
reply. The app asks it to change; the widgets only render what it holds.

A history that fails mid-chat (the disk filled up, the file went read-only)
turns saving off with one warning; the chat goes on.

It also keeps a local session's memory (drafters/memory.py) in step with
the history: filled from the stored replies when a pair loads, on a thread
of its own so the first reply never waits; told which conversation each
reply belongs to, and which conversation was deleted; emptied while the
chat's memory is off.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from specchat.history import Conversation as StoredConversation
from specchat.history import History, title_for
from specchat.history import Message as Stored

if TYPE_CHECKING:
    from specchat.chat import ChatSession
    from specchat.tui.models import Session


class Conversation:
    def __init__(self, history: History | None, warn: Callable[[str], None]) -> None:
        self.history = history
        self.warn = warn  # says once that saving stopped
        self.session: Session | None = None
        self.id: int | None = None  # the history's conversation id, once something was saved
        self.turns: list[dict] = []  # stats of each reply, for the stats panel
        self.memory_on = True  # the chat's setting: draft from this user's earlier replies
        if history is not None:
            history.on_delete.append(self._forget)

    # --- the session follows the conversation ----------------------------------------

    def attach(self, session: Session) -> None:
        """A newly loaded session (another pair) continues this conversation."""
        if self.session is not None:
            session.replace_messages(self.session.messages)
        self.session = session
        self.set_memory(self.memory_on)  # the chat's setting carries over to the new session

    @property
    def last_is_reply(self) -> bool:
        msgs = self.session.messages if self.session else []
        return bool(msgs) and msgs[-1]["role"] == "assistant"

    def last_user_text(self) -> str | None:
        return self.session.last_user_text() if self.session else None

    # --- changes ------------------------------------------------------------------------

    def user_sent(self, text: str) -> None:
        """The session adds the message itself when it replies; here it is saved."""
        self._save(Stored("user", text), title=text)
        self._own()

    def replied(self, text: str, finish: str, stats: dict, spans: list[dict]) -> None:
        self._save(Stored("assistant", text, finish, stats, spans))
        self.turns.append(stats)

    def drop_last_reply(self, had_reply: bool) -> None:
        """Before a regenerate: the session drops its last reply itself."""
        if had_reply and self.turns:
            self.turns.pop()
        self._drop_last("assistant")
        self._own()

    def drop_last_exchange(self, had_reply: bool) -> None:
        """Before an edit: the last user message and its reply go."""
        if had_reply and self.turns:
            self.turns.pop()
        self._drop_last("user")

    def open(self, conv_id: int) -> StoredConversation:
        """Reopen a stored conversation; returns it for the widgets to render.
        A message that could not be read is shown marked, and left out of the prompt."""
        assert self.history is not None  # the chat offers stored conversations only while it has a history
        conv = self.history.load(conv_id)
        self.id = conv.id
        readable = [m for m in conv.messages if not m.problem]
        self.turns = [m.stats for m in readable if m.role == "assistant" and m.stats]
        if self.session is not None:
            self.session.replace_messages([{"role": m.role, "content": m.content} for m in readable])
        return conv

    def new(self) -> None:
        if self.session is not None:
            self.session.clear()
        self.id = None
        self.turns = []

    # --- the memory ----------------------------------------------------------------------

    def set_memory(self, on: bool) -> None:
        """Draft from this user's earlier replies, or not (off empties the memory)."""
        self.memory_on = on
        local = self._local()
        if local is not None:
            local.set_memory(on)
            self._fill_memory()

    def _local(self) -> ChatSession | None:
        """The session, where it is a local pair's: only it keeps a memory."""
        from specchat.chat import ChatSession

        return self.session if isinstance(self.session, ChatSession) else None

    def _fill_memory(self) -> None:
        local = self._local()
        if local is None or self.history is None or not self.memory_on:
            return
        ticket = local.memory.ticket()  # a conversation deleted from here on stays out
        try:
            replies = self.history.replies()
        except sqlite3.Error as err:
            self._stop_saving(err)
            return
        threading.Thread(target=local.remember, args=(replies, ticket), name="memory-fill", daemon=True).start()

    def _own(self) -> None:
        """The next reply joins the memory as this conversation's."""
        local = self._local()
        if local is not None:
            local.memory_owner = self.id

    def _forget(self, conv_id: int) -> None:
        local = self._local()
        if local is not None:
            local.forget(conv_id)

    # --- the history ---------------------------------------------------------------------

    def _save(self, msg: Stored, title: str = "") -> None:
        if self.history is None:
            return
        try:
            if self.id is None:
                pair = self.session.pair if self.session else ""
                self.id = self.history.new_conversation(title_for(title or msg.content), pair)
            self.history.add_message(self.id, msg)
        except sqlite3.Error as err:
            self._stop_saving(err)

    def _drop_last(self, role: str) -> None:
        if self.history is None or self.id is None:
            return
        try:
            self.history.drop_last(self.id, role)
        except sqlite3.Error as err:
            self._stop_saving(err)

    def _stop_saving(self, err: Exception) -> None:
        self.history = None
        self.warn(f"cannot save to the history ({err}); chatting without saving from now on")
