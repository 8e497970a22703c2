"""The conversation on screen: messages as they are sent and streamed, a
stored conversation reopened, the last exchange taken back."""

from __future__ import annotations

from textual import events
from textual.containers import VerticalScroll

from specchat.history.database import Message as Stored
from specchat.tui.chat.widgets import AssistantMessage, PromptInput, UserMessage, stored_message

FOLLOW_ROWS = 3  # a view this close to the end follows a streaming reply


class ChatLog(VerticalScroll):
    _end: float = 0  # where the view was left the last time it followed the reply
    _following = True  # whether it followed the last time it looked

    def on_key(self, event: events.Key) -> None:
        """A key typed while the conversation has focus (to scroll it) goes
        to the prompt, never dropped: typing always writes the message."""
        if event.is_printable and event.character:
            event.stop()
            prompt = self.screen.query_one(PromptInput)
            prompt.focus()
            prompt.insert(event.character)

    def add_exchange(self, user_text: str | None, show_rejected: bool) -> AssistantMessage:
        """The user's message (None: a regenerated reply has none) and an
        empty reply that the stream fills."""
        if user_text is not None:
            self.mount(UserMessage(user_text))
        reply = AssistantMessage(show_rejected=show_rejected)
        self.mount(reply)
        self.scroll_end(animate=False)
        return reply

    def follow(self) -> None:
        """Keep the end of the reply in view once the screen has laid the new
        text out, while the view was at the end the last time (or is now,
        after a resize); a user who scrolled up stays put."""
        self.call_after_refresh(self._follow)

    def on_resize(self, event: events.Resize) -> None:
        """A resize moves the end, and may clamp the view short of it: a view
        that followed a streaming reply before follows it on."""
        reply = self.last_reply()
        if reply is not None and reply.stats is None and self._following:
            self._end = 0
            self.follow()

    def _follow(self) -> None:
        reply = self.last_reply()
        blank = reply.blank_rows if reply is not None else 0  # reserved rows under a streaming reply stay below
        end = max(0, self.max_scroll_y - blank)
        following = self.scroll_y >= min(self._end, end) - FOLLOW_ROWS  # at the end before, or now
        self._following = following
        if not following:
            return
        if self.scroll_y != end:  # now: a deferred scroll could land after the user's own
            self.scroll_to(y=end, animate=False, immediate=True)
        self._end = self.scroll_y  # where it landed: short of a layout still settling, it follows on from there

    def last_reply(self) -> AssistantMessage | None:
        replies = self.query(AssistantMessage)
        return replies.last() if replies else None

    def shown(self) -> list[tuple[str, str]]:
        """The messages on screen, oldest first: ("you" | "reply", the text).
        A stored message that could not be read is left out."""
        return [
            ("you" if isinstance(w, UserMessage) else "reply", w.text)
            for w in self.children
            if isinstance(w, (UserMessage, AssistantMessage))
        ]

    def drop_last_exchange(self) -> bool:
        """Remove the last user message and what follows it; whether a
        finished reply was among them."""
        children = list(self.children)
        users = [i for i, w in enumerate(children) if isinstance(w, UserMessage)]
        had_reply = False
        if users:
            for w in children[users[-1] :]:
                had_reply |= isinstance(w, AssistantMessage) and w.stats is not None
                w.remove()
        return had_reply

    def show(self, messages: list[Stored], show_rejected: bool) -> None:
        """Show a stored conversation in place of what is on screen."""
        self.remove_children()
        self.mount_all(stored_message(m, show_rejected) for m in messages)
        self.scroll_end(animate=False)

    def set_show_rejected(self, show: bool) -> None:
        for reply in self.query(AssistantMessage):
            reply.set_show_rejected(show)
