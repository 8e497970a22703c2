"""The chat's screen: the conversation, the prompt, the status bar and the
stats panel, and the keys that act on them. A reply is decoded on a thread
worker (stream.py paces its rounds to the screen); a schema is bound on
one. The rules (which drafter, whether something is under way) are the
ChatController's; the history (F3) and the pairs (F4) are the app's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer

from specchat.checks import blank
from specchat.errors import SpecchatError
from specchat.schema import schema_prefix
from specchat.textsafe import safe_text
from specchat.tui.chatlog import ChatLog
from specchat.tui.controller import ChatController, Notice
from specchat.tui.keys import ACTIONS, legend_keys
from specchat.tui.models import ModelSource
from specchat.tui.panels import StatsPanel, StatusBar
from specchat.tui.screens import LegendScreen, TextPrompt
from specchat.tui.stream import STATUS_SECONDS, Pacer, ReplyDone, ReplyFailed, RoundFeed, RoundsReady
from specchat.tui.widgets import PromptInput, StatsLine, last_code_block


@dataclass
class Chosen(Message):
    """The user picked a drafter or a k: the app keeps it in the settings."""

    changes: dict


class Shown(Message):
    """The chat's screen is up: the app opens the pair now."""


@dataclass
class SchemaBound(Message):
    """A schema was bound (or "off" freed the replies) on a worker, or could not be."""

    then_send: str | None  # the rest of a "/schema FILE rest" message, to send once bound
    error: str = ""
    warning: str = ""  # keywords the grammar ignores


class ChatScreen(Screen):
    BINDINGS = [
        Binding(a.keys, a.action, a.title, show=a.show, priority=a.priority, id=a.id, tooltip=a.help) for a in ACTIONS
    ]
    AUTO_FOCUS = "#prompt"  # the prompt has the keys from the start

    def __init__(self, chat: ChatController, models: ModelSource, pacer: Pacer) -> None:
        super().__init__()
        self.chat = chat
        self.models = models
        self.pacer = pacer
        self.show_rejected = True
        self.quit_code: int | None = None  # a signal asked to quit once the reply under way has ended
        self._status_time = 0.0

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield ChatLog(id="chat")
            panel = StatsPanel(id="stats-panel")
            panel.display = False
            yield panel
        yield PromptInput(id="prompt")
        yield StatusBar(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.post_message(Shown())

    def tell(self, notice: Notice | None) -> None:
        if notice is not None:
            self.notify(notice.text, title=notice.title, severity=notice.severity, timeout=notice.timeout)  # type: ignore[arg-type]

    def busy(self) -> bool:
        notice = self.chat.busy()
        self.tell(notice)
        return notice is not None

    def set_status(self, note: str | None = None) -> None:
        bar = self.query_one(StatusBar)
        bar.status = self.chat.status(bar.status.note if note is None else note)

    def refresh_panel(self) -> None:
        panel = self.query_one(StatsPanel)
        if panel.display:
            session = self.chat.session
            panel.show(self.chat.conversation.turns, session.devices if session else {})

    # --- sending and streaming -----------------------------------------------------------

    @on(PromptInput.Submitted)
    def submitted(self, msg: PromptInput.Submitted) -> None:
        """Send the message; one that starts with "/schema FILE" (or "/schema
        off") binds it first, and sends the rest once it is bound."""
        if self.chat.session is None:
            self.notify("no model loaded yet", severity="warning")
            return
        if self.busy():
            return
        try:
            path, rest = schema_prefix(msg.text)
        except SpecchatError as err:
            self.notify(err.one_line(), title="schema", severity="error", timeout=10)
            return
        if path is not None:
            self.set_schema(path, then_send=rest)
        else:
            self.send(msg.text)

    def send(self, text: str) -> None:
        """Send text from the prompt as the next message (or the edited last one)."""
        self.query_one(PromptInput).clear()
        kind = self.chat.send_kind()
        if kind == "edit":
            self.chat.conversation.drop_last_exchange(self.query_one(ChatLog).drop_last_exchange())
        self.start(kind, text)

    def start(self, kind: str, text: str) -> None:
        if kind != "regenerate":
            self.chat.conversation.user_sent(text)
        reply = self.query_one(ChatLog).add_exchange(None if kind == "regenerate" else text, self.show_rejected)
        cancel = self.chat.begin_turn()
        self.query_one(PromptInput).cursor_blink = False  # a blink is a repaint: none while decoding
        self.set_status()
        self.generate(kind, text, reply, cancel)

    @work(thread=True, exclusive=True, group="generate", exit_on_error=False)
    def generate(self, kind: str, text: str, reply, cancel) -> None:
        from specchat.chat import ChatSession

        session, feed = self.chat.session, None
        assert session is not None  # start runs only once a pair is loaded
        self.pacer.drawing_wait = 0.0
        try:
            feed = RoundFeed(self.post_message, reply, self.pacer)
            if kind == "regenerate":
                turn = session.regenerate(feed, cancel, on_idle=feed.flush)
            elif kind == "edit":
                turn = session.edit_last(text, feed, cancel, on_idle=feed.flush)
            else:
                turn = session.reply(text, feed, cancel, on_idle=feed.flush)
        except Exception as err:
            if feed is not None:
                feed.flush()
            self.post_message(ReplyFailed(reply, err, sent=kind != "regenerate"))
            return
        feed.flush()
        self.post_message(ReplyDone(reply, turn, feed.drafters or [session.drafter_name]))
        if isinstance(session, ChatSession):
            session.measure_ahead()  # a stale cost curve is measured again while the user reads

    @on(RoundsReady)
    def rounds_ready(self, msg: RoundsReady) -> None:
        self.pacer.pace()
        msg.reply.add_spans(msg.spans)
        now = time.perf_counter()
        if now - self._status_time >= STATUS_SECONDS:  # the live tok/s needs no 25 fps
            self._status_time = now
            self.chat.live_tok_s, self.chat.auto_choice = msg.live_tok_s, msg.choice
            self.set_status()
        self.query_one(ChatLog).follow()
        if msg.shown is not None:
            self.app.call_after_refresh(msg.shown.set)

    @on(ReplyDone)
    def reply_done(self, msg: ReplyDone) -> None:
        turn = msg.turn
        stats = turn.stats.to_dict()
        stats["drafters"] = msg.drafters
        msg.reply.end(stats, turn.finish)
        self.chat.conversation.replied(turn.text, turn.finish, stats, msg.reply.spans)
        self.finish_generation()
        if turn.finish == "cut":  # a server's stream ended mid-reply: the partial reply stays
            self.notify(turn.error, title="server", severity="error", timeout=15)
        if turn.dropped_turns:
            self.notify(f"dropped the {turn.dropped_turns} oldest exchange(s) to fit the context")

    @on(ReplyFailed)
    def reply_failed(self, msg: ReplyFailed) -> None:
        err = msg.error
        text = getattr(err, "message", None) or f"{type(err).__name__}: {err}"
        msg.reply.end({"drafters": []}, "error")
        msg.reply.query_one(StatsLine).update(Content(safe_text(f"failed: {text}")))
        self.chat.conversation.turn_failed(msg.sent)  # a failed turn leaves no message in the history
        self.notify(text, title="generation failed", severity="error", timeout=10)
        self.finish_generation()

    def finish_generation(self) -> None:
        if self.quit_code is not None:
            self.app.exit(return_code=self.quit_code)
        self.chat.end_turn()
        self.query_one(PromptInput).cursor_blink = True
        self.set_status()
        self.refresh_panel()
        self.query_one(ChatLog).scroll_end(animate=False)

    def load_conversation(self, conv_id: int) -> None:
        conv = self.chat.conversation.open(conv_id)
        self.query_one(ChatLog).show(conv.messages, self.show_rejected)
        self.refresh_panel()
        self.set_status()

    # --- the keys ---------------------------------------------------------------------------

    def action_cycle_drafter(self) -> None:
        self.tell(self.chat.cycle_drafter())
        self.set_status()
        self.post_message(Chosen({"drafter": self.chat.drafter}))

    def action_change_k(self, delta: int) -> None:
        self.tell(self.chat.change_k(delta))
        self.set_status()
        if self.chat.chosen_k is not None:
            self.post_message(Chosen({"k": self.chat.chosen_k}))

    def action_legend(self) -> None:
        keys = legend_keys([active.binding for active in self.active_bindings.values()], self.app.get_key_display)
        self.app.push_screen(LegendScreen(keys, self.models.legend_note))

    def action_cancel(self) -> None:
        if self.chat.cancel() == "unediting":
            self.query_one(PromptInput).clear()

    def action_toggle_rejected(self) -> None:
        self.show_rejected = not self.show_rejected
        self.query_one(ChatLog).set_show_rejected(self.show_rejected)
        self.notify("rejected drafts " + ("shown" if self.show_rejected else "hidden"), timeout=2)

    def action_stats_panel(self) -> None:
        panel = self.query_one(StatsPanel)
        panel.display = not panel.display
        self.refresh_panel()

    def action_memory(self) -> None:
        self.tell(self.chat.toggle_memory())
        self.refresh_panel()

    async def action_markdown(self) -> None:
        reply = self.query_one(ChatLog).last_reply()
        if reply is not None and reply.stats is not None:
            await reply.toggle_markdown()

    def action_copy_reply(self) -> None:
        reply = self.query_one(ChatLog).last_reply()
        if reply is not None:
            self.app.copy_to_clipboard(reply.text)
            self.notify("reply copied", timeout=2)

    def action_copy_code(self) -> None:
        reply = self.query_one(ChatLog).last_reply()
        code = last_code_block(reply.text) if reply else None
        if code is None:
            self.notify("no code block in the last reply", severity="warning", timeout=3)
            return
        self.app.copy_to_clipboard(code)
        self.notify("code block copied", timeout=2)

    def action_regenerate(self) -> None:
        if not self.chat.can_regenerate():
            return
        reply, had_reply = self.query_one(ChatLog).last_reply(), self.chat.conversation.last_is_reply
        if reply is not None and had_reply:
            reply.remove()
        self.chat.conversation.drop_last_reply(had_reply and reply is not None)
        self.start("regenerate", "")

    def action_edit_last(self) -> None:
        text = self.chat.start_editing()
        if text is None:
            return
        prompt = self.query_one(PromptInput)
        prompt.text = text
        prompt.focus()
        self.notify("editing your last message: Enter resends, Esc leaves it", timeout=4)

    def action_new_chat(self) -> None:
        if self.busy():
            return
        self.chat.new_chat()
        self.query_one(ChatLog).remove_children()
        self.refresh_panel()
        self.set_status()

    # --- a JSON schema for the replies ---------------------------------------------------

    def action_json_schema(self) -> None:
        if self.busy() or self.chat.session is None:
            return
        title = "Reply as JSON matching… (a JSON schema file's path; off: free text)"
        self.app.push_screen(TextPrompt(title), lambda path: self.set_schema(path) if path else None)

    def set_schema(self, path: str, then_send: str | None = None) -> None:
        """Constrain the next replies to the JSON schema file at `path` ("off":
        free text again), bound on a worker; then send `then_send` (the rest of
        a "/schema FILE rest" message). A file that cannot be used is an error
        notice, and the message stays in the prompt to fix the path."""
        if self.chat.session is None or self.busy():
            return
        if path == "off":
            self.chat.session.set_constraint(None)
            self.post_message(SchemaBound(then_send))
            return
        self.chat.binding = Path(path).name
        self.set_status(note=f"binding {self.chat.binding}…")
        self.bind_schema(self.chat.session, path, then_send)

    @work(thread=True, group="schema", exit_on_error=False)
    def bind_schema(self, session, path: str, then_send: str | None) -> None:
        from specchat.schema import load_schema

        try:
            spec = load_schema(path, warn=None)
            session.set_constraint(spec)
        except SpecchatError as err:
            self.post_message(SchemaBound(then_send, error=err.one_line()))
        except Exception as err:  # the app stays: say what happened
            self.post_message(SchemaBound(then_send, error=f"{type(err).__name__}: {err}"))
        else:
            self.post_message(SchemaBound(then_send, warning=spec.warning))

    def on_schema_bound(self, msg: SchemaBound) -> None:
        self.chat.binding = ""
        self.set_status(note="")
        if msg.error:
            self.notify(msg.error, title="schema", severity="error", timeout=10)
            return
        if msg.warning:
            self.notify(msg.warning, title="schema", severity="warning", timeout=15)
        if self.chat.session is None:  # the pair failed to load meanwhile
            return
        label = self.chat.session.status().constraint
        self.notify(f"replies must match {label}" if label else "replies are free text again", timeout=4)
        if msg.then_send is None:  # from F8: the prompt is the user's
            return
        if msg.then_send and not blank(msg.then_send):
            self.send(msg.then_send)
        else:
            self.query_one(PromptInput).clear()
