"""Any text, through every function that puts it on a screen:
a chat message, a reply, a stats line, a history row, a notification, a line
of `specchat run`, its JSON, an export. Whatever the text holds (markup,
escape sequences, lone surrogates, megabytes), nothing raises and no control
character but newline and tab comes out."""

from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from textual.content import Content
from textual.notifications import Notification
from textual.widgets._toast import Toast

from specchat.cli.run import round_text
from specchat.decoding.stats import Round
from specchat.history.database import Conversation, Message, to_markdown
from specchat.textsafe import safe_json, safe_text
from specchat.tui.app import SpecchatApp
from specchat.tui.chat.replytext import spans_content
from specchat.tui.chat.widgets import UserMessage, stats_content
from specchat.tui.parts.screens import conversation_line

# Text that tries hard: markup, escape sequences, C1 controls, lone surrogates.
NASTY = st.sampled_from(["[/]", "[@click=app.quit]x[/]", "[b]", "arr[i]", "\x1b]0;PWNED\x07", "\x1b[2J", "\x9b31m",
                         "\ud800", "\udcff", "\r", "\r\n", "\x00", "\x7f", "$accent", "[red]x[/red]", "\\[", "\x85"])
TEXT = st.lists(st.one_of(st.text(), NASTY), max_size=8).map("".join)
HUGE = st.builds(lambda piece, n: piece * n, TEXT, st.integers(1, 4000))
ANY_TEXT = st.one_of(TEXT, HUGE)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def clean(text: str) -> bool:
    """No control character except newline and tab, no lone surrogate."""
    return not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF for c in text)


def drawn(content: Content) -> str:
    """What the terminal gets for this Content (as text, styles dropped)."""
    assert isinstance(content, Content)
    return "".join(segment.text for segment in content.render_segments())


@SETTINGS
@given(ANY_TEXT)
def test_safe_text_keeps_what_is_printable(text):
    out = safe_text(text)
    assert clean(out)
    out.encode("utf-8")  # always writable
    kept = text.replace("\r\n", "\n")
    assert out.count("␛") == kept.count("\x1b") + kept.count("␛")  # every ESC is shown, none lost
    if clean(kept):
        assert out == kept  # text without controls comes out unchanged


@SETTINGS
@given(ANY_TEXT)
def test_chat_message_and_reply(text):
    assert drawn(UserMessage(text).content) == safe_text(text)
    spans = [{"text": text, "kind": kind, "drafter": drafter}
             for kind, drafter in (("accepted", "ngram"), ("rejected", "draft"), ("target", "target"),
                                   ("accepted", "hybrid:ngram"))]
    struck = safe_text(text).replace("\n", "⏎")  # a rejected draft keeps to its line
    assert drawn(spans_content(spans, show_rejected=True)) == safe_text(text) + struck + safe_text(text) * 2
    line = drawn(stats_content({"drafters": [text, "off"], "tok_s": 1.0}, "cancelled"))
    assert clean(line) and safe_text(text) in line


@SETTINGS
@given(ANY_TEXT, ANY_TEXT)
def test_history_row(title, pair):
    row = drawn(conversation_line(Conversation(1, title, pair, updated=0.0, n_messages=2)))
    assert clean(row) and row.startswith(safe_text(title) + "  ·  2 messages · ")


class Notices(SpecchatApp):
    """The real app's notify, with the messages it posts kept instead of queued."""

    def __init__(self) -> None:
        super().__init__(models=None)
        self.posted: list = []

    def post_message(self, message) -> bool:
        self.posted.append(message)
        return True


@SETTINGS
@given(ANY_TEXT, ANY_TEXT)
def test_notification(message, title):
    app = Notices()
    app.notify(message, title=title, severity="warning")
    (posted,) = app.posted
    n: Notification = posted.notification
    assert not n.markup and n.title == safe_text(title)
    toast = Toast(Notification(n.message, "", n.severity, 1, markup=n.markup))
    assert drawn(toast.render()) == safe_text(message)


@SETTINGS
@given(ANY_TEXT, ANY_TEXT, ANY_TEXT)
def test_run_output_and_json(accepted, rejected, target):
    r = Round(accepted=[1], rejected=[2], target=3, drafter="ngram", plain=False,
              accepted_text=accepted, rejected_text=rejected, target_text=target)
    out = io.StringIO()
    Console(file=out, color_system=None, width=120, soft_wrap=True).print(round_text(r), end="")
    assert clean(out.getvalue())
    assert round_text(r).plain == safe_text(accepted) + safe_text(rejected).replace("\n", "⏎") + safe_text(target)
    as_json = safe_json({"text": accepted + target})
    assert clean(as_json)
    # Every character survives; a lone surrogate (no character) reads back as U+FFFD.
    assert json.loads(as_json)["text"] == "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in accepted + target)


@SETTINGS
@given(ANY_TEXT, ANY_TEXT, ANY_TEXT)
def test_export(title, question, answer):
    conv = Conversation(1, title, "pair", messages=[
        Message("user", question),
        Message("assistant", answer, "eos", {"drafters": [answer], "alpha": 1.5, "tok_s": 3.0}),
    ])
    md = to_markdown(conv)
    assert clean(md) and md.startswith("# ")
    md.encode("utf-8")
