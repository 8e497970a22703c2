"""The pairs' modal screens: F4's pair picker, and the offer to pull a pair
(or to use one a scan finds among the user's own files) with its progress."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Label, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from specchat.textsafe import safe_text


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
