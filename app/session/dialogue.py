"""A conversation's messages and the turns that extend them, the same for
a local session (chat.ChatSession) and a server's (server.session), and
the status snapshot both give."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from specchat.engine.loop import Cancel, OnIdle, OnPrefill, OnRound, Turn
from specchat.errors import SpecchatError


@dataclass(frozen=True)
class SessionStatus:
    """What the status bar and the reports show of a session, at one moment."""

    pair: str
    drafter: str
    k: int
    temp: float
    greedy: bool
    context_used: int
    n_ctx: int
    choice: str  # auto's latest decision ("" for other drafters)
    chosen: dict[str, int] | None  # how often auto picked each option this turn (None for others)
    constraint: str = ""  # what replies must match: "JSON · person.json"; "" for free text
    memory: int | None = None  # tokens the memory holds (None: this session has none, a server's)


TurnT = TypeVar("TurnT", bound=Turn)


def answered(messages: list[dict]) -> list[dict]:
    """The messages a prompt may hold: a user message that never got its
    reply (its turn failed, or the process was killed mid-reply) is left
    out, so user and assistant alternate, as strict chat templates demand."""
    out: list[dict] = []
    for m in messages:
        if m["role"] == "user" and out and out[-1]["role"] == "user":
            out.pop()
        out.append(m)
    return out[:-1] if out and out[-1]["role"] == "user" else out


class Dialogue(Generic[TurnT]):
    """The conversation's messages and the turns that extend it, the same for
    a local session and a server's: a subclass generates (`_generate`) its
    kind of Turn."""

    def __init__(self) -> None:
        self._messages: list[dict] = []  # {"role", "content"}, system excluded

    @property
    def messages(self) -> list[dict]:
        """A copy of the conversation; change it with the operations below."""
        return [dict(m) for m in self._messages]

    def replace_messages(self, messages: list[dict]) -> None:
        """Continue another conversation (a reopened one, or after a pair switch)."""
        self._messages = answered([{"role": m["role"], "content": m["content"]} for m in messages])

    def last_user_text(self) -> str | None:
        users = [m["content"] for m in self._messages if m["role"] == "user"]
        return users[-1] if users else None

    def clear(self) -> None:
        self._messages.clear()

    def drop_oldest(self) -> None:
        """Drop the oldest user message and the replies that follow it (to fit the context)."""
        self._messages.pop(0)
        while self._messages and self._messages[0]["role"] != "user":
            self._messages.pop(0)

    def on_prefill(self, tell: OnPrefill) -> None:
        """Be told (tokens read, of) as a long prompt is read before a reply;
        a server reads the prompt itself and tells nothing."""

    # --- turns ---------------------------------------------------------------------

    def reply(self, user_text: str, on_round: OnRound = None, cancel: Cancel = None, on_idle: OnIdle = None) -> TurnT:
        """Add a user message and generate the assistant's reply: each round
        goes to on_round as it is decoded; `cancel` stops the turn; on_idle
        is called while the source is silent (a server's stream; a local
        model never is), so a feed that batches shows what came. A turn
        that fails before its reply is there leaves the messages as they
        were, the older turns a prompt too long for the context would have
        dropped included."""
        with self._as_they_were_on_failure():
            self._messages = answered(self._messages)  # a message whose reply failed is not in the prompt
            self._messages.append({"role": "user", "content": user_text})
            return self._generate(on_round, cancel, on_idle)

    def regenerate(self, on_round: OnRound = None, cancel: Cancel = None, on_idle: OnIdle = None) -> TurnT:
        """Drop the last reply and generate it again; where that fails, the
        last reply is still there."""
        with self._as_they_were_on_failure():
            if self._messages and self._messages[-1]["role"] == "assistant":
                self._messages.pop()
            if not self._messages:
                raise SpecchatError("nothing to regenerate", hint="send a message first")
            return self._generate(on_round, cancel, on_idle)

    def edit_last(
        self, user_text: str, on_round: OnRound = None, cancel: Cancel = None, on_idle: OnIdle = None
    ) -> TurnT:
        """Replace the last user message (and its reply) and generate again.
        Where that fails, the last exchange stays out, as the chat takes it
        off its screen and out of the history when the edit is sent; the
        older turns are kept (`reply`)."""
        while self._messages and self._messages[-1]["role"] == "assistant":
            self._messages.pop()
        if self._messages:
            self._messages.pop()
        return self.reply(user_text, on_round, cancel, on_idle)

    @contextmanager
    def _as_they_were_on_failure(self) -> Iterator[None]:
        """The messages as they were before, where the turn inside raises
        before its reply is there. A reply it added stays, with its message:
        it was shown (a server's, whose figures were refused after it came)."""
        before = list(self._messages)  # each message is replaced, never changed in place
        try:
            yield
        except BaseException:
            last = self._messages[-1] if self._messages else None
            if last is None or last["role"] != "assistant" or any(m is last for m in before):
                self._messages = before
            raise

    def _generate(self, on_round, cancel, on_idle) -> TurnT:
        raise NotImplementedError
