"""A reply's spans as the chat shows them: cut into chunks (one widget
each), drawn in the colours of who proposed each token, and, once the reply
has ended, with its fenced code blocks set off from the prose.

A span is {text, kind, drafter}, as `specchat.display.spans` makes them.
The code blocks take a background and their fence lines are dimmed; the
tokens keep their provenance colours, so a block is not coloured by its
syntax (F5 renders the reply as Markdown, syntax colours included). While
a reply streams its text is drawn as it comes, blocks and all, the chunk
being written growing by appending; the blocks are set off once it ends.
"""

from __future__ import annotations

import bisect
import re

from textual.content import Content

from specchat.display import merge_spans, shown_text
from specchat.themes import span_style

CHUNK_CHARS = 240  # a reply is shown in chunks of about this size, split at newlines
CODE_STYLE = "on $panel"  # a line of a fenced code block
FENCE_STYLE = "dim on $panel"  # its fence lines (```python, ```)
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")  # a fence opens a line (CommonMark: up to 3 spaces in)


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
    out: list[tuple[int, int, str]] = []
    fence, start = "", 0
    for line in text.split("\n"):
        end = start + len(line.removesuffix("\r"))  # a Windows line end is a line end, drawn as one
        found = FENCE.match(line)
        if not fence:
            if found and not (found.group(1)[0] == "`" and "`" in line[found.end() :]):  # not ``` inline ```
                fence = found.group(1)
                out.append((start, end, FENCE_STYLE))
        else:
            closes = found is not None and found.group(1).startswith(fence) and not line[found.end() :].strip()
            out.append((start, end, FENCE_STYLE if closes else CODE_STYLE))
            fence = "" if closes else fence
        start += len(line) + 1
    return out


def ended_contents(chunks: list[list[dict]], text: str, show_rejected: bool, first: int = 0) -> list[Content]:
    """The chunks from `first` on, each as spans_content draws it, with the
    code blocks of the reply (its text, whose chunks they are) set off."""
    ranges = code_lines(text)
    ends = [end for _, end, _ in ranges]
    out, offset = [], 0
    for chunk in chunks[:first]:  # drawn already: only where the next one starts
        offset += len(reply_text(chunk)) + 1
    for chunk in chunks[first:]:
        content = Content("")
        for s in chunk:
            own = span_style(s["kind"], s["drafter"])
            if s["kind"] == "rejected":  # no text of the reply's: it takes the style of the line it was drafted in
                if show_rejected:
                    i = bisect.bisect_left(ends, offset)
                    inside = i < len(ranges) and ranges[i][0] <= offset
                    content = content.append_text(shown_text(s), _styles(own, ranges[i][2] if inside else ""))
                continue
            for piece, style in _pieces(s["text"], offset, ranges, ends):
                content = content.append_text(shown_text({**s, "text": piece}), _styles(own, style))
            offset += len(s["text"])
        out.append(content)
        offset += 1  # the separator between two chunks
    return out


def _pieces(text: str, offset: int, ranges: list[tuple[int, int, str]], ends: list[int]) -> list[tuple[str, str]]:
    """text, found at offset in the reply, cut where a code line starts or
    ends: each piece with the style of the code line it is in ("" outside)."""
    out, pos, end = [], offset, offset + len(text)
    i = bisect.bisect_right(ends, pos)  # the first code line that ends past pos
    while pos < end:
        if i < len(ranges) and ranges[i][0] <= pos:  # inside a code line
            stop, style = min(end, ranges[i][1]), ranges[i][2]
            i += 1
        else:
            stop, style = (min(end, ranges[i][0]) if i < len(ranges) else end), ""
        if stop > pos:  # an empty line of code is no piece
            out.append((text[pos - offset : stop - offset], style))
        pos = stop
    return out


def _styles(*styles: str) -> str:
    return " ".join(s for s in styles if s)
