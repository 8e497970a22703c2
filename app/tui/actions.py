"""Every key of the chat, in one table: ACTIONS makes the bindings (each
with an id, so `[keymap]` in the settings can remap it), the command
palette and the legend's key list. `ChatActions` holds what each one does;
the app mixes it in, so Textual finds `action_<name>` on the app.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from textual import work
from textual.app import App
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.message import Message

from specchat import paths
from specchat.checks import blank
from specchat.drafters import NEEDS_CONSTRAINT, default_k
from specchat.errors import SpecchatError
from specchat.tui.conversation import Conversation
from specchat.tui.models import ModelSource, Session
from specchat.tui.screens import HistoryScreen, LegendScreen, PairPicker, TextPrompt
from specchat.tui.widgets import AssistantMessage, PromptInput, StatsPanel, last_code_block


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
    Action(
        "cycle_drafter",
        "ctrl+d",
        "cycle_drafter",
        "Drafter",
        "Cycle the drafter (from the next round, also mid-reply)",
        True,
        True,
    ),
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
    Action(
        "memory",
        "f10",
        "memory",
        "Memory",
        "Draft from your earlier replies in the history, or not, in this chat (on at start; off empties the memory)",
    ),
    Action(
        "json_schema",
        "f8",
        "json_schema",
        "Reply as JSON matching…",
        "Constrain the replies to a JSON schema file (/schema FILE before a message does the same; off frees them)",
    ),
]


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


def keymap_conflicts(keymap: dict[str, str]) -> list[str]:
    """One line per key that [keymap] leaves bound to more than one action
    (only one of them would run, and the other would have no key)."""
    by_key: dict[str, list[str]] = {}
    for a in ACTIONS:
        for key in keymap.get(a.id, a.keys).split(","):
            by_key.setdefault(key.strip(), []).append(a.id)
    return [
        f"keymap: {key} is bound to {' and '.join(ids)}; only one of them runs, so remap the others"
        for key, ids in by_key.items()
        if key and len(ids) > 1
    ]


@dataclass
class SchemaBound(Message):
    """A schema was bound (or "off" freed the replies) on a worker, or could not be."""

    then_send: str | None  # the rest of a "/schema FILE rest" message, to send once bound
    error: str = ""
    warning: str = ""  # keywords the grammar ignores


class ChatActions(App):
    """What each key does. SpecchatApp is built on it; the state the actions
    read and the app's own steps they call are declared here, kept there."""

    models: ModelSource
    session: Session | None
    conversation: Conversation
    drafter: str  # the chosen drafter (the engine takes it at its next round)
    chosen_k: int | None  # None: each drafter runs at its own k
    generating: bool
    binding: str  # the schema file being bound on a worker, if one is
    editing: bool
    show_rejected: bool
    cancel_event: threading.Event

    def _set_status(self, note: str | None = None) -> None:
        raise NotImplementedError  # SpecchatApp: the status bar

    def send(self, text: str) -> None:
        raise NotImplementedError  # SpecchatApp: a message, or a /schema prefix

    def _start(self, kind: str, text: str) -> None:
        raise NotImplementedError  # SpecchatApp: mount the reply, start the worker

    def open_pair(self, pair: str | None, drafter: str, k: int) -> None:
        raise NotImplementedError  # SpecchatApp: load a pair on a worker

    def load_conversation(self, conv_id: int) -> None:
        raise NotImplementedError  # SpecchatApp: show a stored conversation

    def _busy(self) -> bool:
        if self.generating:
            self.notify("still generating: Esc stops it", severity="warning")
        elif self.binding:
            self.notify(f"still binding {self.binding}: a moment", severity="warning")
        return self.generating or bool(self.binding)

    def action_cycle_drafter(self) -> None:
        """off → ngram → draft → hybrid → auto, skipping drafters this pair
        cannot run. The engine switches at its next round."""
        if self.session is None:
            return
        names = self.session.drafter_names()  # a server offers only what it takes per request
        if len(names) == 1:
            self.notify(
                f"drafter: {names[0]} is the only one here (the server takes no per-request speculative settings)",
                timeout=5,
            )
            return
        i = names.index(self.drafter) if self.drafter in names else -1
        for step in range(1, len(names) + 1):
            name = names[(i + step) % len(names)]
            try:
                self.session.set_drafter(name)
            except SpecchatError:
                continue  # this pair has no draft model: skip draft/hybrid
            if self.chosen_k is None and default_k(name) != default_k(self.drafter):
                self.session.set_k(default_k(name))  # each drafter's own k, as run and bench use
            self.drafter = name
            note = " (from the next round)" if self.generating else ""
            if name in ("draft", "hybrid") and not self.session.draft_model_loaded:
                note += "; the draft model loads on its first use"
            if name in NEEDS_CONSTRAINT and not self.session.status().constraint:
                note += "; it drafts only while replies are constrained (F8 or /schema FILE): plain steps until then"
            self.notify(f"drafter: {name}{note}", timeout=3)
            self._set_status()
            return

    def action_k_up(self) -> None:
        self._change_k(+1)

    def action_k_down(self) -> None:
        self._change_k(-1)

    def _change_k(self, delta: int) -> None:
        if self.session is not None:
            try:
                self.session.set_k(self.session.k + delta)
                self.chosen_k = self.session.k  # from now on every drafter runs at the k chosen here
            except SpecchatError as err:  # a server that takes no k per request
                self.notify(err.one_line(), severity="warning", timeout=8)
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
        ours = {a.id for a in ACTIONS}
        seen = {}
        for active in self.active_bindings.values():
            b = active.binding
            if b.id in ours and b.id not in seen:
                seen[b.id] = b
        self.push_screen(
            LegendScreen(
                [(b.key_display or self.get_key_display(b), b.description) for b in seen.values()],
                self.models.legend_note,
            )
        )

    def action_stats_panel(self) -> None:
        panel = self.query_one(StatsPanel)
        panel.display = not panel.display
        self._refresh_panel()

    def _refresh_panel(self) -> None:
        panel = self.query_one(StatsPanel)
        if panel.display:
            panel.show(self.conversation.turns, self.session.devices if self.session else {})

    def action_memory(self) -> None:
        on = not self.conversation.memory_on
        self.conversation.set_memory(on)
        self.notify("memory on: drafting from your earlier replies" if on else "memory off: emptied for this chat")
        self._refresh_panel()

    def action_history(self) -> None:
        if self.conversation.history is None:
            self.notify("the history is off in this session (see the warning at start)", severity="warning")
            return

        def chosen(conv_id: int | None) -> None:
            if conv_id is None or self._busy():
                return
            try:
                self.load_conversation(conv_id)
            except KeyError:  # another process deleted it while the list was open
                self.notify("that conversation was deleted meanwhile: nothing to open", severity="warning")
            except sqlite3.Error as err:
                self.notify(f"cannot read the history ({err})", severity="warning")

        self.push_screen(HistoryScreen(self.conversation.history, paths.data_dir() / "exports"), chosen)

    def action_pairs(self) -> None:
        if self._busy():
            return
        current = self.session.pair if self.session else ""

        def chosen(name: str | None) -> None:
            if name and name != current:
                self.open_pair(
                    name, self.drafter, self.session.k if self.session else self.chosen_k or default_k(self.drafter)
                )

        try:
            pairs = self.models.pairs()
        except SpecchatError as err:  # a broken pairs.toml
            self._cannot_list_pairs(err)
            return
        self.push_screen(PairPicker(pairs, current), chosen)

    def _cannot_list_pairs(self, err: SpecchatError) -> None:
        self._set_status(note=f"no model: {err.message}")
        self.notify(err.one_line(), title="model pairs", severity="error", timeout=20)

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
        reply, had_reply = self._last_reply(), self.conversation.last_is_reply
        if reply is not None and had_reply:
            reply.remove()
        self.conversation.drop_last_reply(had_reply and reply is not None)
        self._start("regenerate", "")

    def action_edit_last(self) -> None:
        if self.generating or self.session is None:
            return
        text = self.conversation.last_user_text()
        if text is None:
            return
        prompt = self.query_one(PromptInput)
        prompt.text = text
        prompt.focus()
        self.editing = True
        self.notify("editing your last message: Enter resends, Esc leaves it", timeout=4)

    def action_json_schema(self) -> None:
        if self._busy() or self.session is None:
            return
        title = "Reply as JSON matching… (a JSON schema file's path; off: free text)"
        self.push_screen(TextPrompt(title), lambda path: self.set_schema(path) if path else None)

    def set_schema(self, path: str, then_send: str | None = None) -> None:
        """Constrain the next replies to the JSON schema file at `path` ("off":
        free text again), bound on a worker; then send `then_send` (the rest of
        a "/schema FILE rest" message). A file that cannot be used is an error
        notice, and the message stays in the prompt to fix the path."""
        if self.session is None or self._busy():
            return
        if path == "off":
            self.session.set_constraint(None)
            self.post_message(SchemaBound(then_send))
            return
        self.binding = Path(path).name
        self._set_status(note=f"binding {self.binding}…")
        self.bind_schema(self.session, path, then_send)

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
        self.binding = ""
        self._set_status(note="")
        if msg.error:
            self.notify(msg.error, title="schema", severity="error", timeout=10)
            return
        if msg.warning:
            self.notify(msg.warning, title="schema", severity="warning", timeout=15)
        if self.session is None:  # the pair failed to load meanwhile
            return
        label = self.session.status().constraint
        self.notify(f"replies must match {label}" if label else "replies are free text again", timeout=4)
        if msg.then_send is None:  # from F8: the prompt is the user's
            return
        if msg.then_send and not blank(msg.then_send):
            self.send(msg.then_send)
        else:
            self.query_one(PromptInput).clear()

    def action_new_chat(self) -> None:
        if self._busy():
            return
        self.conversation.new()
        self.editing = False
        self.query_one("#chat").remove_children()
        self._refresh_panel()
        self._set_status()
