"""Copying text where tokens part: the n-gram drafter's fallback.

A reply that quotes text rarely spells it with the text's tokens where
white space differs: a hard-wrapped line quoted as one ("the\\nsecond" read
as "the second": "second" and " second" are two tokens), a break glued to
what precedes it ("%\\n" is one token), a word at a new bullet (" Overtime"
written " O" + "vertime"). There the token index finds nothing for a few
steps after each such place, though the words go on copying the text.

This matches the reply's last characters in the conversation's text, with
every run of white space read as one space, and drafts the text that
follows the match, tokenized afresh. Where replies join the text's lines
(`joining`: learned from the matches themselves), a line break inside a
paragraph is copied as a space.

The template's own tokens (a role header, a turn's end: tokens with no
text of their own) stand in the text as a BARRIER that nothing matches
across and no copy goes past: a copy of the user's message stops where the
message ends, and never writes the next role's header into a reply.

A line the reply starts by quoting a sentence (a bullet: "- Scrap fell")
matches in fewer characters: the line's words, past its list marker, found
once in the text, where a line or a sentence starts. A word written at a
line's start is spelled with other tokens than where the text ran it on
(" Scrap", or " O" + "vertime"), so until then nothing else matches. Such
a match is reported as length 0: auto prices it on its own estimate.
"""

from __future__ import annotations

import bisect
import re
from typing import Protocol

TEXT_MATCH = 16  # characters of the reply's tail, white space aside, a text copy needs (some three words)
LONGEST_MATCH = 96  # characters a match is measured to
CHARS_PER_TOKEN = 4  # a match's length in tokens, roughly (auto prices a copy by it)
LINE_BREAK = re.compile(r"(?<=\S)\n(?=\S)")  # a break inside a paragraph
LINE_MATCH = 5  # characters of a line's words, past its marker, that match once where a sentence starts
LINE_START = re.compile(r"\s*(?:[-*+>]\s|\d{1,3}[.)]\s)?\s*[\"'“‘`]?")  # indent, list marker, opening quote
SENTENCE_END = ".!?:;"  # what ends a sentence, before a space
LONGEST_LINE = 200  # characters looked back for the line's start
HEADER = 4  # a line break this near a template token ends its role header
BARRIER = "\x00"  # where the template's tokens stand in the text (a NUL in a reply would only end a copy early)


class Spelling(Protocol):
    """What the drafters read of the target's tokenizer."""

    def respace(self, token: int) -> int | None:
        """The one token that reads as a space and this token's text, if one does."""

    def piece(self, token: int) -> str:
        """The token's text."""

    def tokenize(self, text: str) -> list[int]:
        """The text's tokens (no special ones)."""


class TextCopy:
    """The conversation's text, with white space read as one space, kept as
    the n-gram index grows."""

    def __init__(self, spelling: Spelling) -> None:
        self.spelling = spelling
        self.joining: bool | None = None  # whether replies join the text's lines (None: not seen yet)
        self.reset()

    def reset(self) -> None:
        self.raw: list[str] = []  # the text, a character an item
        self.flat: list[str] = []  # the text with white space runs as one space
        self.at: list[int] = []  # where each character of flat lies in raw
        self._flat = ""  # "".join(flat), kept until it grows
        self.joining = None

    def extend(self, tokens) -> None:
        raw, flat, at = self.raw, self.flat, self.at
        for t in tokens:
            for c in self.spelling.piece(t) or BARRIER:
                if c.isspace():
                    if flat and flat[-1] == " ":
                        raw.append(c)
                        continue
                    c_flat = " "
                else:
                    c_flat = c
                at.append(len(raw))
                raw.append(c)
                flat.append(c_flat)
        if len(self._flat) != len(flat):
            self._flat = ""

    def copy(self, k: int) -> tuple[int, list[int]] | None:
        """(the match's length in tokens, roughly; up to k tokens of the text
        after it) for the longest earlier place whose text ends as the
        conversation does, at least TEXT_MATCH characters, or else (length 0)
        for the one sentence that starts as the reply's line; None without one."""
        if not self._flat:
            self._flat = "".join(self.flat)
        text, end = self._flat, len(self.flat)
        if not end or text[-1] == " ":
            return None  # the reply broke off where the text goes on: a new line, a bullet
        found = None
        for size in range(TEXT_MATCH, min(LONGEST_MATCH, end - 1) + 1):
            p = text.rfind(text[end - size :], 0, end - 1)
            if p < 0:
                break
            found = (size, p)
        if found is not None:
            self._learn_joining(found[1], found[0])
            match = found[0] // CHARS_PER_TOKEN
        else:
            found, match = self._line_match(), 0
            if found is None:
                return None
        size, p = found
        start = self.at[p + size] if p + size < end else len(self.raw)
        if start >= len(self.raw):
            return None
        copied = "".join(self.raw[start : start + (k + 1) * CHARS_PER_TOKEN * 2])
        copied, barrier, _ = copied.partition(BARRIER)  # the copy ends where the template's tokens start
        if self.joining:
            copied = LINE_BREAK.sub(" ", self.raw[start - 1] + copied)[1:]  # the character before: a break first
        tokens = self.spelling.tokenize(copied)
        if not barrier and start + len(copied) < len(self.raw):
            tokens = tokens[:-1]  # the last may be cut short
        return match, tokens[:k]

    def _line_match(self) -> tuple[int, int] | None:
        """(size, place) of the words of the reply's current line, past its
        list marker: LINE_MATCH characters or more, found once in the text
        before the line, and there where a line or a sentence starts."""
        raw, text = self.raw, self._flat
        line = len(raw)
        while line > 0 and raw[line - 1] != "\n":
            line -= 1
            if len(raw) - line > LONGEST_LINE:
                return None
        if line == 0:
            return None
        first = bisect.bisect_left(self.at, line)  # the line's first character in flat
        marker = LINE_START.match(text, first)  # it matches everywhere, maybe nothing
        words = marker.end() if marker else first
        size = len(text) - words
        if size < LINE_MATCH or not text[words].isalnum():
            return None
        wanted = text[words:]
        p = text.find(wanted, 0, first)
        if p < 0 or not self._starts_sentence(p) or text.find(wanted, p + 1, first) >= 0:
            return None
        return size, p

    def _starts_sentence(self, p: int) -> bool:
        """Whether flat[p] starts a line or a sentence in the text."""
        i = self.at[p] - 1
        while i >= 0 and self.raw[i] in " \t":
            i -= 1
        return i < 0 or self.raw[i] == "\n" or (i < self.at[p] - 1 and self.raw[i] in SENTENCE_END)

    def untemplated(self, tokens) -> int:
        """How many of these tokens come before the first of the template's (a token with no text)."""
        return next((i for i, t in enumerate(tokens) if not self.spelling.piece(t)), len(tokens))

    def since_header(self, tokens, match: int) -> int:
        """How many of the last tokens follow the latest role header (a
        template token and the rest of its line: "assistant", a break) that a match
        of this many tokens reaches into: `match` where it reaches into none."""
        piece, end = self.spelling.piece, len(tokens)
        for t in range(end - 1, max(-1, end - match - HEADER - 1), -1):
            if not piece(tokens[t]):
                breaks = [p for p in range(t + 1, min(t + 1 + HEADER, end)) if "\n" in piece(tokens[p])]
                if breaks:
                    return end - breaks[0] - 1
                return end - t - 1 if t + HEADER < end else 0  # no break near it: the token alone is the header
        return match

    def has_word(self, tokens) -> bool:
        """Whether any of these tokens holds a letter or a digit."""
        return any(c.isalnum() for t in tokens for c in self.spelling.piece(t))

    def respell(self, tokens: list[int]) -> tuple[int, list[int]]:
        """(how many tokens are kept as they were, the tokens) with every
        line break inside a paragraph written as a space, tokenized afresh
        from the first token that holds one (the last may come out cut short)."""
        pieces = [self.spelling.piece(t) for t in tokens]
        for i, piece in enumerate(pieces):
            if "\n" in piece:
                before = pieces[i - 1][-1:] if i else ""
                joined = LINE_BREAK.sub(" ", before + "".join(pieces[i:]))[len(before) :]
                if joined == "".join(pieces[i:]):
                    return len(tokens), tokens
                return i, tokens[:i] + self.spelling.tokenize(joined)[: len(tokens) - i]
        return len(tokens), tokens

    def _learn_joining(self, p: int, size: int) -> None:
        """A match over a line break in the text: the reply joined it (it has
        fewer breaks there) or kept it."""
        end = len(self.flat)
        copied = "".join(self.raw[self.at[p] : self.at[p + size - 1] + 1]).strip()  # a break at an edge says nothing
        written = "".join(self.raw[self.at[end - size] :]).strip()
        breaks = copied.count("\n")
        if breaks:
            self.joining = written.count("\n") < breaks
