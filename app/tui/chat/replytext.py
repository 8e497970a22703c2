"""A reply's spans as the chat shows them: cut into chunks (one widget
each), drawn in the colours of who proposed each token, its fenced code
blocks set off from the prose and its Markdown marks drawn.

A span is {text, kind, drafter}, as `specchat.display.spans` makes them.
While a reply streams, the chunk being written grows by appending, drawn
as it comes in the colours of who proposed each token; once a chunk is
done (the next one begins) it is drawn again whole: its code blocks on a
background with their fence lines dimmed, a heading bold, **strong** bold
with its marks dimmed, `code` on a lighter background (prose_ranges). The marks
stay in the text, so what is read is what is copied. Once the reply ends,
a block whose fence names a language Pygments knows (```python) is also
coloured by its syntax, in Textual's highlight theme (so it follows the
chat's theme), and its tokens' provenance colours come back with the
rejected drafts (ctrl+t). The prose keeps its provenance colours.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence

from textual.content import Content

from specchat.display import merge_spans, shown_text
from specchat.themes import span_style

CHUNK_CHARS = 240  # a reply is shown in chunks of about this size, split at newlines
CODE_STYLE = "on $panel"  # a line of a fenced code block
FENCE_STYLE = "dim on $panel"  # its fence lines (```python, ```)
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")  # a fence opens a line (CommonMark: up to 3 spaces in)
SYNTAX_CACHED = 64  # replies whose syntax colours are kept (syntax_ranges)
HEADING = re.compile(r" {0,3}#{1,6}(?: |$)")  # an ATX heading's line
INLINE = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1|(`+)([^`\n]+?)\3")  # **strong**, __strong__, `code`
HEADING_STYLE = STRONG_STYLE = "bold"
MARK_STYLE = "dim"  # the ** around strong text
INLINE_CODE_STYLE = "on $boost"  # not the blocks' $panel: a line of code is set off further


def spans_content(spans: list[dict], show_rejected: bool) -> Content:
    content = Content("")
    for s in spans:
        if s["kind"] == "rejected" and not show_rejected:
            continue
        content = content.append_text(shown_text(s), span_style(s["kind"], s["drafter"]))
    return content


def reply_text(spans: list[dict]) -> str:
    return "".join(s["text"] for s in spans if s["kind"] != "rejected")


def chunk_spans(chunks: list[list[dict]], new: list[dict]) -> None:
    """Add spans to the view's chunks. Once the last chunk holds CHUNK_CHARS,
    a newline starts a new chunk; past twice that, so does a sentence end
    (". "), and past eight times, any space (text without sentence ends).
    The separator between two chunks is the widget boundary, so it is dropped
    from the view (never from the data): the reply's text is the chunks'
    text joined by one character each."""
    for s in new:
        text = s["text"]
        while s["kind"] != "rejected":
            size = sum(len(x["text"]) for x in chunks[-1])
            tail = chunks[-1][-1]["text"][-1:] if chunks[-1] else ""
            cut = _boundary(tail + text, size) - len(tail)
            if cut < 0:  # no boundary in this span
                break
            if cut:
                merge_spans(chunks[-1], [{**s, "text": text[:cut]}])
            chunks.append([])
            text = text[cut + 1 :]
        if text:
            merge_spans(chunks[-1], [{**s, "text": text}])


def _boundary(text: str, size: int) -> int:
    """Index of the separator where a new chunk may start, or -1 (or less)."""
    if size >= CHUNK_CHARS and "\n" in text:
        return text.index("\n")
    if size >= 2 * CHUNK_CHARS:
        for mark in (". ", "? ", "! "):
            if mark in text:
                return text.index(mark) + 1
    if size >= 8 * CHUNK_CHARS and " " in text:  # no sentence ends at all: any space
        return text.index(" ")
    return -1


# --- code blocks in an ended reply --------------------------------------------------------


def code_lines(text: str) -> list[tuple[int, int, str]]:
    """The lines of text's fenced code blocks, as (start, end, style) in
    order, line ends left out: the fence lines in FENCE_STYLE, the lines
    between them in CODE_STYLE. A block closes at a line of its fence's
    character, at least as long, and nothing else; one left open runs to
    the end of the text."""
    return [(start, end, FENCE_STYLE if fence else CODE_STYLE) for start, end, fence, _ in _block_lines(text)]


@functools.lru_cache(maxsize=SYNTAX_CACHED)
def syntax_ranges(text: str) -> tuple[tuple[int, int, str], ...]:
    """The syntax colours of text's code blocks whose opening fence names a
    language Pygments knows, as (start, end, style) in order: a token's
    style in Textual's HighlightTheme ($text-accent for a keyword, ...),
    "$text" for one it leaves plain. Offsets are the text's own (tabs are
    not expanded). A reply is drawn again on every resize and ctrl+t: the
    last SYNTAX_CACHED texts' colours are kept, not lexed again."""
    blocks: dict[int, list[tuple[int, int]]] = {}
    for start, end, fence, block in _block_lines(text):
        if not fence:
            blocks.setdefault(block, []).append((start, end))
    out: list[tuple[int, int, str]] = []
    for block, lines in blocks.items():
        lexer = _lexer(text, block)
        if lexer is None:
            continue
        first, last = lines[0][0], lines[-1][1]
        tokens = list(lexer.get_tokens(text[first:last]))
        if sum(len(value) for _, value in tokens) != last - first:
            continue  # Pygments rewrote the text (it turns \r\n into \n): no offsets to trust
        pos = first
        for token, value in tokens:
            if value:
                out.append((pos, pos + len(value), _token_style(token)))
            pos += len(value)
    return tuple(out)


@functools.lru_cache(maxsize=4)
def _block_lines(text: str) -> tuple[tuple[int, int, bool, int], ...]:
    """(start, end, is a fence line, the block's start) for every line of a
    fenced block. Kept for the last few texts: drawing a reply asks for its
    code lines, its Markdown marks and its syntax, each from these."""
    out: list[tuple[int, int, bool, int]] = []
    fence, start, block = "", 0, 0
    for line in text.split("\n"):
        end = start + len(line.removesuffix("\r"))  # a Windows line end is a line end, drawn as one
        found = FENCE.match(line)
        if not fence:
            if found and not (found.group(1)[0] == "`" and "`" in line[found.end() :]):  # not ``` inline ```
                fence, block = found.group(1), start
                out.append((start, end, True, block))
        else:
            closes = found is not None and found.group(1).startswith(fence) and not line[found.end() :].strip()
            out.append((start, end, closes, block))
            fence = "" if closes else fence
        start += len(line) + 1
    return tuple(out)


def prose_ranges(text: str) -> list[tuple[int, int, str]]:
    """Markdown's marks in text outside its fenced blocks, as (start, end,
    style) in order: a heading's line in HEADING_STYLE, strong text in
    STRONG_STYLE with its ** in MARK_STYLE, inline `code` in
    INLINE_CODE_STYLE. Offsets are the text's own; nothing is taken out."""
    in_blocks = {start for start, _, _, _ in _block_lines(text)}
    out: list[tuple[int, int, str]] = []
    start = 0
    for line in text.split("\n"):
        if start not in in_blocks and HEADING.match(line):
            out.append((start, start + len(line), HEADING_STYLE))
        elif start not in in_blocks:
            for m in INLINE.finditer(line):
                a, b = start + m.start(), start + m.end()
                if m.group(1):
                    w = len(m.group(1))
                    out += [(a, a + w, MARK_STYLE), (a + w, b - w, STRONG_STYLE), (b - w, b, MARK_STYLE)]
                else:
                    out.append((a, b, INLINE_CODE_STYLE))
        start += len(line) + 1
    return out


def _lexer(text: str, block: int):
    """Pygments' lexer for the language the fence at `block` names, or None."""
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    found = FENCE.match(text, block)
    words = text[found.end() if found else block :].split("\n", 1)[0].split()
    if not words:
        return None
    try:  # tabsize 0 keeps every tab one character, as the reply's offsets count it
        return get_lexer_by_name(words[0].strip("{}.").lower(), stripnl=False, ensurenl=False, tabsize=0)
    except (ClassNotFound, ValueError):
        return None


def _token_style(token) -> str:
    from textual.highlight import HighlightTheme

    while token is not None:
        if style := HighlightTheme.STYLES.get(token):
            return style
        token = token.parent
    return "$text"


def ended_contents(chunks: list[list[dict]], text: str, show_rejected: bool, first: int = 0) -> list[Content]:
    """The chunks from `first` on, each as spans_content draws it, with the
    code blocks of the reply (its text, whose chunks they are) set off and
    its Markdown marks drawn, the blocks coloured by their syntax unless
    `show_rejected` asks for the drafts. A streaming reply's done chunks are
    drawn so too, with their drafts (text is then the reply so far)."""
    lines = _layer(code_lines(text))
    syntax = _layer(() if show_rejected else syntax_ranges(text))
    layers = [lines, syntax, _layer(prose_ranges(text))]
    out, offset = [], 0
    for chunk in chunks[:first]:  # drawn already: only where the next one starts
        offset += len(reply_text(chunk)) + 1
    for chunk in chunks[first:]:
        content = Content("")
        for s in chunk:
            own = span_style(s["kind"], s["drafter"])
            if s["kind"] == "rejected":  # no text of the reply's: it takes the style of the line it was drafted in
                if show_rejected:
                    i = bisect.bisect_left(lines[1], offset)
                    inside = i < len(lines[0]) and lines[0][i][0] <= offset
                    content = content.append_text(shown_text(s), _styles(own, lines[0][i][2] if inside else ""))
                continue
            for piece, (line, colour, mark, _) in _pieces(s["text"], offset, layers):
                content = content.append_text(shown_text({**s, "text": piece}), _styles(colour or own, line, mark))
            offset += len(s["text"])
        out.append(content)
        offset += 1  # the separator between two chunks
    return out


Layer = tuple[Sequence[tuple[int, int, str]], list[int]]  # ranges in order, and their ends


def _layer(ranges: Sequence[tuple[int, int, str]]) -> Layer:
    return ranges, [end for _, end, _ in ranges]


def _pieces(text: str, offset: int, layers: list[Layer]) -> list[tuple[str, list[str]]]:
    """text, found at offset in the reply, cut where a range of any layer
    starts or ends: each piece with each layer's style there ("" outside),
    one more "" at the end for a missing layer."""
    out, pos, end = [], offset, offset + len(text)
    while pos < end:
        stop, styles = end, []
        for ranges, ends in layers:
            i = bisect.bisect_right(ends, pos)  # the first range that ends past pos
            if i < len(ranges) and ranges[i][0] <= pos:  # inside it
                stop, style = min(stop, ranges[i][1]), ranges[i][2]
            else:
                stop, style = (min(stop, ranges[i][0]) if i < len(ranges) else stop), ""
            styles.append(style)
        out.append((text[pos - offset : stop - offset], [*styles, ""]))
        pos = stop
    return out


def _styles(*styles: str) -> str:
    return " ".join(s for s in styles if s)
