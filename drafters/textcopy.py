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
"""

from __future__ import annotations

import re
from typing import Protocol

TEXT_MATCH = 16  # characters of the reply's tail, white space aside, a text copy needs (some three words)
LONGEST_MATCH = 96  # characters a match is measured to
CHARS_PER_TOKEN = 4  # a match's length in tokens, roughly (auto prices a copy by it)
LINE_BREAK = re.compile(r"(?<=\S)\n(?=\S)")  # a break inside a paragraph


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
            for c in self.spelling.piece(t):
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
        conversation does, at least TEXT_MATCH characters; None without one."""
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
        if found is None:
            return None
        size, p = found
        self._learn_joining(p, size)
        start = self.at[p + size] if p + size < end else len(self.raw)
        if start >= len(self.raw):
            return None
        copied = "".join(self.raw[start : start + (k + 1) * CHARS_PER_TOKEN * 2])
        if self.joining:
            copied = LINE_BREAK.sub(" ", self.raw[start - 1] + copied)[1:]  # the character before: a break first
        tokens = self.spelling.tokenize(copied)
        if start + len(copied) < len(self.raw):
            tokens = tokens[:-1]  # the last may be cut short
        return size // CHARS_PER_TOKEN, tokens[:k]

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
