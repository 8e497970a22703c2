"""The chat app: settings, themes, signals and the model pair. The chat
itself is ChatScreen (chatscreen.py), its rules the ChatController
(controller.py), the conversation and its history conversation.py. Loading
a pair runs on a worker: the screen never waits on llama.cpp.
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass
from functools import partial

from textual import on, work
from textual.app import App
from textual.message import Message
from textual.theme import BUILTIN_THEMES

from specchat import config, paths
from specchat.config import Settings
from specchat.decoding.costmodel import Measuring
from specchat.errors import SpecchatError
from specchat.history.database import History
from specchat.textsafe import safe_text
from specchat.themes import BUILTIN, DEFAULT_THEME, LIGHT, SPEC_DEFAULTS, load_user_themes
from specchat.tui.chat.chatscreen import BindSchema, ChatScreen, Chosen, Shown
from specchat.tui.chat.keys import SpecchatCommands, checked_keymap, keymap_conflicts
from specchat.tui.chat.panels import measuring_note
from specchat.tui.chat.schemabind import SchemaBinder, SchemaBound
from specchat.tui.chat.stream import Pacer
from specchat.tui.ending import REPLY_WAITS, Ending
from specchat.tui.parts.pairscreens import PairPicker, PullScreen
from specchat.tui.state.controller import ChatController, Notice
from specchat.tui.state.conversation import Conversation
from specchat.tui.state.models import Session


@dataclass
class CurveMeasuring(Message):
    state: Measuring  # as measuring starts, after each size, and as it ends


@dataclass
class SessionReady(Message):
    session: Session | None  # None when loading failed
    error: str = ""
    dropped_constraint: str = ""  # why the schema set before could not hold for this pair


class SpecchatApp(App):
    """Chat with a local model and watch speculative decoding settle its bets."""

    TITLE = "specchat"
    CSS_PATH = "specchat.tcss"
    COMMANDS = App.COMMANDS | {SpecchatCommands}

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
        reopen: int | None = None,
    ) -> None:
        super().__init__()
        self.models = models
        self.settings = settings or Settings()
        self.start_pair = pair or self.settings.pair
        self.config_errors = config_errors or []
        self.history_note = history_note  # why the history is off or fresh, if it is
        self.save_settings = save_settings
        self.reopen = reopen  # a stored conversation to open once the pair has loaded (--continue, --conversation)
        self.conversation = Conversation(history, partial(self.notify, title="history", severity="warning", timeout=15))
        self.conversation.default_system = self.conversation.system = self.settings.system_prompt or None
        self.conversation.memory_on = self.settings.memory  # F10 turns it off (or on) for this chat only
        # k None: each drafter runs at its own k (drafters.default_k) until the user picks one
        self.chat = ChatController(self.conversation, drafter or self.settings.drafter, k or self.settings.k)
        self.pacer = Pacer()
        self.chat_screen = ChatScreen(self.chat, models, self.pacer)
        self.schema = SchemaBinder(self)  # F8 and /schema FILE
        self._theme_ready = False
        self.ending: Ending | None = None  # the process's own way out (run_chat's): signals, the terminal, a deadline

    def get_default_screen(self) -> ChatScreen:
        return self.chat_screen

    def on_unmount(self) -> None:
        self.chat.cancel_event.set()  # quitting ends a reply still waiting on a server, so the process can end
        if self.ending is not None:  # the chat's own process: the pair closed, the process gone by a deadline
            self.ending.ended(self.return_code or 0, self.chat.session)

    def terminated(self, number: int) -> None:
        """SIGTERM, SIGINT, SIGHUP or a lost terminal (ending.py), the first one: stop the reply
        under way at its next round, keep it (a stopped reply), then exit, restoring the terminal."""
        if not self.is_running or self.chat_screen.quit_code is not None:
            return
        code = self.chat_screen.quit_code = 128 + number
        if not self.chat.generating:
            self.exit(return_code=code)
            return
        self.chat.cancel_event.set()
        self.set_timer(REPLY_WAITS[signal.Signals(number)], lambda: self.exit(return_code=code))  # if it does not stop

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """The token colours a theme leaves out (a user's): the light set on a light theme."""
        return dict(SPEC_DEFAULTS if self.current_theme.dark else LIGHT.variables)

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

    def action_help_quit(self) -> None:
        """ctrl+c: say how to quit (Textual's own line is markup, and every
        notification here is plain text)."""
        for key, active in self.active_bindings.items():
            if active.binding.action in ("quit", "app.quit"):
                self.notify(f"Press {key} to quit the app", title="Do you want to quit?")
                return

    @on(Chosen)
    def chosen(self, msg: Chosen) -> None:
        """A drafter, k, temperature, top-p or system prompt picked in the chat is the next chat's too (settings.toml)."""
        for name, value in msg.changes.items():
            setattr(self.settings, name, value)
        self._save(msg.changes)

    def tell(self, notice: Notice) -> None:
        self.notify(notice.text, title=notice.title, severity=notice.severity, timeout=notice.timeout)

    # --- start -------------------------------------------------------------------------

    def on_mount(self) -> None:
        for theme in BUILTIN:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME  # before Textual's own go: the palette lists specchat's themes and the user's
        for name, theme in BUILTIN_THEMES.items():
            if self.available_themes.get(name) is theme:
                self.unregister_theme(name)
        user_themes, errors = load_user_themes(paths.config_dir() / "themes")
        for theme in user_themes:
            self.register_theme(theme)
        self.theme = self._theme_name(self.settings.theme)
        self._theme_ready = True
        keymap, unbound = checked_keymap(self.settings.keymap, self.settings.keymap_where)
        self.set_keymap(keymap)
        for line in unbound + keymap_conflicts(keymap):
            self.notify(line, title="settings", severity="warning", timeout=15)
        for line in self.config_errors + errors:
            self.notify(line, title="settings", severity="warning", timeout=15)
        if self.history_note:
            self.notify(self.history_note, title="history", severity="warning", timeout=20)
        if self.ending is not None:  # a kill or a closed terminal: end as ctrl+q does
            self.ending.start(asyncio.get_running_loop(), self.terminated, lambda: self.return_code)

    @on(Shown)
    def chat_shown(self) -> None:
        self.open_pair(self.start_pair, self.chat.drafter, self.chat.k_to_open())

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

    # --- a JSON schema for the replies (schemabind.py) ----------------------------------

    @on(BindSchema)
    def bind_asked(self, msg: BindSchema) -> None:
        self.schema.bind(msg.path, then_send=msg.then_send)

    def action_json_schema(self) -> None:
        self.schema.ask()

    @on(SchemaBound)
    def schema_bound(self, msg: SchemaBound) -> None:
        self.schema.bound(msg)

    # --- the pairs (F4) -------------------------------------------

    def action_pairs(self) -> None:
        if self.chat_screen.busy():
            return
        current = self.chat.session.pair if self.chat.session else ""
        try:
            pairs = self.models.pairs()
        except SpecchatError as err:  # a broken pairs.toml
            self.chat_screen.set_status(note=f"no model: {err.message}")
            self.notify(err.one_line(), title="model pairs", severity="error", timeout=20)
            return

        def chosen(name: str | None) -> None:
            if name and name != current:
                self.open_pair(name, self.chat.drafter, self.chat.k_to_open())

        self.push_screen(PairPicker(pairs, current), chosen)

    # --- loading a pair -------------------------------------------------------------

    def open_pair(self, pair: str | None, drafter: str, k: int | None) -> None:
        asked = pair
        try:
            pair = pair or self.models.default_pair()
            pulled = self.models.is_pulled(pair)
        except SpecchatError as err:  # an unknown pair in the settings, a broken pairs.toml
            self.chat_screen.set_status(note=f"no model: {err.message}")
            self.notify(err.one_line(), title="model pairs", severity="error", timeout=20)
            if asked:
                self.open_pair(None, drafter, k)  # the default pair instead
            return
        if not pulled:
            self.chat_screen.set_status(note=f"no model: '{pair}' is not pulled (F4 picks or pulls a pair)")
            reason = f"specchat chats with a pair of local models; '{pair}' is not in the store yet."

            def on_pulled(chosen: str | None) -> None:
                if chosen:  # the pair pulled, or the user's own files registered instead
                    self.open_pair(chosen, drafter, k)

            self.push_screen(PullScreen(self.models, pair, reason), on_pulled)
            return
        self.chat_screen.set_status(note=f"loading {pair}…")
        self.load_session(pair, drafter, k)

    # Models load (a warm-up decode) and decode on workers only, never on the main thread:
    # llama.cpp's OpenMP keeps a team of threads for every thread that has decoded, and once
    # the teams hold more threads than there are cores, libgomp sleeps at every barrier.
    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_session(self, pair: str, drafter: str, k: int | None) -> None:
        try:
            session = self.models.open(pair, drafter, k, self.settings)
        except SpecchatError as err:
            self.post_message(SessionReady(None, err.one_line()))
            return
        except Exception as err:  # a broken file, say: show it, keep the app
            self.post_message(SessionReady(None, f"{type(err).__name__}: {err}"))
            return
        # the status bar says when auto's cost curve is measured (a server measures none)
        session.on_measure(lambda state: self.post_message(CurveMeasuring(state)))
        dropped = self.chat.carry_constraint(self.chat.session, session)
        self.post_message(SessionReady(session, dropped_constraint=dropped))
        if self.is_running:  # measured now, while the user types, if it is missing or stale
            session.measure_ahead()

    @on(SessionReady)
    def session_ready(self, msg: SessionReady) -> None:
        if msg.session is None:
            self.chat_screen.set_status(note=f"could not load: {msg.error}")
            self.notify(msg.error, title="loading failed", severity="error", timeout=15)
            return
        old = self.chat.attach(msg.session)
        if self.reopen is not None:
            self.chat_screen.load_conversation(self.reopen)
            self.reopen = None
        if msg.dropped_constraint:
            self.notify(
                f"replies are free text with {msg.session.pair}: {msg.dropped_constraint}",
                title="schema",
                severity="warning",
                timeout=10,
            )
        self.pacer.cpu_bound = msg.session.cpu_bound
        if old is not None:
            old.close()
        if self.models.remembers_pair and self.settings.pair != msg.session.pair:
            self.settings.pair = msg.session.pair
            self._save({"pair": msg.session.pair})
        self.chat_screen.set_status(note="")

    @on(CurveMeasuring)
    def curve_measuring(self, msg: CurveMeasuring) -> None:
        note = measuring_note(self.chat_screen.status_note(), msg.state)
        if note is not None:
            self.chat_screen.set_status(note=note)
