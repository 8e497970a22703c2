"""The chat app: one ChatSession driven from a thread worker, its rounds
streamed to the reply as batched messages, history and settings saved as
you go.

Every key is in the ACTIONS table, which makes both the bindings (each with
an id, so `[keymap]` in the settings can remap it) and the command palette.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from functools import partial

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Static

from specchat import config, paths
from specchat.config import Settings
from specchat.drafters import NAMES as DRAFTERS
from specchat.errors import SpecchatError
from specchat.history import History
from specchat.history import Message as Stored
from specchat.stats import Round, round_spans
from specchat.textsafe import safe_text
from specchat.themes import BUILTIN, DEFAULT_THEME, SPEC_DEFAULTS, load_user_themes
from specchat.tui.screens import HistoryScreen, LegendScreen, PairPicker, PullScreen
from specchat.tui.widgets import (
    AssistantMessage,
    PromptInput,
    Status,
    StatsPanel,
    StatusBar,
    UserMessage,
    last_code_block,
)

BATCH_SECONDS = 0.04  # rounds reach the UI at most this often...
MAX_BATCH_SECONDS = 1.5  # ...and at least this often
# The UI thread may use this share of one core while decoding. Where decoding
# keeps every core busy (llama.cpp on a CPU), the worker waits while a batch
# is drawn (SHOW_WAIT_SECONDS), so each ms of drawing is a ms of decoding
# lost; elsewhere (a GPU, spare cores) the UI may stream more smoothly.
UI_SHARE_CPU_BOUND = 0.0075
UI_SHARE = 0.10
# The status bar's live tok/s changes at most this often. Rarely, so that most
# batches repaint only the reply's rows, not everything from there to the bottom.
STATUS_SECONDS = 1.0
# Where decoding keeps every core busy, the worker waits (at most this long)
# while the UI shows a batch: drawing then runs on an idle core, between two
# rounds, instead of stalling llama.cpp's threads in the middle of one.
SHOW_WAIT_SECONDS = 0.25


@dataclass(frozen=True)
class Action:
    id: str  # binding id: remap with [keymap] in settings.toml
    keys: str
    action: str
    title: str
    help: str
    show: bool = False
    priority: bool = False  # wins over the prompt's own keys (ctrl+d, ctrl+t, …)


ACTIONS = [
    Action("cycle_drafter", "ctrl+d", "cycle_drafter", "Drafter", "Cycle the drafter (from the next round, also mid-reply)", True, True),
    Action("k_up", "ctrl+up", "k_up", "k+", "Let the drafter propose one more token per round", False, True),
    Action("k_down", "ctrl+down", "k_down", "k−", "Let the drafter propose one token fewer per round", False, True),
    Action("cancel", "escape", "cancel", "Cancel", "Stop at the next round; the partial reply stays", True),
    Action("toggle_rejected", "ctrl+t", "toggle_rejected", "Rejected", "Hide or show rejected drafts", True, True),
    Action("legend", "f1", "legend", "Legend", "What the colours and numbers mean; every key", True),
    Action("stats_panel", "f2", "stats_panel", "Stats", "Show or hide the stats panel", True),
    Action("history", "f3", "history", "History", "Reopen, rename, delete or export a conversation", True),
    Action("pairs", "f4", "pairs", "Pairs", "Switch to another model pair (pull it if needed)", True),
    Action("markdown", "f5", "markdown", "Markdown", "Flip the last reply between colours and rendered Markdown"),
    Action("copy_reply", "f6", "copy_reply", "Copy reply", "Copy the last reply to the clipboard", False, True),
    Action("copy_code", "f7", "copy_code", "Copy code", "Copy the last reply's last code block", False, True),
    Action("regenerate", "ctrl+r", "regenerate", "Regenerate", "Generate the last reply again", True, True),
    Action("edit_last", "ctrl+l", "edit_last", "Edit last", "Edit and resend your last message", False, True),
    Action("new_chat", "ctrl+n", "new_chat", "New chat", "Start a new conversation", True, True),
]


# --- messages from the worker --------------------------------------------------------


@dataclass
class RoundsReady(Message):
    reply: AssistantMessage
    spans: list[dict]
    live_tok_s: float
    choice: str = ""  # auto's latest decision, e.g. "ngram k=6"
    shown: threading.Event | None = None  # set once the batch is on screen


@dataclass
class ReplyDone(Message):
    reply: AssistantMessage
    turn: object  # specchat.engine.Turn
    drafters: list[str]


@dataclass
class ReplyFailed(Message):
    reply: AssistantMessage
    error: Exception


@dataclass
class SessionReady(Message):
    session: object | None  # ChatSession, or None when loading failed
    error: str = ""


class RoundFeed:
    """on_round for the engine: collects spans in the worker thread and posts
    them to the app at most every BATCH_SECONDS (never one message per token)."""

    def __init__(self, app: "SpecchatApp", reply: AssistantMessage, session) -> None:
        self.app, self.reply, self.session = app, reply, session
        self.pending: list[dict] = []
        self.tokens = 0
        self.drafters: list[str] = []
        self.t0 = self.last = time.perf_counter()

    def __call__(self, r: Round) -> None:
        mode = self.session.drafter_name  # the drafter that ran this round (same thread)
        if not self.drafters or self.drafters[-1] != mode:
            self.drafters.append(mode)
        self.pending += round_spans(r, mode)
        self.tokens += len(r.committed)
        now = time.perf_counter()
        if self.tokens == len(r.committed):
            # The first round: the live tok/s counts from its start, not from
            # before prefill and auto's calibration.
            self.t0 = now - r.t_draft - r.t_verify
        if now - self.last >= self.app.batch_seconds:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        now = now or time.perf_counter()
        if self.pending:
            tok_s = self.tokens / (now - self.t0) if now > self.t0 else 0.0
            choice = getattr(self.session.engine.drafter, "choice", "")  # only auto decides
            shown = threading.Event() if self.app.cpu_bound else None
            self.app.post_message(RoundsReady(self.reply, self.pending, tok_s, choice, shown))
            self.pending = []
            if shown is not None:
                t0 = time.perf_counter()
                shown.wait(SHOW_WAIT_SECONDS)
                self.app.drawing_wait += time.perf_counter() - t0
        self.last = time.perf_counter()


class SpecchatCommands(Provider):
    """The command palette, from the ACTIONS table."""

    def _commands(self):
        app = self.app
        for a in ACTIONS:
            yield a.title, partial(app.run_action, a.action), a.help

    async def discover(self) -> Hits:
        for title, run, help_text in self._commands():
            yield DiscoveryHit(title, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, run, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=help_text)


class SpecchatApp(App):
    """Chat with a local model and watch speculative decoding settle its bets."""

    TITLE = "specchat"
    CSS_PATH = "specchat.tcss"
    COMMANDS = App.COMMANDS | {SpecchatCommands}
    BINDINGS = [Binding(a.keys, a.action, a.title, show=a.show, priority=a.priority, id=a.id, tooltip=a.help)
                for a in ACTIONS]

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
        self.start_k = k or self.settings.k
        self.history = history
        self.config_errors = config_errors or []
        self.history_note = history_note  # why the history is off or fresh, if it is
        self.save_settings = save_settings
        self.session = None
        self.conv_id: int | None = None
        self.turns: list[dict] = []  # stats of each reply in this conversation
        self.cancel_event = threading.Event()
        self.generating = False
        self.show_rejected = True
        self.editing = False
        self.live_tok_s: float | None = None
        self.auto_choice = ""  # what auto picked for the latest rounds, while generating
        self.drafter = self.start_drafter  # the chosen drafter (the engine takes it at its next round)
        self._theme_ready = False
        self._status_time = 0.0
        self.batch_seconds = BATCH_SECONDS  # adapted to what rendering costs (see _pace)
        self.drawing_wait = 0.0  # seconds the worker waited for drawing, this reply
        self._pace_mark = (0.0, 0.0)
        self.cpu_bound = False  # decoding keeps every core busy (see SHOW_WAIT_SECONDS)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(SPEC_DEFAULTS)

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = False) -> None:
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
        for line in self.config_errors + errors:
            self.notify(line, title="settings", severity="warning", timeout=15)
        if self.history_note:
            self.notify(self.history_note, title="history", severity="warning", timeout=20)
        self.query_one(PromptInput).focus()
        self.open_pair(self.start_pair, self.start_drafter, self.start_k)

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
            self.notify(f"cannot save settings ({err}); your choices last until you quit",
                        title="settings", severity="warning", timeout=15)

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

            def pulled(ok: bool | None) -> None:
                if ok:
                    self.open_pair(pair, drafter, k)

            self.push_screen(PullScreen(self.models, pair, reason), pulled)
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
            self.post_message(SessionReady(None, err.message + (f" ({err.hint})" if err.hint else "")))
            return
        except Exception as err:  # a broken file, say: show it, keep the app
            self.post_message(SessionReady(None, f"{type(err).__name__}: {err}"))
            return
        self.post_message(SessionReady(session))

    @on(SessionReady)
    def session_ready(self, msg: SessionReady) -> None:
        if msg.session is None:
            self._set_status(note=f"could not load: {msg.error}")
            self.notify(msg.error, title="loading failed", severity="error", timeout=15)
            return
        old, self.session = self.session, msg.session
        self.drafter = msg.session.drafter_name
        self.cpu_bound = getattr(msg.session.target, "cpu_bound", False)
        if old is not None:
            msg.session.messages[:] = list(old.messages)  # keep the conversation
            old.close()
        if self.settings.pair != msg.session.pair:
            self.settings.pair = msg.session.pair
            self._save({"pair": msg.session.pair})
        self._set_status(note="")

    # --- status ------------------------------------------------------------------------

    def _set_status(self, note: str | None = None) -> None:
        bar = self.query_one(StatusBar)
        s = self.session
        old_note = bar.status.note if note is None else note
        if s is None:
            bar.status = Status(note=old_note)
            return
        bar.status = Status(s.pair, self.drafter, s.k, s.engine.sampling.temp, s.context_used, s.n_ctx,
                            self.live_tok_s, old_note, choice=self.auto_choice)

    # --- sending and streaming -----------------------------------------------------------

    @on(PromptInput.Submitted)
    def submitted(self, msg: PromptInput.Submitted) -> None:
        if self.session is None:
            self.notify("no model loaded yet", severity="warning")
            return
        if self.generating:
            self.notify("still generating: Esc stops it", severity="warning")
            return
        self.query_one(PromptInput).clear()
        kind = "edit" if self.editing else "reply"
        self.editing = False
        if kind == "edit":
            self._drop_last_exchange()
        self._start(kind, msg.text)

    def _start(self, kind: str, text: str) -> None:
        chat = self.query_one("#chat", VerticalScroll)
        if kind != "regenerate":
            chat.mount(UserMessage(text))
            self._store(Stored("user", text), title=text)
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
        self.drawing_wait = 0.0
        try:
            feed = RoundFeed(self, reply, session)
            if kind == "regenerate":
                turn = session.regenerate(feed, self.cancel_event)
            elif kind == "edit":
                turn = session.edit_last(text, feed, self.cancel_event)
            else:
                turn = session.reply(text, feed, self.cancel_event)
        except Exception as err:
            if feed is not None:
                feed.flush()
            self.post_message(ReplyFailed(reply, err))
            return
        feed.flush()
        self.post_message(ReplyDone(reply, turn, feed.drafters or [session.drafter_name]))

    @property
    def ui_share(self) -> float:
        """The share of a core the UI thread may use while decoding."""
        return UI_SHARE_CPU_BOUND if self.cpu_bound else UI_SHARE

    def _pace(self) -> None:
        """Keep the UI thread's CPU near its share of a core: rendering competes
        with decoding for cores (and the GIL), so a slow render means fewer,
        bigger batches, never a slower decode."""
        wall, cpu = time.perf_counter(), time.thread_time()
        last_wall, last_cpu = self._pace_mark
        self._pace_mark = (wall, cpu)
        if not last_wall or wall - last_wall > 2.0:
            return
        # The UI's CPU since the last batch is about what one batch costs to
        # show; space batches so that cost stays within the share.
        needed = (cpu - last_cpu) / self.ui_share
        smoothed = (self.batch_seconds + needed) / 2
        self.batch_seconds = max(BATCH_SECONDS, min(MAX_BATCH_SECONDS, smoothed))

    @on(RoundsReady)
    def rounds_ready(self, msg: RoundsReady) -> None:
        self._pace()
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
        self._store(Stored("assistant", turn.text, turn.finish, stats, msg.reply.spans))
        self.turns.append(stats)
        self._finish_generation()
        if turn.dropped_turns:
            self.notify(f"dropped the {turn.dropped_turns} oldest exchange(s) to fit the context")

    @on(ReplyFailed)
    def reply_failed(self, msg: ReplyFailed) -> None:
        err = msg.error
        text = getattr(err, "message", None) or f"{type(err).__name__}: {err}"
        msg.reply.end({"drafters": []}, "error")
        msg.reply.query_one("StatsLine").update(f"failed: {text}")
        self.notify(text, title="generation failed", severity="error", timeout=10)
        self._finish_generation()

    def _finish_generation(self) -> None:
        self.generating = False
        self.query_one(PromptInput).cursor_blink = True
        self.live_tok_s, self.auto_choice = None, ""
        self._set_status()
        self._refresh_panel()
        self.query_one("#chat", VerticalScroll).scroll_end(animate=False)

    # --- history ----------------------------------------------------------------------

    def _store(self, msg: Stored, title: str = "") -> None:
        if self.history is None:
            return
        try:
            if self.conv_id is None:
                pair = self.session.pair if self.session else ""
                self.conv_id = self.history.new_conversation(_title(title or msg.content), pair)
            self.history.add_message(self.conv_id, msg)
        except sqlite3.Error as err:  # the disk filled up, the file went read-only, …
            self.history = None
            self.notify(f"cannot save to the history ({err}); chatting without saving from now on",
                        title="history", severity="warning", timeout=15)

    def load_conversation(self, conv_id: int) -> None:
        conv = self.history.load(conv_id)
        chat = self.query_one("#chat", VerticalScroll)
        chat.remove_children()
        self.turns = []
        widgets = []
        for m in conv.messages:
            if m.role == "user":
                widgets.append(UserMessage(m.content))
            else:
                spans = m.spans or [{"text": m.content, "kind": "target", "drafter": "target"}]
                widgets.append(AssistantMessage(spans, m.stats or {}, m.finish, self.show_rejected))
                if m.stats:
                    self.turns.append(m.stats)
        chat.mount_all(widgets)
        chat.scroll_end(animate=False)
        self.conv_id = conv.id
        if self.session is not None:
            self.session.clear()
            self.session.messages.extend({"role": m.role, "content": m.content} for m in conv.messages)
        self._refresh_panel()
        self._set_status()

    # --- actions ------------------------------------------------------------------------

    def action_cycle_drafter(self) -> None:
        """off → ngram → draft → hybrid (→ whatever NAMES adds), skipping
        drafters this pair cannot run. The engine switches at its next round."""
        if self.session is None:
            return
        names = list(DRAFTERS)
        i = names.index(self.drafter) if self.drafter in names else -1
        for step in range(1, len(names) + 1):
            name = names[(i + step) % len(names)]
            try:
                self.session.set_drafter(name)
            except SpecchatError:
                continue  # this pair has no draft model: skip draft/hybrid
            self.drafter = name
            note = " (from the next round)" if self.generating else ""
            if name in ("draft", "hybrid") and self._draft_model_cold():
                note += "; the draft model loads on its first use"
            self.notify(f"drafter: {name}{note}", timeout=3)
            self._set_status()
            return

    def _draft_model_cold(self) -> bool:
        try:
            return not self.session.drafters.get("draft").loaded
        except SpecchatError:
            return False

    def action_k_up(self) -> None:
        self._change_k(+1)

    def action_k_down(self) -> None:
        self._change_k(-1)

    def _change_k(self, delta: int) -> None:
        if self.session is not None:
            self.session.set_k(self.session.k + delta)
            self._set_status()

    def action_cancel(self) -> None:
        if self.generating:
            self.cancel_event.set()
        elif self.editing:
            self.editing = False
            self.query_one(PromptInput).clear()

    def action_toggle_rejected(self) -> None:
        self.show_rejected = not self.show_rejected
        for reply in self.query(AssistantMessage):
            reply.set_show_rejected(self.show_rejected)
        self.notify("rejected drafts " + ("shown" if self.show_rejected else "hidden"), timeout=2)

    def action_legend(self) -> None:
        keys = [(b.key_display or self.get_key_display(b), b.description) for b in self._bindings_for_legend()]
        self.push_screen(LegendScreen(keys))

    def _bindings_for_legend(self):
        seen = {}
        for key, active in self.active_bindings.items():
            b = active.binding
            if b.id in {a.id for a in ACTIONS} and b.id not in seen:
                seen[b.id] = b
        return list(seen.values())

    def action_stats_panel(self) -> None:
        panel = self.query_one(StatsPanel)
        panel.display = not panel.display
        self._refresh_panel()

    def _refresh_panel(self) -> None:
        panel = self.query_one(StatsPanel)
        if panel.display:
            panel.show(self.turns, self.session.devices if self.session else {})

    def action_history(self) -> None:
        if self.history is None:
            self.notify("the history is off in this session (see the warning at start)", severity="warning")
            return

        def chosen(conv_id: int | None) -> None:
            if conv_id is not None:
                if self.generating:
                    self.notify("still generating: Esc stops it", severity="warning")
                else:
                    self.load_conversation(conv_id)

        self.push_screen(HistoryScreen(self.history, paths.data_dir() / "exports"), chosen)

    def action_pairs(self) -> None:
        if self.generating:
            self.notify("still generating: Esc stops it", severity="warning")
            return
        current = self.session.pair if self.session else ""

        def chosen(name: str | None) -> None:
            if name and name != current:
                drafter = self.drafter
                k = self.session.k if self.session else self.start_k
                self.open_pair(name, drafter, k)

        try:
            pairs = self.models.pairs()
        except SpecchatError as err:  # a broken pairs.toml
            self._cannot_list_pairs(err)
            return
        self.push_screen(PairPicker(pairs, current), chosen)

    def _cannot_list_pairs(self, err: SpecchatError) -> None:
        self._set_status(note=f"no model: {err.message}")
        self.notify(err.message + (f" ({err.hint})" if err.hint else ""), title="model pairs", severity="error", timeout=20)

    def _last_reply(self) -> AssistantMessage | None:
        replies = self.query(AssistantMessage)
        return replies.last() if replies else None

    async def action_markdown(self) -> None:
        reply = self._last_reply()
        if reply is not None and reply.stats is not None:
            await reply.toggle_markdown()

    def action_copy_reply(self) -> None:
        reply = self._last_reply()
        if reply is not None:
            self.copy_to_clipboard(reply.text)
            self.notify("reply copied", timeout=2)

    def action_copy_code(self) -> None:
        reply = self._last_reply()
        code = last_code_block(reply.text) if reply else None
        if code is None:
            self.notify("no code block in the last reply", severity="warning", timeout=3)
            return
        self.copy_to_clipboard(code)
        self.notify("code block copied", timeout=2)

    def action_regenerate(self) -> None:
        if self.session is None or self.generating or not self.session.messages:
            return
        reply = self._last_reply()
        if reply is not None and self.session.messages[-1]["role"] == "assistant":
            reply.remove()
            if self.turns:
                self.turns.pop()
        if self.history is not None and self.conv_id is not None:
            self.history.drop_last(self.conv_id, "assistant")
        self._start("regenerate", "")

    def action_edit_last(self) -> None:
        if self.generating or self.session is None:
            return
        users = [m for m in self.session.messages if m["role"] == "user"]
        if not users:
            return
        prompt = self.query_one(PromptInput)
        prompt.text = users[-1]["content"]
        prompt.focus()
        self.editing = True
        self.notify("editing your last message: Enter resends, Esc leaves it", timeout=4)

    def _drop_last_exchange(self) -> None:
        """Remove the last user message and its reply from the view and history."""
        chat = self.query_one("#chat", VerticalScroll)
        children = list(chat.children)
        users = [i for i, w in enumerate(children) if isinstance(w, UserMessage)]
        if users:
            for w in children[users[-1]:]:
                if isinstance(w, AssistantMessage) and w.stats and self.turns:
                    self.turns.pop()
                w.remove()
        if self.history is not None and self.conv_id is not None:
            self.history.drop_last(self.conv_id, "user")

    def action_new_chat(self) -> None:
        if self.generating:
            self.notify("still generating: Esc stops it", severity="warning")
            return
        if self.session is not None:
            self.session.clear()
        self.conv_id = None
        self.turns = []
        self.editing = False
        self.query_one("#chat", VerticalScroll).remove_children()
        self._refresh_panel()
        self._set_status()


def _title(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "New chat"
    return line[:60] + ("…" if len(line) > 60 else "")
