"""What a turn under way gives back where it fails, so a failure loses
nothing the user had: the message as typed and its files go back to the
prompt, to send again; a regenerate's old reply, hidden while the new one
streams, shows again and stays in the history. It leaves the screen and
the history only once the new reply is there.
"""

from __future__ import annotations

from specchat.message.attach import Attachment
from specchat.tui.chat.widgets import AssistantMessage, PromptInput
from specchat.tui.state.controller import ChatController


class TakeBack:
    def __init__(self) -> None:
        self.typed: tuple[str, list[Attachment]] | None = None  # the message under way and its files
        self.replacing: AssistantMessage | None = None  # a regenerate's old reply, hidden

    def sent(self, text: str, files: list[Attachment]) -> None:
        self.typed = (text, files)

    def regenerating(self, old: AssistantMessage | None, chat: ChatController) -> None:
        """A regenerate begins: the last reply (None: the last message is no
        reply) is hidden, to go once the new one is here."""
        if old is None:
            chat.conversation.drop_last_reply(False)
            return
        old.display = False
        self.replacing = old
        chat.conversation.regenerating()

    def replaced(self, chat: ChatController) -> None:
        """The turn's reply is here: a regenerate's old one goes, from the screen and the history."""
        if self.replacing is not None:
            self.replacing.remove()
            chat.conversation.drop_last_reply(True)

    def failed(self, reply: AssistantMessage, prompt: PromptInput, chat: ChatController) -> str:
        """The turn failed: what it took is given back; a line saying so ("" for none)."""
        if self.replacing is not None:
            reply.remove()  # the failure is in the notice; the old reply stands where it was
            self.replacing.display = True
            return "; the last reply is kept"
        if self.typed is not None and not prompt.text.strip():  # unless the user typed on meanwhile
            text, files = self.typed
            prompt.text = text
            chat.attachments[:0] = files
            return "; your message is back in the prompt"
        return ""

    def clear(self) -> None:
        self.typed = self.replacing = None
