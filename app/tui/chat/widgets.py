"""The chat's widgets: messages (a stored one that could not be read is
marked in its place), the colour-coded reply, its stats line, the status
bar, the stats panel and the prompt input.

A reply is a list of spans ({text, kind, drafter}, as `specchat.display.spans`
makes them), drawn in chunks (tui/chat/replytext.py). Styles name theme variables
($spec-accepted, ...), which Textual resolves at render time, so a theme
switch recolours every reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from textual import events
from textual.containers import Vertical
from textual.content import Content
from textual.css.styles import RulesMap
from textual.message import Message
from textual.widgets import Markdown, Static, TextArea

from specchat.checks import blank
from specchat.display import merge_spans, shown_text, stats_fields
from specchat.history.database import Message as Stored
from specchat.message.attach import leading_files
from specchat.textsafe import safe_text
from specchat.themes import span_style
from specchat.tui.chat.replytext import chunk_spans, ended_contents, reply_text, spans_content

# --- the stats line -------------------------------------------------------------


def stats_content(stats: dict, finish: str | None) -> Content:
    """α, acceptance, tok/s, the measured off baseline and the speedup;
    with drafter off, just tok/s."""
    parts: list[Content] = []
    if finish == "cancelled":
        parts.append(Content.styled("cancelled", "bold $warning"))
    elif finish == "context":
        parts.append(Content.styled("context full", "bold $warning"))
    elif finish == "cut":
        parts.append(Content.styled("cut off: the server closed the stream", "bold $error"))
    drafters = stats.get("drafters") or []
    if len(drafters) > 1:
        parts.append(Content(safe_text("→".join(map(str, drafters)))))
    speedup = stats.get("speedup")
    good = "" if speedup is None else "bold $spec-good" if speedup > 1 else "bold $spec-bad" if speedup < 1 else "bold"
    for field, text in stats_fields(stats):
        parts.append(Content.styled(text, good) if field == "speedup" else Content(text))
    return Content(" · ").join(parts)


# --- messages in the chat ---------------------------------------------------------


class UserMessage(Static):
    """What the user sent: each file attached to it as one line (its name
    and its length), then the user's words. `text` is the message whole."""

    def __init__(self, text: str) -> None:
        files, words = leading_files(text)
        lines = [
            Content.styled(safe_text(f"[+ {name} · {n} line{'s' * (n != 1)}]"), "bold $accent") for name, n in files
        ]
        if words or not files:
            lines.append(Content(safe_text(words)))
        super().__init__(Content("\n").join(lines), classes="user-message")
        self.text = text


class UnreadableMessage(Static):
    """A stored message that could not be read, marked in its place in one line."""

    def __init__(self, marker: str) -> None:
        super().__init__(Content.styled(safe_text(marker), "italic $warning"), classes="unreadable-message")
        self.text = marker


def stored_message(msg: Stored, show_rejected: bool) -> Static | AssistantMessage:
    """The widget for one message of a reopened conversation."""
    if msg.problem:
        return UnreadableMessage(msg.marker)
    if msg.role == "user":
        return UserMessage(msg.content)
    spans = msg.spans or [{"text": msg.content, "kind": "target", "drafter": "target"}]
    return AssistantMessage(spans, msg.stats or {}, msg.finish, show_rejected)


RESERVE_LINES = 6  # a streaming chunk grows in steps of this many lines


class ReplyChunk(Static):
    """A piece of the colour-coded reply. Only the last chunk changes while
    streaming, so each update re-wraps a few lines, not the whole reply.

    A change of height costs a relayout of the screen (~20 ms here, more than
    the rest of an update), so the live chunk reserves RESERVE_LINES ahead:
    most updates only repaint, and the screen relayouts once per step."""

    reserved = 0  # lines held while streaming
    blank = 0  # of those, the lines under the text (the chat keeps them below the view)

    def show(self, content: Content, live: bool = True) -> None:
        width = self.content_size.width
        if not live or width <= 0:
            if self.reserved:
                self.reserved, self.blank, self.styles.min_height = 0, 0, None
            self.update(content)
            return
        # A widget's styles are the rules get_height reads (Textual's own OptionList casts them the same way).
        height = content.get_height(cast(RulesMap, self.styles), width)
        if height <= self.reserved:
            self.blank = self.reserved - height
            self.update(content, layout=False)
            return
        self.reserved, self.blank = height + RESERVE_LINES, RESERVE_LINES
        self.styles.min_height = self.reserved
        self.update(content)


class ReplyBody(Vertical):
    """The colour-coded reply: a column of chunks."""


class StatsLine(Static):
    """The numbers under a reply."""


class AssistantMessage(Vertical):
    """One reply: colour view (or rendered Markdown) and its stats line.

    While it streams, its rejected drafts are shown struck through (that is
    the show). Once it ends, the text a user reads, selects and copies is the
    reply alone, unless `show_rejected` (ctrl+t) asks for the drafts too,
    and its fenced code blocks are set off (tui/chat/replytext.py)."""

    def __init__(
        self,
        spans: list[dict] | None = None,
        stats: dict | None = None,
        finish: str | None = None,
        show_rejected: bool = False,
    ) -> None:
        super().__init__(classes="assistant-message")
        self.spans: list[dict] = []
        self.chunks: list[list[dict]] = [[]]
        self.stats = stats
        self.finish = finish
        self.show_rejected = show_rejected
        self.markdown_view = False
        merge_spans(self.spans, spans or [])  # merge_spans copies what it keeps
        chunk_spans(self.chunks, self.spans)
        self._live = self._contents(len(self.chunks) - 1)[
            0
        ]  # the last chunk, grown by appending while the reply streams

    @property
    def shows_rejected(self) -> bool:
        """Whether the rejected drafts are on screen: while streaming, or asked for."""
        return self.show_rejected or self.stats is None

    def compose(self):
        with ReplyBody():
            for content in self._contents():
                yield ReplyChunk(content)
        yield StatsLine("" if self.stats is None else stats_content(self.stats, self.finish))

    def on_mount(self) -> None:
        self.set_class(self.stats is None, "-streaming")
        self.set_class(self.finish == "cancelled", "-cancelled")

    @property
    def text(self) -> str:
        return reply_text(self.spans)

    @property
    def blank_rows(self) -> int:
        """Reserved rows under the streaming text (ChatLog.follow keeps them out of view)."""
        chunks = self.query(ReplyChunk)
        return chunks.last().blank if chunks and self.stats is None else 0

    def add_spans(self, new: list[dict]) -> None:
        """Append streamed spans. The last chunk's Content grows by appending."""
        merge_spans(self.spans, new)
        n_before = len(self.chunks)
        chunk_spans(self.chunks, new)
        if len(self.chunks) == n_before:
            for s in new:  # the common case: everything went to the live chunk
                if s["kind"] != "rejected" or self.shows_rejected:
                    self._live = self._live.append_text(shown_text(s), span_style(s["kind"], s["drafter"]))
        else:
            self._live = spans_content(self.chunks[-1], self.shows_rejected)
        self._show()

    def end(self, stats: dict, finish: str) -> None:
        self.stats, self.finish = stats, finish
        self.remove_class("-streaming")
        self.set_class(finish == "cancelled", "-cancelled")
        self.set_show_rejected(self.show_rejected)  # the reply alone now, unless the drafts are asked for
        self._show()

    def _show(self) -> None:
        """Bring the widgets up to date with the chunks (and the stats, once ended)."""
        if not self.query(StatsLine):  # mounted, but the children are not there yet
            self.call_after_refresh(self._show)
            return
        body = self.query_one(ReplyBody)
        widgets = list(body.query(ReplyChunk))
        live = self.stats is None
        if len(self.chunks) > len(widgets):
            contents = self._contents(len(widgets) - 1)
            widgets[-1].show(contents[0], live=False)
            body.mount_all(ReplyChunk(c) for c in contents[1:])
        else:
            widgets[-1].show(self._live, live)  # an ended reply gives back its reserved lines
        if self.stats is not None:  # the reply ended
            self.query_one(StatsLine).update(stats_content(self.stats, self.finish))

    def set_show_rejected(self, show: bool) -> None:
        self.show_rejected = show
        contents = self._contents()
        for widget, content in zip(self.query(ReplyChunk), contents):
            widget.update(content)
        self._live = contents[-1]

    def _contents(self, first: int = 0) -> list[Content]:
        """The chunks from `first` on, as drawn (replytext.ended_contents):
        while the reply streams, the last one as it came."""
        if self.stats is None:
            done = ended_contents(self.chunks[:-1], self.text, True, first) if first < len(self.chunks) - 1 else []
            return [*done, spans_content(self.chunks[-1], True)]
        return ended_contents(self.chunks, self.text, self.shows_rejected, first)

    async def toggle_markdown(self) -> None:
        """Flip between the colour view and rendered Markdown."""
        self.markdown_view = not self.markdown_view
        if self.markdown_view and not self.query(Markdown):
            await self.mount(Markdown(safe_text(self.text)), before=self.query_one(StatsLine))
        self.query_one(ReplyBody).display = not self.markdown_view
        for md in self.query(Markdown):
            md.display = self.markdown_view


# --- status bar -------------------------------------------------------------------


HINT = "Type a message, Enter sends · @ attaches a file · F1 help · ctrl+q quits"  # an empty prompt


class PromptInput(TextArea):
    """Enter sends; shift+enter or ctrl+j inserts a newline. Text with nothing
    visible in it is not sent (a notice says so).

    Typed characters go in a burst at a time (`FLUSH_SECONDS`), before any
    other key: each edit re-wraps the whole line and re-measures the text, so
    text arriving as keystrokes (a paste without bracketed paste) took time
    growing with its square when it went in a key at a time. The prompt holds
    at most `MAX_CHARS`: typing past it is left out, and a longer paste is
    refused, each with a notice."""

    MAX_CHARS = 65_536
    FLUSH_SECONDS = 1 / 60

    @dataclass
    class Submitted(Message):
        text: str

    class PickFile(Message):
        """`@` typed where a word starts: the chat opens the file picker."""

    def __init__(self, **kwargs) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, tab_behavior="focus", placeholder=HINT, **kwargs)
        self._typed: list[str] = []  # characters typed since the last burst went in
        self._full = False  # the last burst did not fit (its notice is showing)

    async def _on_key(self, event: events.Key) -> None:
        if event.character == "@" and not self.read_only and self._at_word_start():
            event.prevent_default()
            event.stop()
            self.post_message(self.PickFile())
            return
        if event.is_printable and event.character and not self.read_only:
            event.prevent_default()
            event.stop()
            self._restart_blink()
            if not self._typed:
                self.set_timer(self.FLUSH_SECONDS, self.flush_typed)
            self._typed.append(event.character)
            return
        self.flush_typed()
        if event.key == "enter":
            event.prevent_default()
            event.stop()
            text = self.text.strip()
            if not blank(text):
                self.post_message(self.Submitted(text))
            elif self.text:
                self.app.notify("nothing to send: the message has no visible text", severity="warning", timeout=4)
            return
        if event.key in ("shift+enter", "ctrl+j", "alt+enter"):
            event.prevent_default()
            event.stop()
            self.insert("\n")
            return
        await super()._on_key(event)

    def _at_word_start(self) -> bool:
        """The cursor is at the start of the prompt or after a space (typed keys in first)."""
        self.flush_typed()
        row, col = self.cursor_location
        return col == 0 or self.document.get_line(row)[col - 1].isspace()

    def flush_typed(self) -> None:
        """Insert the characters typed since the last burst, as far as the prompt has room."""
        if not self._typed:
            return
        text, self._typed = "".join(self._typed), []
        start, end = self.selection
        room = self.MAX_CHARS - len(self.text) + len(self.get_text_range(start, end))
        if len(text) > room and not self._full:  # said once until the prompt has room again
            self.app.notify(
                f"the prompt holds at most {self.MAX_CHARS:,} characters: what was typed past that is left out",
                severity="warning",
                timeout=10,
            )
        self._full = len(text) > room
        if room > 0:
            self._replace_via_keyboard(text[:room], start, end)

    async def _on_paste(self, event: events.Paste) -> None:
        """Before TextArea's own paste (Textual calls it next): typed keys go
        in first, and a paste the prompt has no room for is refused."""
        self.flush_typed()
        start, end = self.selection
        if len(self.text) - len(self.get_text_range(start, end)) + len(event.text) > self.MAX_CHARS:
            event.prevent_default()
            event.stop()
            self.app.notify(
                f"the paste ({len(event.text):,} characters) would make the prompt longer than the "
                f"{self.MAX_CHARS:,} characters it holds: nothing was pasted",
                severity="warning",
                timeout=10,
            )

    def load_text(self, text: str) -> None:
        self._typed = []  # replaced with the rest, as if they had gone in first
        super().load_text(text)
