"""F6: copy any message on screen, or its code blocks, under Pilot on the
real engine with the fake model; what a line of the copy list shows."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from specchat import paths
from specchat.tui.chat.widgets import AssistantMessage
from specchat.tui.parts.copying import LINE_CHARS, CopyScreen, copy_option, last_reply
from tests.support.tui import make_app, ready, send, wait_until

pytestmark = pytest.mark.usefixtures("specchat_home")


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


async def test_f6_copies_any_message_and_c_its_code(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f6")  # nothing on screen yet: one line, no list
        assert not isinstance(app.screen, CopyScreen) and notes(app)[-1] == "nothing to copy yet: send a message first"
        first = await send(pilot, "hello")
        first.spans.append({"text": "\n```python\nprint(1)\n```\n", "kind": "target", "drafter": "target"})
        second = await send(pilot, "and [bold]again[/]")  # markup in a message is text, in the list too
        assert first.text != second.text
        await pilot.press("f6")
        await wait_until(pilot, lambda: isinstance(app.screen, CopyScreen))
        await pilot.press("enter")  # the last reply is first in line
        await wait_until(pilot, lambda: not isinstance(app.screen, CopyScreen))
        assert app.clipboard == second.text
        assert (paths.data_dir() / "copied.txt").read_text() == second.text
        await pilot.press("f6", "up")  # your second message
        assert "[bold]again[/]" in str(app.screen.query_one("#copy-list").get_option_at_index(2).prompt)
        await pilot.press("enter")
        assert app.clipboard == "and [bold]again[/]" and notes(app)[-1].startswith("your message went to")
        await pilot.press("f6", "up", "up", "c")  # the first reply's code block
        await wait_until(pilot, lambda: not isinstance(app.screen, CopyScreen))
        assert app.clipboard == "print(1)\n" and notes(app)[-1].startswith("the code block went to")
        await pilot.press("f6", "up", "up", "up", "c")  # your first message has no code: one line says so
        assert notes(app)[-1] == "no code block in your message" and app.clipboard == "print(1)\n"
        await pilot.press("f6", "escape")  # esc copies nothing
        await wait_until(pilot, lambda: not isinstance(app.screen, CopyScreen))
        assert app.clipboard == "print(1)\n"
        await pilot.press("f7")  # the last reply's code: it has none
        assert notes(app)[-1] == "no code block in the last reply"
        assert len(app.query(AssistantMessage)) == 2


@given(st.lists(st.tuples(st.sampled_from(["you", "reply"]), st.text()), max_size=8))
def test_the_last_reply_is_the_last_of_the_replies(messages):
    replies = [text for who, text in messages if who == "reply"]
    assert last_reply(messages) == (replies[-1] if replies else None)


@given(st.integers(0, 999), st.sampled_from(["you", "reply"]),
       st.text() | st.lists(st.sampled_from(["\x9b", "\x1b", "a", " ", "[b]"]), max_size=90).map("".join))  # fmt: skip
@example(0, "you", "\x9b" * 70)  # a C1 control is drawn as <U+009B>: eight columns
def test_a_line_of_the_list_is_one_line_of_plain_text(i, who, text):
    """Any message, control characters and markup included, is one line of data."""
    line = str(copy_option(i, who, text).prompt)
    assert "\n" not in line and "\x1b" not in line and line.startswith(f"{i + 1:>3} {who:>5}: ")
    assert len(line) <= 11 + LINE_CHARS + len("  · 99999 lines")  # one row of the dialog
