"""Modal screens: the legend, the history list and a one-line text prompt
(pairscreens.py holds the pair picker and the pull offer)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from specchat import paths
from specchat.errors import SpecchatError
from specchat.history.database import Conversation, Found, History
from specchat.history.tree import tree_order
from specchat.textsafe import safe_text


class LegendScreen(ModalScreen[None]):
    """What the colours mean, and the keys."""

    BINDINGS = [Binding("escape,f1,q", "dismiss", "Close")]

    def __init__(self, keys: list[tuple[str, str]], server_note: str = "") -> None:
        super().__init__()
        self.keys = keys
        self.server_note = server_note  # on a llama.cpp server: what "server totals" means

    def compose(self) -> ComposeResult:
        sample = Content.assemble(
            ("rejected draft", "strike $spec-rejected"),
            "  target's own token  ·  accepted drafts in the colour of the drafter that proposed them:",
        )
        sources = Content.assemble(
            ("n-gram", "$spec-ngram"),
            "  ",
            ("draft model", "$spec-model"),
            "  ",
            ("MTP head", "$spec-mtp"),
            "  ",
            ("grammar-forced", "$spec-grammar"),
            "  ",
            ("memory", "$spec-memory"),
        )
        mixed = Content("auto and hybrid draft from several of them: each token keeps its drafter's colour")
        grammar = Content.assemble(
            ("⟨JSON · file⟩", "bold $spec-grammar"),
            " in the status bar while replies are constrained (a JSON schema or a grammar)",
        )
        memory = Content(
            "memory: tokens copied from your earlier replies in the history (F10 turns it off for this chat)"
        )
        mtp = Content("MTP head: the draft head the target ships (Qwen3.5, GLM-4.5, MiMo), no second model")
        numbers = Content.assemble(
            "α = tokens per verify · speedup ",
            ("> 1", "bold $spec-good"),
            " won, ",
            ("< 1", "bold $spec-bad"),
            " lost vs the measured off baseline",
        )
        key_lines = "\n".join(f"{k:>14}  {what}" for k, what in self.keys)
        with VerticalScroll(id="legend", classes="dialog"):  # ↑ ↓ reach the keys below the fold
            yield Static("Legend", classes="dialog-title")
            yield Static(sample)
            yield Static(sources)
            yield Static(mixed)
            yield Static(grammar)
            yield Static(memory)
            yield Static(mtp)
            yield Static(numbers)
            if self.server_note:
                yield Static(Content.assemble(("server totals", "$spec-accepted"), safe_text(self.server_note)))
            yield Static(Content(safe_text(key_lines)), id="legend-keys")


class TextPrompt(ModalScreen[str | None]):
    """Ask for one line of text (rename, search, the chat's settings): None
    on Esc, and on an empty line unless `empty_ok` (the system prompt: none)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, title: str, value: str = "", empty_ok: bool = False) -> None:
        super().__init__()
        self.title_text, self.value, self.empty_ok = title, value, empty_ok

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="dialog-title")
            yield Input(safe_text(self.value))

    @on(Input.Submitted)
    def done(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        self.dismiss(text if text or self.empty_ok else None)


HISTORY_TITLE = "Conversations  (enter open · s search · r rename · d d delete · e export)"


class HistoryScreen(ModalScreen[int | None]):
    """Past conversations: Enter opens, s searches every message, r renames,
    d deletes (a second d, as there is no undo), e exports."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close"),
        Binding("s", "search", "Search"),
        Binding("r", "rename", "Rename"),
        Binding("d", "delete", "Delete"),
        Binding("e", "export", "Export Markdown"),
    ]

    def __init__(self, history: History, export_dir: Path, replying: Callable[[], int | None] = lambda: None) -> None:
        super().__init__()
        self.history, self.export_dir = history, export_dir
        self.replying = replying  # the conversation a reply is being written to now (None: none)
        self.found: list[Found] | None = None  # a search's matches, shown instead of every conversation
        self._doomed: int | None = None  # the conversation a first d asked about: a second deletes it

    def compose(self) -> ComposeResult:
        with Vertical(id="history", classes="dialog"):
            yield Static(HISTORY_TITLE, classes="dialog-title", id="history-title")
            yield OptionList(id="conversations")

    def on_mount(self) -> None:
        self.refresh_list()

    def action_search(self) -> None:
        def done(text: str | None) -> None:
            try:
                self.found = self.history.search(text) if text else None
            except SpecchatError as err:  # search is off (history/search.py): one line, the list stays
                self.notify(err.one_line(), severity="error", timeout=10)
                return
            except sqlite3.Error as err:
                self.notify(f"cannot search the history ({err})", severity="error", timeout=10)
                return
            title: str | None = None  # the whole list: its own title
            if text:
                title = f"Messages holding “{text}”  (enter open · s search again)"
                if not self.found:
                    title = f"No message holds “{text}”  (s search again · esc)"
            self.query_one("#history-title", Static).update(Content(safe_text(title)) if title else HISTORY_TITLE)
            self.refresh_list()

        self.app.push_screen(TextPrompt("Search every message (words, in order)"), done)

    def refresh_list(self) -> None:
        ol = self.query_one(OptionList)
        ol.clear_options()
        if self.found is not None:
            for i, f in enumerate(self.found):
                line = Content(safe_text(f"{f.title} · {f.role}: {f.snippet}"))
                ol.add_option(Option(line, id=f"{f.conversation}:{i}"))
        else:
            for c, depth in tree_order(self.history.list()):  # each branch under the one it came from
                ol.add_option(Option(conversation_line(c, depth), id=str(c.id)))
        if ol.option_count:
            ol.highlighted = 0
        ol.focus()

    def _selected(self) -> int | None:
        ol = self.query_one(OptionList)
        if ol.highlighted is None:
            return None
        return _conversation_id(ol.get_option_at_index(ol.highlighted))

    @on(OptionList.OptionSelected)
    def open(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(_conversation_id(event.option))

    def action_rename(self) -> None:
        conv_id = self._selected()
        if conv_id is None:
            return
        conv: Conversation = self.history.load(conv_id)

        def done(title: str | None) -> None:
            if title:
                self.history.rename(conv_id, title)
                self.refresh_list()

        self.app.push_screen(TextPrompt("Rename conversation", conv.title), done)

    @on(OptionList.OptionHighlighted)
    def moved(self) -> None:
        self._doomed = None  # a d asks again for the conversation it is on

    def action_delete(self) -> None:
        """Delete the highlighted conversation at a second d (there is no
        undo), never the one a reply is being written to."""
        conv_id = self._selected()
        if conv_id is None:
            return
        if conv_id == self.replying():
            self.notify("a reply is being written to this conversation: let it end (or stop it with esc) first")
            return
        if self._doomed != conv_id:
            self._doomed = conv_id
            self.notify("press d again to delete this conversation; it cannot be undone", timeout=4)
            return
        self._doomed = None
        self.history.delete(conv_id)
        self.found = None  # its matches went with it: the whole list again
        self.query_one("#history-title", Static).update(HISTORY_TITLE)
        self.refresh_list()

    def action_export(self) -> None:
        conv_id = self._selected()
        if conv_id is None:
            return
        path = self.export_dir / f"conversation-{conv_id}.md"
        try:
            self.export_dir.mkdir(parents=True, exist_ok=True)
            paths.write_atomic(path, self.history.export_markdown(conv_id))  # never through a link planted there
        except OSError as err:
            self.notify(f"cannot export to {path}: {err.strerror or err}", severity="error")
            return
        self.notify(f"exported to {path}")


def _conversation_id(option: Option) -> int:
    assert option.id is not None  # refresh_list gives each option its conversation's id (a match: "id:n")
    return int(option.id.partition(":")[0])


INDENT_MAX = 8  # branches deeper than this are indented no further and say their level


def conversation_line(c: Conversation, depth: int = 0) -> Content:
    """One row of the history list, a branch indented under the conversation
    it came from. The title is the user's text: data, never markup."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.updated))
    mark = f"└ branch (level {depth}): " if depth > INDENT_MAX else "└ branch: "
    branch = "  " * (min(depth, INDENT_MAX) - 1) + mark if depth else ""
    count = f"{c.n_messages} message" + ("" if c.n_messages == 1 else "s")
    return Content(safe_text(f"{branch}{c.title}  ·  {count} · {c.pair} · {when}"))
