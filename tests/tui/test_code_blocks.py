"""An ended reply's fenced code blocks are set off from its prose: a
background on their lines, the fence lines dimmed, a block that names its
language coloured by its syntax (who proposed each token one key away,
ctrl+t). The text itself never changes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specchat.display import shown_text
from specchat.tui.chat.chatlog import ChatLog
from specchat.tui.chat.replytext import (
    CODE_STYLE,
    FENCE_STYLE,
    chunk_spans,
    code_lines,
    ended_contents,
    reply_text,
    syntax_ranges,
)
from specchat.tui.chat.widgets import AssistantMessage, ReplyBody
from tests.support.tui import DARK, hexcolor, make_app, ready, segments

pytestmark = pytest.mark.usefixtures("specchat_home")

def styled(text: str) -> list[tuple[str, str]]:
    return [(text[a:b], style) for a, b, style in code_lines(text)]


def test_code_lines_fences_and_their_lines():
    text = "Here:\n```python\ndef f():\n    return 1\n```\nDone."
    assert styled(text) == [("```python", FENCE_STYLE), ("def f():", CODE_STYLE), ("    return 1", CODE_STYLE),
                            ("```", FENCE_STYLE)]  # fmt: skip


def test_code_lines_what_opens_and_closes_a_block():
    assert styled("use ``` to fence\nno code") == []  # a fence opens a line
    assert styled("```inline``` is no block\nx") == []  # backticks after a backtick fence: inline code
    assert styled("    ```\nx") == []  # four spaces in: an indented line, not a fence
    # A block closes at its own fence character, at least as long, with nothing after it.
    assert styled("````\n```\n~~~\n```` x\n````")[1:] == [("```", CODE_STYLE), ("~~~", CODE_STYLE),
                                                         ("```` x", CODE_STYLE), ("````", FENCE_STYLE)]  # fmt: skip
    assert styled("~~~\ncode") == [("~~~", FENCE_STYLE), ("code", CODE_STYLE)]  # left open: to the end
    assert styled("```\n\ncode\n```") == [("```", FENCE_STYLE), ("", CODE_STYLE), ("code", CODE_STYLE),
                                          ("```", FENCE_STYLE)]  # fmt: skip


def coloured(text: str) -> list[tuple[str, str]]:
    return [(text[a:b], style) for a, b, style in syntax_ranges(text) if text[a:b].strip()]


def test_a_block_that_names_its_language_is_coloured_by_its_syntax():
    text = "Use `def`:\n```python\ndef f(x):\n\treturn 'x'  # one\n```\ndef is prose here."
    found = coloured(text)
    assert found[:4] == [("def", "$text-accent"), ("f", "$text-warning underline"), ("(", "$text"),
                         ("x", "$text-primary")]  # fmt: skip  # Textual's highlight theme, by token
    assert ("return", "$text-accent") in found and found[-1] == ("# one", "$text 60%")
    assert {style for piece, style in found if piece in ("'", "x'", "'x'")} <= {"$text-success"}
    assert "".join(piece for piece, _ in found).count("def") == 1  # the prose's def is no keyword
    assert coloured("```rust\nfn main() {}\n```")[0] == ("fn", "$text-accent")
    assert coloured("```\ndef f(): pass\n```") == []  # no language named: no guess
    assert coloured("```no-such-language\ndef f(): pass\n```") == []
    assert coloured("```python\r\nx = 1\r\ny = 2\r\n```") == []  # Pygments would move the offsets: left plain


LANGUAGES = ["```python\n", "```js\n", "```bash\n", "```text\n", "```c {.x}\n"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*LANGUAGES, "a", " ", "\t", "\n", "```", "~~~", "x = '1'", "# c", "\\", "\r"]),
                max_size=60).map("".join))  # fmt: skip
def test_syntax_colours_lie_in_code_lines_in_order(text):
    """Whatever the text, the syntax ranges are in order, never overlap, and
    cover only the lines of code between fences, never prose or a fence."""
    code = {i for a, b, style in code_lines(text) if style == CODE_STYLE for i in range(a, b)}
    at = 0
    for a, b, _ in syntax_ranges(text):
        assert at <= a < b and set(range(a, b)) - code <= {i for i in range(a, b) if text[i] == "\n"}
        at = b


def spans_of(alphabet: list[str]):
    text = st.lists(st.sampled_from(alphabet), min_size=1, max_size=6).map("".join)
    kind, drafter = st.sampled_from(["accepted", "rejected", "target"]), st.sampled_from(["ngram", "draft", "target"])
    return st.lists(st.fixed_dictionaries({"text": text, "kind": kind, "drafter": drafter}), max_size=200)


MARKS = ["a", " ", ". ", "\n", "```", "~~~", "`", "\x1b"]


def ended(spans: list[dict], show_rejected: bool):
    chunks: list[list[dict]] = [[]]
    chunk_spans(chunks, spans)
    return chunks, ended_contents(chunks, reply_text(spans), show_rejected)


@settings(max_examples=200, deadline=None)
@given(spans_of([*MARKS, "\r\n", "\r"]), st.booleans())
def test_an_ended_reply_draws_the_same_text(spans, show_rejected):
    """Wherever the chunks were cut, each draws what it drew while streaming."""
    chunks, contents = ended(spans, show_rejected)
    assert len(contents) == len(chunks)
    for chunk, content in zip(chunks, contents):
        assert content.plain == "".join(shown_text(s) for s in chunk if show_rejected or s["kind"] != "rejected")
    for first in range(len(chunks)):  # the chunks from one on, as a widget mounting them draws them
        later = ended_contents(chunks, reply_text(spans), show_rejected, first)
        assert [(c.plain, c.spans) for c in later] == [(c.plain, c.spans) for c in contents[first:]]


@settings(max_examples=200, deadline=None)
@given(spans_of(MARKS), st.booleans())
def test_an_ended_reply_styles_code_and_only_code(spans, show_rejected):
    """A character of the reply is drawn on the panel exactly where
    code_lines puts it, in its code line's style."""
    chunks, contents = ended(spans, show_rejected)
    text = reply_text(spans)
    inside = {i: style for a, b, style in code_lines(text) for i in range(a, b)}
    offset = 0
    for chunk, content in zip(chunks, contents):
        at = 0  # where in the chunk's drawn text
        for s in chunk:
            if s["kind"] == "rejected":
                at += len(shown_text(s)) if show_rejected else 0
                continue
            for j in range(len(s["text"])):  # no character here changes length when made safe
                styles = [str(x.style) for x in content.spans if x.start <= at + j < x.end]
                want = inside.get(offset + j)
                assert [x for x in styles if x.endswith(want)] if want else not [x for x in styles if "$panel" in x]
            at += len(s["text"])
            offset += len(s["text"])
        offset += 1  # the separator the chunks dropped


async def test_an_ended_reply_sets_its_code_block_off(tmp_path):
    spans = [{"text": "Like this:\n```python\n", "kind": "target", "drafter": "target"},
             {"text": "squares = [x * x for x in xs]", "kind": "accepted", "drafter": "draft"},
             {"text": "\n```\nDone.", "kind": "target", "drafter": "target"}]  # fmt: skip
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        reply = AssistantMessage()
        await app.query_one(ChatLog).mount(reply)
        reply.add_spans(spans)
        await pilot.pause()
        assert not any(style.bgcolor and style.bgcolor.triplet.hex == DARK["panel"]
                       for _, style in segments(reply.query_one(ReplyBody)))  # fmt: skip  # streaming: as it comes
        reply.end({"tokens": 20}, "eos")
        await pilot.pause()
        runs = [(text, style) for text, style in segments(reply.query_one(ReplyBody)) if text.strip()]
        on_panel = "".join(t for t, s in runs if s.bgcolor is not None and s.bgcolor.triplet.hex == DARK["panel"])
        assert on_panel.replace(" ", "") == "```pythonsquares=[x*xforxinxs]```"
        code = [s for t, s in runs if t.strip() == "squares"]
        assert code and hexcolor(code[0]) not in (DARK["model"], DARK["fg"])  # coloured by its syntax...
        keyword = [s for t, s in runs if t.strip() == "for"]
        assert keyword and hexcolor(keyword[0]) not in (hexcolor(code[0]), DARK["model"])
        fences = [s for t, s in runs if t.startswith("```")]
        assert fences and all(hexcolor(s) != DARK["fg"] for s in fences)  # dim: Textual draws it fainter
        prose = [s for t, s in runs if "Like" in t or "Done" in t]
        assert prose and all(s.bgcolor is None or s.bgcolor.triplet.hex != DARK["panel"] for s in prose)
        assert reply.text == "".join(s["text"] for s in spans)  # what is copied: the reply, as it was
        reply.set_show_rejected(True)  # ctrl+t: the drafts, and who proposed each token
        await pilot.pause()
        runs = [(text, style) for text, style in segments(reply.query_one(ReplyBody)) if text.strip()]
        code = [s for t, s in runs if "squares" in t]
        assert code and hexcolor(code[0]) == DARK["model"]  # ...and the draft model's colour one key away
