"""A reply's Markdown marks are drawn in the colour view, while it streams
(once a chunk is done) and after: a heading bold, **strong** bold with its
marks dimmed, `code` on a lighter background, the provenance colours kept
and the text as it came (what is read is what is copied)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specchat.tui.chat.chatlog import ChatLog
from specchat.tui.chat.replytext import (
    CHUNK_CHARS,
    HEADING_STYLE,
    INLINE_CODE_STYLE,
    MARK_STYLE,
    STRONG_STYLE,
    code_lines,
    prose_ranges,
)
from specchat.tui.chat.widgets import AssistantMessage, ReplyChunk
from tests.support.tui import DARK, hexcolor, make_app, ready, segments

pytestmark = pytest.mark.usefixtures("specchat_home")

def marked(text: str) -> list[tuple[str, str]]:
    return [(text[a:b], style) for a, b, style in prose_ranges(text)]


def test_headings_strong_text_and_inline_code_outside_blocks():
    text = "# Steps\nUse **both** and `make -j`, not ** this**.\n```\n# a comment, **not** marked\n```\n## Done"
    assert marked(text) == [("# Steps", HEADING_STYLE), ("**", MARK_STYLE), ("both", STRONG_STYLE), ("**", MARK_STYLE),
                            ("`make -j`", INLINE_CODE_STYLE), ("## Done", HEADING_STYLE)]  # fmt: skip
    assert marked("#hashtag, 2 ** 3, a**b**") == [("**", MARK_STYLE), ("b", STRONG_STYLE), ("**", MARK_STYLE)]


@given(st.lists(st.sampled_from(["a", " ", "\n", "**", "__", "`", "```", "# ", "#"]), max_size=60).map("".join))
def test_marks_are_in_order_outside_code_and_on_the_text_itself(text):
    code = {i for a, b, _ in code_lines(text) for i in range(a, b)}
    at = 0
    for a, b, style in prose_ranges(text):
        assert at <= a < b <= len(text) and not code & set(range(a, b)) and "\n" not in text[a:b]
        if style == MARK_STYLE:
            assert text[a:b] in ("**", "__")
        if style == INLINE_CODE_STYLE:
            assert text[a] == text[b - 1] == "`"
        at = b


async def test_a_streaming_reply_draws_its_marks_once_a_chunk_is_done(tmp_path):
    first = "# Plan\nThe **key** step is `run`.\n```\nmake\n```\n" + "word " * (CHUNK_CHARS // 5)
    spans = [{"text": first, "kind": "accepted", "drafter": "draft"},
             {"text": "more\nstill **coming**", "kind": "target", "drafter": "target"}]  # fmt: skip
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        reply = AssistantMessage()
        await app.query_one(ChatLog).mount(reply)
        reply.add_spans(spans)
        await pilot.pause()
        done, live = reply.query(ReplyChunk)  # the reply streams on: nothing has ended it
        runs = [(text, style) for text, style in segments(done) if text.strip()]
        assert [t for t, s in runs if s.bold] == ["# Plan", "key"]
        key = [s for t, s in runs if t == "key"][0]
        assert hexcolor(key) == DARK["model"]  # bold, in the draft model's colour still
        assert [t for t, s in runs if t == "**"] and all(hexcolor(s) != DARK["model"] for t, s in runs if t == "**")
        code = "".join(t for t, s in runs if s.bgcolor is not None and s.bgcolor.triplet.hex == DARK["panel"])
        assert code.replace(" ", "") == "```make```"  # the block is set off while the reply streams
        inline = [s for t, s in runs if t == "`run`"]
        assert inline and inline[0].bgcolor is not None and inline[0].bgcolor.triplet.hex != DARK["panel"]
        assert not [s for t, s in segments(live) if s.bold]  # the chunk being written: as it comes
        assert reply.text == "".join(s["text"] for s in spans)
