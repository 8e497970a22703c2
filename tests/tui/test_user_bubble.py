"""A message with files attached shows each file as one line in the user's
bubble (its name and length), then the user's words; the message itself,
as sent and stored, still holds the files whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specchat.message.attach import Attachment, leading_files, with_files
from specchat.tui.chat.widgets import UserMessage
from tests.support.tui import enter, make_app, ready, segments, send, wait_until

pytestmark = pytest.mark.usefixtures("specchat_home")

CALC = "def total(items):\n    s = 0\n    for x in items:\n        s += x\n    return s\n"


def attachment(name: str, text: str) -> Attachment:
    return Attachment(name, text, Path("/nowhere") / "file", len(text), 0, "")


def held_lines(text: str) -> int:
    """The lines of a file as its block holds them (block() drops trailing line ends)."""
    kept = text.rstrip("\n")
    return kept.count("\n") + 1 if kept else 0


names = st.text(st.characters(blacklist_characters="\n`", blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
                min_size=1, max_size=20)  # fmt: skip  # check_name refuses line breaks; a backtick names no block
texts = st.lists(st.sampled_from(["a", "`", "```", "\n", " ", ":", "x.py:"]), max_size=20).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(names, texts), max_size=3), texts)
def test_the_files_a_message_starts_with_and_its_words(files, words):
    """Whatever the files hold (backticks, lines that look like a name), the
    files are read back as attached and the words as typed."""
    message = with_files(words, [attachment(n, t) for n, t in files])
    found, rest = leading_files(message)
    assert found[: len(files)] == [(n, held_lines(t)) for n, t in files]
    if len(found) == len(files):
        assert rest == words
    else:  # the words themselves start like a block (a name, a line, a fence): they are shown as one
        assert message.endswith(rest)


def test_a_block_after_the_words_is_words():
    message = "Look at this:\n\nnotes.txt:\n```\nhi\n```"
    assert leading_files(message) == ([], message)


def bubble(widget: UserMessage) -> str:
    return "".join(t for t, _ in segments(widget))


async def test_an_attached_file_is_one_line_in_the_bubble(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "calc.py").write_text(CALC)
    app = make_app(tmp_path / "data")
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await enter(pilot, "/file calc.py")
        await wait_until(pilot, lambda: app.chat.attachments)
        await send(pilot, "Rename items to values.")
        shown = bubble(app.query(UserMessage).last())
        assert "[+ calc.py · 5 lines]" in shown and "Rename items to values." in shown
        assert "def total" not in shown  # the file's text is not echoed
        sent = app.chat.session.messages[-2]["content"]
        assert sent.startswith("calc.py:\n```\ndef total(items):") and sent.endswith("Rename items to values.")
        assert app.query(UserMessage).last().text == sent
