"""The chat app: it composes the parts and wires them together. One
ChatSession is driven from a thread worker (stream.py paces its rounds to
the screen), the conversation and its history live in conversation.py, every
key in actions.py, settings and themes are saved as you go. Loading a pair
and binding a schema run on workers too: the screen never waits on llama.cpp.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from dataclasses import dataclass
from functools import partial

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Footer

from specchat import config, paths
from specchat.config import Settings
from specchat.drafters import default_k
from specchat.errors import SpecchatError
from specchat.history import History
from specchat.schema import schema_prefix
from specchat.textsafe import safe_text
from specchat.themes import BUILTIN, DEFAULT_THEME, SPEC_DEFAULTS, load_user_themes
from specchat.tui.actions import ACTIONS, ChatActions, SpecchatCommands, keymap_conflicts
from specchat.tui.conversation import Conversation
from specchat.tui.models import Session
from specchat.tui.screens import PullScreen
from specchat.tui.stream import STATUS_SECONDS, Pacer, ReplyDone, ReplyFailed, RoundFeed, RoundsReady
from specchat.tui.widgets import (
    AssistantMessage,
    PromptInput,
    StatsLine,
    StatsPanel,
    Status,
    StatusBar,
    UserMessage,
    stored_message,
)

TERMINATE_WAIT = 2.0  # seconds a reply may take to stop after SIGTERM or SIGHUP before the chat exits anyway


# What the status bar says while auto's cost curve is measured.
CALIBRATING = "measuring this machine's cost curve for auto, once per model and settings (esc stops)"
CALIBRATING_AHEAD = "measuring this machine's cost curve for auto while you type, once per model and settings"


@dataclass
class Calibrating(Message):
    on: bool  # True as measuring starts, False when it ends


@dataclass
class SessionReady(Message):
    session: Session | None  # None when loading failed
    error: str = ""
    dropped_constraint: str = ""  # why the schema set before could not hold for this pair


class SpecchatApp(ChatActions):
    """Chat with a local model and watch speculative decoding settle its bets."""

    TITLE = "specchat"
    CSS_PATH = "specchat.tcss"
    COMMANDS = App.COMMANDS | {SpecchatCommands}
    BINDINGS = [
        Binding(a.keys, a.action, a.title, show=a.show, priority=a.priority, id=a.id, tooltip=a.help) for a in ACTIONS
    ]

    def __init__(
        self,
        models,
        settings: Settings | None = None,
        *,
        pair: str | None = None,
        drafter: str | None = None,
        k: int | None = None,
        history: History | None = None,
        config_errors: list[str] | None = None,
        history_note: str = "",
        save_settings: bool = True,
    ) -> None:
        super().__init__()
        self.models = models
        self.settings = settings or Settings()
        self.start_pair = pair or self.settings.pair
        self.start_drafter = drafter or self.settings.drafter
        self.chosen_k = k or self.settings.k  # None: each drafter runs at its own k (drafters.default_k)
        self.config_errors = config_errors or []
        self.history_note = history_note  # why the history is off or fresh, if it is
        self.save_settings = save_settings
        self.conversation = Conversation(history, partial(self.notify, title="history", severity="warning", timeout=15))
        self.conversation.memory_on = self.settings.memory  # F10 turns it off (or on) for this chat only
        self.pacer = Pacer()
        self.session = None
        self.cancel_event = threading.Event()
        self.generating = False
        self.binding = ""  # the schema file being bound on a worker, if one is
        self.show_rejected = True
        self.editing = False
        self.live_tok_s: float | None = None
        self.auto_choice = ""  # what auto picked for the latest rounds, while generating
        self.drafter = self.start_drafter  # the chosen drafter (the engine takes it at its next round)
        self._theme_ready = False
        self._status_time = 0.0
        self.quit_code: int | None = None  # a signal asked to quit once the reply under way has ended

    def on_unmount(self) -> None:
        self.cancel_event.set()  # quitting ends a reply still waiting on a server, so the process can end

    def terminated(self, number: int) -> None:
        """SIGTERM or SIGHUP: stop the reply under way at its next round, keep
        what it said (saved as a stopped reply), then exit, restoring the terminal."""
        code = 128 + number
        if not self.generating:
            self.exit(return_code=code)
            return
        self.quit_code = code
        self.cancel_event.set()
        self.set_timer(TERMINATE_WAIT, lambda: self.exit(return_code=code))  # a reply that does not stop

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(SPEC_DEFAULTS)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity="information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification is plain text: what it quotes (a file, a key, a
        title, an error) is data, never markup or terminal control."""
        super().notify(safe_text(message), title=safe_text(title), severity=severity, timeout=timeout, markup=False)

    # --- layout and start ---------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield VerticalScroll(id="chat")
            panel = StatsPanel(id="stats-panel")
            panel.display = False
            yield panel
        yield PromptInput(id="prompt")
        yield StatusBar(id="status")
        yield Footer()

    def on_mount(self) -> None:
        for theme in BUILTIN:
            self.register_theme(theme)
        user_themes, errors = load_user_themes(paths.config_dir() / "themes")
        for theme in user_themes:
            self.register_theme(theme)
        self.theme = self._theme_name(self.settings.theme)
        self._theme_ready = True
        self.set_keymap(self.settings.keymap)
        for line in keymap_conflicts(self.settings.keymap):
            self.notify(line, title="settings", severity="warning", timeout=15)
        for line in self.config_errors + errors:
            self.notify(line, title="settings", severity="warning", timeout=15)
        if self.history_note:
            self.notify(self.history_note, title="history", severity="warning", timeout=20)
        self.query_one(PromptInput).focus()
        if threading.current_thread() is threading.main_thread():  # only there can a process's signals be caught
            loop = asyncio.get_running_loop()
            for number in (signal.SIGTERM, signal.SIGHUP):  # a kill or a closed terminal: end as ctrl+q does
                loop.add_signal_handler(number, self.terminated, number)
        self.open_pair(self.start_pair, self.start_drafter, self.chosen_k or default_k(self.start_drafter))

    def _theme_name(self, name: str) -> str:
        for candidate in (name, f"specchat-{name}"):
            if candidate in self.available_themes:
                return candidate
        self.notify(f"unknown theme {name!r}; using {DEFAULT_THEME}", severity="warning")
        return DEFAULT_THEME

    def watch_theme(self, theme: str) -> None:
        if self._theme_ready and theme != self.settings.theme:
            self.settings.theme = theme
            self._save({"theme": theme})

    def _save(self, changes: dict) -> None:
        if not self.save_settings:
            return
        try:
            config.save_settings(changes)
        except OSError as err:  # a read-only config folder, say: keep chatting, say it once
            self.save_settings = False
            self.notify(
                f"cannot save settings ({err}); your choices last until you quit",
                title="settings",
                severity="warning",
                timeout=15,
            )

    # --- loading a pair -------------------------------------------------------------

    def open_pair(self, pair: str | None, drafter: str, k: int) -> None:
        asked = pair
        try:
            pair = pair or self.models.default_pair()
            pulled = self.models.is_pulled(pair)
        except SpecchatError as err:  # an unknown pair in the settings, a broken pairs.toml
            self._cannot_list_pairs(err)
            if asked:
                self.open_pair(None, drafter, k)  # the default pair instead
            return
        if not pulled:
            self._set_status(note=f"no model: '{pair}' is not pulled (F4 picks or pulls a pair)")
            reason = f"specchat chats with a pair of local models; '{pair}' is not in the store yet."

            def on_pulled(chosen: str | None) -> None:
                if chosen:  # the pair pulled, or the user's own files registered instead
                    self.open_pair(chosen, drafter, k)

            self.push_screen(PullScreen(self.models, pair, reason), on_pulled)
            return
        self._set_status(note=f"loading {pair}…")
        self.load_session(pair, drafter, k)

    # Models load (a warm-up decode) and decode on workers only, never on the main thread:
    # llama.cpp's OpenMP keeps a team of threads for every thread that has decoded, and once
    # the teams hold more threads than there are cores, libgomp sleeps at every barrier.
    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_session(self, pair: str, drafter: str, k: int) -> None:
        try:
            session = self.models.open(pair, drafter, k, self.settings)
        except SpecchatError as err:
            self.post_message(SessionReady(None, err.one_line()))
            return
        except Exception as err:  # a broken file, say: show it, keep the app
            self.post_message(SessionReady(None, f"{type(err).__name__}: {err}"))
            return
        self._tell_calibration(session)
        self.post_message(SessionReady(session, dropped_constraint=self._carry_constraint(self.session, session)))
        self._measure_ahead(session)

    @staticmethod
    def _measure_ahead(session: Session) -> None:
        """On a worker, between replies: a local session measures auto's cost
        curve now if it is missing or stale (ChatSession.measure_ahead), so
        that the next reply does not wait for it."""
        from specchat.chat import ChatSession

        if isinstance(session, ChatSession):
            session.measure_ahead()

    @on(SessionReady)
    def session_ready(self, msg: SessionReady) -> None:
        if msg.session is None:
            self._set_status(note=f"could not load: {msg.error}")
            self.notify(msg.error, title="loading failed", severity="error", timeout=15)
            return
        old, self.session = self.session, msg.session
        self.conversation.attach(msg.session)  # the conversation goes on with the new pair
        if msg.dropped_constraint:
            self.notify(
                f"replies are free text with {msg.session.pair}: {msg.dropped_constraint}",
                title="schema",
                severity="warning",
                timeout=10,
            )
        self.drafter = msg.session.drafter_name
        self.pacer.cpu_bound = msg.session.cpu_bound
        if old is not None:
            old.close()
        if self.models.remembers_pair and self.settings.pair != msg.session.pair:
            self.settings.pair = msg.session.pair
            self._save({"pair": msg.session.pair})
        self._set_status(note="")

    def _tell_calibration(self, session: Session) -> None:
        """A local pair measures auto's cost curve once (the first reply with
        auto on a model and settings never measured before): the status bar says so."""
        from specchat.chat import ChatSession

        def tell(on: bool) -> None:
            self.post_message(Calibrating(on))

        if isinstance(session, ChatSession):
            session.on_calibrate(tell)

    @on(Calibrating)
    def calibrating(self, msg: Calibrating) -> None:
        self._set_status(note="" if not msg.on else CALIBRATING if self.generating else CALIBRATING_AHEAD)

    @staticmethod
    def _carry_constraint(old, new) -> str:
        """A schema or grammar set before a pair switch holds for the new pair
        too (bound on the loading worker); why it cannot, or ""."""
        spec = old.constraint_spec if old is not None else None
        if spec is None:
            return ""
        try:
            new.set_constraint(spec)
        except SpecchatError as err:
            return err.message
        return ""

    # --- status ------------------------------------------------------------------------

    def _set_status(self, note: str | None = None) -> None:
        bar = self.query_one(StatusBar)
        old_note = bar.status.note if note is None else note
        if self.session is None:
            bar.status = Status(note=old_note)
            return
        s = self.session.status()
        bar.status = Status(
            s.pair,
            self.drafter,
            s.k,
            s.temp,
            s.context_used,
            s.n_ctx,
            self.live_tok_s,
            old_note,
            choice=self.auto_choice,
            constraint=s.constraint,
        )

    # --- sending and streaming -----------------------------------------------------------

    @on(PromptInput.Submitted)
    def submitted(self, msg: PromptInput.Submitted) -> None:
        """Send the message; one that starts with "/schema FILE" (or "/schema
        off") binds it first, and sends the rest once it is bound."""
        if self.session is None:
            self.notify("no model loaded yet", severity="warning")
            return
        if self._busy():
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
        kind = "edit" if self.editing else "reply"
        self.editing = False
        if kind == "edit":
            self._drop_last_exchange()
        self._start(kind, text)

    def _start(self, kind: str, text: str) -> None:
        chat = self.query_one("#chat", VerticalScroll)
        if kind != "regenerate":
            chat.mount(UserMessage(text))
            self.conversation.user_sent(text)
        reply = AssistantMessage(show_rejected=self.show_rejected)
        chat.mount(reply)
        chat.scroll_end(animate=False)
        self.generating = True
        self.query_one(PromptInput).cursor_blink = False  # a blink is a repaint: none while decoding
        self.cancel_event = threading.Event()
        self.live_tok_s = 0.0
        self._set_status()
        self.generate(kind, text, reply)

    @work(thread=True, exclusive=True, group="generate", exit_on_error=False)
    def generate(self, kind: str, text: str, reply: AssistantMessage) -> None:
        session, feed = self.session, None
        assert session is not None  # _start runs only once a pair is loaded
        self.pacer.drawing_wait = 0.0
        try:
            feed = RoundFeed(self.post_message, reply, self.pacer)
            if kind == "regenerate":
                turn = session.regenerate(feed, self.cancel_event, on_idle=feed.flush)
            elif kind == "edit":
                turn = session.edit_last(text, feed, self.cancel_event, on_idle=feed.flush)
            else:
                turn = session.reply(text, feed, self.cancel_event, on_idle=feed.flush)
        except Exception as err:
            if feed is not None:
                feed.flush()
            self.post_message(ReplyFailed(reply, err, sent=kind != "regenerate"))
            return
        feed.flush()
        self.post_message(ReplyDone(reply, turn, feed.drafters or [session.drafter_name]))
        self._measure_ahead(session)  # a stale curve is measured again while the user reads

    @on(RoundsReady)
    def rounds_ready(self, msg: RoundsReady) -> None:
        self.pacer.pace()
        msg.reply.add_spans(msg.spans)
        now = time.perf_counter()
        if now - self._status_time >= STATUS_SECONDS:  # the live tok/s needs no 25 fps
            self._status_time = now
            self.live_tok_s, self.auto_choice = msg.live_tok_s, msg.choice
            self._set_status()
        chat = self.query_one("#chat", VerticalScroll)
        if chat.max_scroll_y - chat.scroll_y < 3:
            chat.scroll_end(animate=False)
        if msg.shown is not None:
            self.call_after_refresh(msg.shown.set)

    @on(ReplyDone)
    def reply_done(self, msg: ReplyDone) -> None:
        turn = msg.turn
        stats = turn.stats.to_dict()
        stats["drafters"] = msg.drafters
        msg.reply.end(stats, turn.finish)
        self.conversation.replied(turn.text, turn.finish, stats, msg.reply.spans)
        self._finish_generation()
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
        self.conversation.turn_failed(msg.sent)  # a failed turn leaves no message in the history
        self.notify(text, title="generation failed", severity="error", timeout=10)
        self._finish_generation()

    def _finish_generation(self) -> None:
        if self.quit_code is not None:
            self.exit(return_code=self.quit_code)
        self.generating = False
        self.query_one(PromptInput).cursor_blink = True
        self.live_tok_s, self.auto_choice = None, ""
        self._set_status()
        self._refresh_panel()
        self.query_one("#chat", VerticalScroll).scroll_end(animate=False)

    # --- the conversation on screen ----------------------------------------------------

    def load_conversation(self, conv_id: int) -> None:
        conv = self.conversation.open(conv_id)
        chat = self.query_one("#chat", VerticalScroll)
        chat.remove_children()
        chat.mount_all(stored_message(m, self.show_rejected) for m in conv.messages)
        chat.scroll_end(animate=False)
        self._refresh_panel()
        self._set_status()

    def _drop_last_exchange(self) -> None:
        """Remove the last user message and its reply from the view and history."""
        children = list(self.query_one("#chat", VerticalScroll).children)
        users = [i for i, w in enumerate(children) if isinstance(w, UserMessage)]
        had_reply = False
        if users:
            for w in children[users[-1] :]:
                had_reply |= isinstance(w, AssistantMessage) and w.stats is not None
                w.remove()
        self.conversation.drop_last_exchange(had_reply)
