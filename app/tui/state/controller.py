"""The chat's state and rules, without a screen: which drafter and k the
next round runs with, whether a reply, a schema binding or an edit is under
way, which session the chat drives, and the status bar's figures.

SpecchatApp is the view: it routes keys and worker messages here, shows
the Notice a rule returns, and renders `status()`. Nothing here imports
Textual, so the rules are tested as plain Python.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specchat.drafters import NEEDS_CONSTRAINT, USES_DRAFT_MODEL
from specchat.errors import SpecchatError
from specchat.message.attach import Attachment, read_attachment
from specchat.tui.state.conversation import Conversation
from specchat.tui.state.models import Session

if TYPE_CHECKING:
    from specchat.engine.loop import Turn

DRAFT_LOADING = "loading the draft model: the reply goes on once it has loaded"


@dataclass(frozen=True)
class Notice:
    """A line for the user (a Textual toast, in the app)."""

    text: str
    severity: str = "information"  # "warning", "error"
    timeout: float = 3
    title: str = ""


@dataclass
class Status:
    """What the status bar shows."""

    pair: str = ""
    drafter: str = ""
    k: int = 0
    temp: float = 0.0
    used: int = 0
    n_ctx: int = 0
    live_tok_s: float | None = None  # while generating
    note: str = ""  # loading…, no model, …
    choice: str = ""  # auto's latest decision while generating, e.g. "ngram k=6"
    constraint: str = ""  # what replies must match ("JSON · person.json"), shown as a mark
    attached: str = ""  # the files the next message takes along ("app.py · 40 lines")
    branch: str = ""  # "branch 2/3" where the conversation has branches
    system: bool = False  # the conversation has a system prompt
    reading: tuple[int, int] | None = None  # (tokens read, of) while a long prompt is read


class ChatController:
    """One chat's state. `drafter` is the drafter chosen (the engine takes
    it at its next round); `chosen_k` is the k given for every drafter
    (--k, or k in settings.toml), or None while each drafter runs at its own
    k (the session looks it up), as `run` and `bench` do; `k_for` holds a k picked
    with the keys, for the drafter it was picked under alone (never saved)."""

    def __init__(self, conversation: Conversation, drafter: str, k: int | None = None) -> None:
        self.conversation = conversation
        self.session: Session | None = None
        self.drafter = drafter
        self.chosen_k = k
        self.k_for: dict[str, int] = {}  # drafter -> the k picked for it with the keys
        self.generating = False
        self.binding = ""  # the schema file being bound on a worker, if one is
        self.editing = False  # the prompt holds the last message, to resend in its place
        self.branched_from: dict | None = None  # stats of the reply a branch asks again for (branching.py)
        self.cancel_event = threading.Event()
        self.live_tok_s: float | None = None  # while generating
        self.reading: tuple[int, int] | None = None  # (tokens read, of) while a long prompt is read
        self.auto_choice = ""  # what auto picked for the latest rounds, while generating
        self.attachments: list[Attachment] = []  # files the next message takes along (/file PATH)
        self.draft_loading = False  # a switch mid-reply waits for the draft model to load: the status says so

    # --- what may happen now ---------------------------------------------------------

    def busy(self) -> Notice | None:
        """Why a new turn, pair, schema or conversation must wait, or None."""
        if self.generating:
            return Notice("still generating: Esc stops it", "warning")
        if self.binding:
            return Notice(f"still binding {self.binding}: a moment", "warning")
        return None

    def replying_to(self) -> int | None:
        """The stored conversation a reply is being written to now (F3 will not delete it), or None."""
        return self.conversation.id if self.generating else None

    # --- the drafter and k --------------------------------------------------------------

    def k_to_open(self) -> int | None:
        """The k a pair opens with: the one chosen, else None, the drafter's
        own (or, on a pair switch, the k the current session runs at)."""
        if self.session is not None:
            return self.session.k
        return self.k_of(self.drafter)

    def k_of(self, name: str) -> int | None:
        """The k a drafter runs at: the one picked for it, else the one given
        for every drafter, else None: its own (the session knows it)."""
        return self.k_for.get(name) or self.chosen_k

    def cycle_drafter(self) -> Notice | None:
        """off → ngram → draft → hybrid → auto, skipping drafters this pair
        cannot run; each at its k (k_of)."""
        if self.session is None:
            return None
        names = self.session.drafter_names()  # a server offers only what it takes per request
        if len(names) == 1:
            return Notice(
                f"drafter: {names[0]} is the only one here (the server takes no per-request speculative settings)",
                timeout=5,
            )
        i = names.index(self.drafter) if self.drafter in names else -1
        for step in range(1, len(names) + 1):
            name = names[(i + step) % len(names)]
            try:
                self.session.set_drafter(name)
            except SpecchatError:
                continue  # this pair has no draft model: skip draft/hybrid
            with contextlib.suppress(SpecchatError):  # a server that takes no k per request runs at its own
                self.session.set_k(self.k_of(name))
            self.drafter = name
            self.draft_loading = self.generating and name in USES_DRAFT_MODEL and not self.session.draft_model_loaded
            return Notice(f"drafter: {name}{self._switch_note(name)}")
        return None

    def _switch_note(self, name: str) -> str:
        note = " (from the next round)" if self.generating else ""
        if name in USES_DRAFT_MODEL and not self.session.draft_model_loaded:  # type: ignore[union-attr]
            note += "; the draft model loads on its first use"
        if name in NEEDS_CONSTRAINT and not self.session.status().constraint:  # type: ignore[union-attr]
            note += "; it drafts only while replies are constrained (F8 or /schema FILE): plain steps until then"
        return note

    def change_k(self, delta: int) -> Notice | None:
        """k one up or down, for the drafter running now: the others keep theirs."""
        if self.session is None:
            return None
        try:
            self.session.set_k(self.session.k + delta)
        except SpecchatError as err:  # a server that takes no k per request
            return Notice(err.one_line(), "warning", timeout=8)
        self.k_for[self.drafter] = self.session.k
        return None

    # --- the session ----------------------------------------------------------------------

    def attach(self, session: Session) -> Session | None:
        """Drive `session` from now on; the conversation goes on with it.
        Returns the session it replaces, for the caller to close."""
        old, self.session = self.session, session
        self.conversation.attach(session)
        self.drafter = session.drafter_name
        return old

    @staticmethod
    def carry_constraint(old: Session | None, new: Session) -> str:
        """A schema or grammar set before a pair switch holds for the new pair
        too (bind it on the loading worker); why it cannot, or ""."""
        spec = old.constraint_spec if old is not None else None
        if spec is None:
            return ""
        try:
            new.set_constraint(spec)
        except SpecchatError as err:
            return err.message
        return ""

    def attach_file(self, path: str) -> Notice:
        """/file PATH: the file goes with the next message; a file that cannot be read is an error notice."""
        try:
            file = read_attachment(path)
        except SpecchatError as err:
            return Notice(err.one_line(), "error", timeout=10, title="file")
        self.attachments.append(file)
        return Notice(f"attached {file.name} ({file.lines} lines): it goes with your next message", timeout=4)

    def take_attachments(self) -> list[Attachment]:
        """The files for the message being sent; the next message starts with none."""
        files, self.attachments = self.attachments, []
        return files

    def toggle_memory(self) -> Notice:
        on = not self.conversation.memory_on
        self.conversation.set_memory(on)
        return Notice("memory on: drafting from your earlier replies" if on else "memory off: emptied for this chat")

    # --- turns ---------------------------------------------------------------------------

    def can_regenerate(self) -> bool:
        return self.session is not None and not self.generating and bool(self.session.messages)

    def start_editing(self) -> str | None:
        """The last message, to put in the prompt for resending; None when there is none."""
        if self.generating or self.session is None:
            return None
        text = self.conversation.last_user_text()
        self.editing = text is not None
        return text

    def send_kind(self) -> str:
        """ "edit" when the prompt held the last message, else "reply"; the edit ends here."""
        kind = "edit" if self.editing else "reply"
        self.editing = False
        return kind

    def begin_turn(self) -> threading.Event:
        """A reply starts: the event that stops it (Esc, quitting)."""
        self.generating = True
        self.cancel_event = threading.Event()
        self.live_tok_s, self.auto_choice, self.reading = 0.0, "", None
        return self.cancel_event

    @staticmethod
    def turn_notices(turn: Turn) -> list[Notice]:
        """What a finished reply says besides its stats line."""
        notices = []
        if turn.finish == "cut":  # a server's stream ended mid-reply: the partial reply stays
            notices.append(Notice(turn.error, "error", 15, "server"))
        if turn.drafter_failed:  # the reply went on plainly
            notices.append(Notice(turn.drafter_failed, "warning", 15, "drafter"))
        if turn.dropped_turns:
            notices.append(Notice(f"dropped the {turn.dropped_turns} oldest exchange(s) to fit the context"))
        return notices

    def progress(self, tok_s: float, choice: str, reading: tuple[int, int] | None) -> None:
        """How the reply under way goes: its live tok/s, auto's latest pick, the prompt's reading."""
        self.live_tok_s, self.auto_choice, self.reading = tok_s, choice, reading

    def end_turn(self) -> None:
        self.generating = False
        self.live_tok_s, self.auto_choice, self.reading = None, "", None
        self.branched_from = None  # a branch's question is asked once, whether its reply ended or failed

    def ask_again(self, stats: dict) -> None:
        """The next reply is a branch asking again for the reply with these stats."""
        self.branched_from = stats

    def binding_started(self, name: str) -> None:
        """A schema file is bound on a worker: new turns wait (busy)."""
        self.binding = name

    def binding_ended(self) -> None:
        self.binding = ""

    def cancel(self) -> str | None:
        """Esc: "stopping" a reply under way, "unediting" an edit, or None."""
        if self.generating:
            self.cancel_event.set()
            return "stopping"
        if self.editing:
            self.editing = False
            return "unediting"
        return None

    def new_chat(self) -> None:
        self.conversation.new()
        self.editing = False

    # --- the status bar ----------------------------------------------------------------

    def status(self, note: str) -> Status:
        if self.draft_loading and (self.session is None or self.session.draft_model_loaded or not self.generating):
            self.draft_loading = False
        if self.draft_loading:
            note = DRAFT_LOADING
        elif note == DRAFT_LOADING:
            note = ""  # it has loaded
        attached = " + ".join(f"{f.name} · {f.lines} lines" for f in self.attachments)
        if self.session is None:
            return Status(note=note, attached=attached)
        s = self.session.status()
        return Status(
            s.pair,
            self.drafter,
            s.k,
            s.temp,
            s.context_used,
            s.n_ctx,
            self.live_tok_s,
            note,
            choice=self.auto_choice,
            reading=self.reading,
            constraint=s.constraint,
            attached=attached,
            branch=self.conversation.branch,
            system=bool(self.conversation.system),
        )
