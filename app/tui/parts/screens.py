"""Modal screens: the legend, the history list, the pair picker, the pull
offer with its progress, and a one-line text prompt."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, ProgressBar, Static
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
            if text and not self.found:
                title = f"No message holds “{text}”  (s search again · esc)"
            else:
                title = f"Messages holding “{text}”  (enter open · s search again)" if text else None
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


class PairPicker(ModalScreen[str | None]):
    """Catalog pairs; a pair not pulled yet is pulled first."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, pairs, current: str) -> None:
        super().__init__()
        self.pairs, self.current = pairs, current

    def compose(self) -> ComposeResult:
        with Vertical(id="pairs", classes="dialog"):
            yield Static("Model pairs", classes="dialog-title")
            ol = OptionList(id="pair-list")
            for p in self.pairs:
                ol.add_option(Option(Content(safe_text(pair_line(p, self.current))), id=p.name))
            yield ol

    def on_mount(self) -> None:
        names = [p.name for p in self.pairs]
        ol = self.query_one(OptionList)
        ol.highlighted = names.index(self.current) if self.current in names else 0
        ol.focus()

    @on(OptionList.OptionSelected)
    def pick(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


def pair_line(p, current: str) -> str:
    """A pair in the picker: name, where its files are, its description and
    the last `specchat models check` verdict."""
    mark = "●" if p.name == current else " "
    if p.local:
        state = "local" if p.pulled else "local, not usable (see `specchat models`)"
    else:
        state = "pulled" if p.pulled else f"not pulled{_size(p.size)}"
    verdict = f"\n   {p.verdict}" if p.verdict else ""
    return f"{mark} {p.name}  ·  {state}\n   {p.description}{verdict}"


def _size(n: int | None) -> str:
    return "" if not n else f", {n / 1e9:.1f} GB"


class PullScreen(ModalScreen[str | None]):
    """Offer to pull a pair, then pull it with a progress bar; where nothing
    is pulled, also offer the pairs a scan finds among the user's own files
    (choosing one registers it as a local pair). Dismisses with the pair to
    open, or None."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Not now")]

    def __init__(self, models, name: str, reason: str) -> None:
        super().__init__()
        self.models, self.pair_name, self.reason = models, name, reason

    def compose(self) -> ComposeResult:
        size = next((p.size for p in self.models.pairs() if p.name == self.pair_name), None)
        with Vertical(id="pull", classes="dialog"):
            yield Static("Model pair not pulled", classes="dialog-title")
            yield Label(
                Content(safe_text(f"{self.reason}\nPull '{self.pair_name}'{_size(size)} now?")), id="pull-question"
            )
            yield ProgressBar(id="pull-progress", show_eta=False)
            yield Label("", id="pull-status")
            with Horizontal(classes="buttons"):
                yield Button("Pull", variant="primary", id="pull-yes")
                yield Button("Not now", id="pull-no")
            yield Label("Or chat on GGUF files you already have (found in your models folders):", id="found-title")
            yield OptionList(id="found-list")

    def on_mount(self) -> None:
        self.query_one(ProgressBar).display = False
        for part in ("#found-title", "#found-list"):
            self.query_one(part).display = False
        self.find()

    @work(thread=True, exclusive=True, group="find", exit_on_error=False)
    def find(self) -> None:
        """Scan the usual folders (GGUF headers only) off the main thread."""
        try:
            found = self.models.found_pairs()
        except Exception:  # an unreadable folder or file: the catalog offer stands alone
            return
        if found:
            self.app.call_from_thread(self.offer, found)

    def offer(self, found) -> None:
        ol = self.query_one("#found-list", OptionList)
        for p in found:
            ol.add_option(Option(Content(safe_text(f"{p.name}  ·  {p.description}")), id=p.name))
        for part in ("#found-title", "#found-list"):
            self.query_one(part).display = True

    @on(OptionList.OptionSelected, "#found-list")
    def use_found(self, event: OptionList.OptionSelected) -> None:
        assert event.option.id is not None  # offer gives each option its pair's name
        self.query_one(".buttons").display = False
        self.query_one("#found-list").display = False
        self.query_one("#pull-status", Label).update(
            Content(safe_text(f"adding {event.option.id} (hashing its files)…"))
        )
        self.add(event.option.id)

    @work(thread=True, exclusive=True, group="pull", exit_on_error=False)
    def add(self, name: str) -> None:
        try:
            added = self.models.add_found(name)
        except Exception as err:  # SpecchatError or an OSError: say it, stay open
            self.app.call_from_thread(self.failed, _why(err), "add")
            return
        self.app.call_from_thread(self.dismiss, added)

    @on(Button.Pressed, "#pull-no")
    def no(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#pull-yes")
    def yes(self) -> None:
        self.query_one(".buttons").display = False
        self.query_one("#found-list").display = False
        self.query_one(ProgressBar).display = True
        self.query_one("#pull-status", Label).update("starting…")
        self.set_interval(0.25, self.poll)
        self.pull()

    def poll(self) -> None:
        try:
            done, total = self.models.pull_progress(self.pair_name)
        except Exception:
            return
        self.query_one(ProgressBar).update(total=total, progress=done)
        self.query_one("#pull-status", Label).update(
            f"{done / 1e6:.0f} MB" + (f" of {total / 1e6:.0f} MB" if total else "")
        )

    @work(thread=True, exclusive=True, group="pull", exit_on_error=False)
    def pull(self) -> None:
        try:
            self.models.pull(self.pair_name)
        except Exception as err:  # SpecchatError or a network error: say it, stay open
            self.app.call_from_thread(self.failed, _why(err), "pull")
            return
        self.app.call_from_thread(self.dismiss, self.pair_name)

    def failed(self, text: str, what: str = "pull") -> None:
        self.query_one("#pull-status", Label).update(Content.styled(safe_text(f"{what} failed: {text}"), "$error"))
        self.query_one(".buttons").display = True
        self.query_one("#found-list").display = self.query_one("#found-list", OptionList).option_count > 0
        if what == "pull":
            self.query_one("#pull-yes", Button).label = "Retry"


def _why(err: Exception) -> str:
    message = getattr(err, "message", str(err))
    hint = getattr(err, "hint", "")
    return f"{message}" + (f"\nhint: {hint}" if hint else "")
