"""The chat's screen: the conversation, the prompt, the status bar and the
stats panel, and the keys that act on them. A reply is decoded on a thread
worker (stream.py paces its rounds to the screen); a schema is bound on
one. The rules (which drafter, whether something is under way) are the
ChatController's; a schema (F8, /schema) and the pairs (F4) are the app's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer

from specchat import paths
from specchat.errors import SpecchatError
from specchat.message.attach import Attachment, with_files
from specchat.message.slash import schema_prefix
from specchat.textsafe import safe_text
from specchat.tui.chat.chatlog import ChatLog
from specchat.tui.chat.keys import ACTIONS, legend_keys
from specchat.tui.chat.panels import StatsPanel, StatusBar
from specchat.tui.chat.stream import STATUS_SECONDS, Pacer, ReplyDone, ReplyFailed, RoundFeed, RoundsReady
from specchat.tui.chat.takeback import TakeBack
from specchat.tui.chat.widgets import PromptInput, StatsLine
from specchat.tui.parts.branching import Branches, branch_note
from specchat.tui.parts.copying import CopyKeys
from specchat.tui.parts.files import FileKeys
from specchat.tui.parts.knobs import Knobs, knob_command
from specchat.tui.parts.screens import HistoryScreen, LegendScreen
from specchat.tui.state.controller import ChatController, Notice
from specchat.tui.state.models import ModelSource


@dataclass
class Chosen(Message):
    """The user picked a drafter, a k, a temperature, a top-p or a system prompt: the app keeps it in the settings."""

    changes: dict


class Shown(Message):
    """The chat's screen is up: the app opens the pair now."""


@dataclass
class BindSchema(Message):
    """A "/schema FILE rest" message: the app binds FILE, then sends the rest."""

    path: str
    then_send: str


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
        self.show_rejected = False  # in replies that ended (ctrl+t); a streaming reply shows them
        self.quit_code: int | None = None  # a signal asked to quit once the reply under way has ended
        self._status_time = 0.0
        self.takeback = TakeBack()  # what the turn under way gives back where it fails
        self.branches, self.knobs, self.files, self.copies = Branches(self), Knobs(self), FileKeys(self), CopyKeys(self)

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
        """The bar from the chat's state and this note (None: its own); none before compose or after."""
        for bar in self.query(StatusBar):
            bar.status = self.chat.status(bar.status.note if note is None else note)

    def status_note(self) -> str:
        """The note the status bar shows ("" with no bar)."""
        return next((bar.status.note for bar in self.query(StatusBar)), "")

    def refresh_panel(self) -> None:
        panel = self.query_one(StatsPanel)
        if panel.display:
            session = self.chat.session
            panel.show(self.chat.conversation.turns, session.devices if session else {})

    # --- sending and streaming -----------------------------------------------------------

    @on(PromptInput.Submitted)
    def submitted(self, msg: PromptInput.Submitted) -> None:
        """Send the message; one that starts with "/file PATH" attaches the
        file first, one that starts with "/schema FILE" (or "/schema off")
        binds it first and sends the rest once it is bound."""
        if self.chat.session is None:
            self.notify("the model is still loading: your message stays here, Enter sends it once it has loaded")
            return
        if (knob := knob_command(msg.text)) is not None:  # /system, /temp, /top-p: from the next reply
            self.query_one(PromptInput).clear()
            self.knobs.run(*knob)
            return
        if self.busy():
            return
        text = self.files.attach(msg.text)
        if text is None:
            return
        try:
            path, rest = schema_prefix(text)
        except SpecchatError as err:
            self.notify(err.one_line(), title="schema", severity="error", timeout=10)
            return
        if path is not None:
            self.post_message(BindSchema(path, rest))
        else:
            self.send(text)

    @on(PromptInput.PickFile)
    def at_typed(self) -> None:
        self.files.pick()

    def clear_prompt(self) -> None:
        self.query_one(PromptInput).clear()

    def type_in_prompt(self, text: str) -> None:
        prompt = self.query_one(PromptInput)
        prompt.insert(text)
        prompt.focus()

    def shown_messages(self) -> list[tuple[str, str]]:
        return self.query_one(ChatLog).shown()

    def send(self, text: str) -> None:
        """Send text from the prompt as the next message (or the edited last
        one), with the files attached to it."""
        self.query_one(PromptInput).clear()
        files = self.chat.take_attachments()
        self.takeback.sent(text, files)
        kind = self.chat.send_kind()
        if kind == "edit":
            self.chat.conversation.drop_last_exchange(self.query_one(ChatLog).drop_last_exchange())
        self.start(kind, with_files(text, files), files)

    def start(self, kind: str, text: str, files: list[Attachment] | None = None) -> None:
        if kind != "regenerate":
            self.chat.conversation.user_sent(text, files)  # the files stay beside the message: F9 writes to them alone
        reply = self.query_one(ChatLog).add_exchange(None if kind == "regenerate" else text, self.show_rejected)
        cancel = self.chat.begin_turn()
        self.query_one(PromptInput).cursor_blink = False  # a blink is a repaint: none while decoding
        self.set_status()
        self.generate(kind, text, reply, cancel)

    @work(thread=True, exclusive=True, group="generate", exit_on_error=False)
    def generate(self, kind: str, text: str, reply, cancel) -> None:
        session, feed = self.chat.session, None
        assert session is not None  # start runs only once a pair is loaded
        self.pacer.drawing_wait = 0.0
        try:
            feed = RoundFeed(self.post_message, reply, self.pacer)
            session.on_prefill(feed.read)  # a long prompt's reading shows in the status bar
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
        session.measure_ahead()  # a stale cost curve is measured again while the user reads (a server: nothing)

    @on(RoundsReady)
    def rounds_ready(self, msg: RoundsReady) -> None:
        self.pacer.pace()
        msg.reply.add_spans(msg.spans)
        now = time.perf_counter()
        if msg.reading or now - self._status_time >= STATUS_SECONDS:  # the live tok/s needs no 25 fps
            self._status_time = now
            self.chat.progress(msg.live_tok_s, msg.choice, msg.reading)
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
        self.takeback.replaced(self.chat)
        self.chat.conversation.replied(turn.text, turn.finish, stats, msg.reply.spans)
        note = branch_note(stats, self.chat.branched_from)  # before the turn ends, which drops what it asked again
        self.finish_generation()
        for notice in self.chat.turn_notices(turn):
            self.tell(notice)
        if note:
            self.notify(note, title="branch", timeout=10)

    @on(ReplyFailed)
    def reply_failed(self, msg: ReplyFailed) -> None:
        err = msg.error
        text = err.one_line() if isinstance(err, SpecchatError) else f"{type(err).__name__}: {err}"
        msg.reply.end({"drafters": []}, "error")
        msg.reply.query_one(StatsLine).update(Content(safe_text(f"failed: {text}")))
        self.chat.conversation.turn_failed(msg.sent)  # a failed turn leaves no message in the history
        text += self.takeback.failed(msg.reply, self.query_one(PromptInput), self.chat)
        self.notify(text, title="generation failed", severity="error", timeout=10)
        self.finish_generation()

    def finish_generation(self) -> None:
        self.takeback.clear()
        if self.quit_code is not None:
            self.app.exit(return_code=self.quit_code)
        self.chat.end_turn()
        self.query_one(PromptInput).cursor_blink = True
        self.set_status()
        self.refresh_panel()
        self.query_one(ChatLog).follow()  # the stats line comes into view; a user who scrolled up stays put

    def load_conversation(self, conv_id: int) -> None:
        """Show a stored conversation in place of this one (F3, a branch, --continue), or say why it cannot be."""
        conv, problem = self.chat.conversation.open_stored(conv_id)
        if conv is None:
            self.notify(problem, severity="warning")
            return
        self.query_one(ChatLog).show(conv.messages, self.show_rejected)
        self.refresh_panel()
        self.set_status()

    # --- the keys ---------------------------------------------------------------------------

    def action_cycle_drafter(self) -> None:
        self.tell(self.chat.cycle_drafter())
        self.set_status()
        self.post_message(Chosen({"drafter": self.chat.drafter}))

    def action_change_k(self, delta: int) -> None:
        self.tell(self.chat.change_k(delta))  # for this drafter, this chat: the settings keep no k picked here
        self.set_status()

    def action_branch(self) -> None:
        self.branches.choose()

    def action_step_branch(self, step: int) -> None:
        self.branches.step(step)

    def action_ask(self, command: str) -> None:
        self.knobs.ask(command)  # /system, /temp or /top-p, from the palette

    def action_copy_reply(self) -> None:
        self.copies.choose()

    def action_copy_code(self) -> None:
        self.copies.code()

    def action_diff(self) -> None:
        self.files.diff()

    def action_legend(self) -> None:
        keys = legend_keys([active.binding for active in self.active_bindings.values()], self.app.get_key_display)
        self.app.push_screen(LegendScreen(keys, self.models.legend_note))

    def action_cancel(self) -> None:
        if self.chat.cancel() == "unediting":
            self.query_one(PromptInput).clear()

    def action_toggle_rejected(self) -> None:
        self.show_rejected = not self.show_rejected
        self.query_one(ChatLog).set_show_rejected(self.show_rejected)
        where = "shown in every reply" if self.show_rejected else "hidden once a reply ends"
        self.notify(f"rejected drafts {where}", timeout=2)

    def action_stats_panel(self) -> None:
        panel = self.query_one(StatsPanel)
        panel.display = not panel.display
        self.refresh_panel()

    def action_memory(self) -> None:
        self.tell(self.chat.toggle_memory())
        self.refresh_panel()

    def action_history(self) -> None:
        if self.chat.conversation.history is None:
            self.notify("the history is off in this session (see the warning at start)", severity="warning")
            return

        def chosen(conv_id: int | None) -> None:
            if conv_id is not None and not self.busy():
                self.load_conversation(conv_id)

        history = HistoryScreen(self.chat.conversation.history, paths.data_dir() / "exports", self.chat.replying_to)
        self.app.push_screen(history, chosen)

    async def action_markdown(self) -> None:
        reply = self.query_one(ChatLog).last_reply()
        if reply is not None and reply.stats is not None:
            await reply.toggle_markdown()

    def action_regenerate(self) -> None:
        if not self.chat.can_regenerate():
            return
        reply = self.query_one(ChatLog).last_reply()
        self.takeback.regenerating(reply if self.chat.conversation.last_is_reply else None, self.chat)
        self.start("regenerate", "")

    def action_edit_last(self) -> None:
        text = self.chat.start_editing()
        if text is not None:
            self.edit_in_prompt(text, "editing your last message: Enter resends, Esc leaves it")

    def edit_in_prompt(self, text: str, note: str) -> None:
        prompt = self.query_one(PromptInput)
        prompt.text = text
        prompt.focus()
        self.notify(note, timeout=4)

    def keep(self, changes: dict) -> None:
        """The app keeps these settings for the next start."""
        self.post_message(Chosen(changes))

    def action_new_chat(self) -> None:
        if self.busy():
            return
        self.chat.new_chat()
        self.query_one(ChatLog).remove_children()
        self.refresh_panel()
        self.set_status()
