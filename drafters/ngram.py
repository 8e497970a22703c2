"""Prompt-lookup drafting: propose what followed the same words last time.

An incremental index maps every n-gram (n_min..n_max) of the conversation to
where it occurred lately and how often. A proposal looks up the context's
suffix, longest n first, and copies the continuation of the sighting whose
match reaches furthest back (so a reply that copies a code block follows the
block, not the last place a common n-gram like "    return" appeared).

It drafts selectively: a short match is weak evidence, so it proposes
nothing (the round becomes a plain step); a long match, or one seen many
times, earns a long draft.

A continuation may run into the match itself: when the output loops (a
repeated line, a table row, one token over and over), the copy goes on
through the tokens it has just proposed, as llama.cpp's lookup does, so a
loop of period p still yields a draft of k tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from specchat.drafters.base import Draft, Drafter

MAX_EXTEND = 32  # how far back a match is measured beyond n_max
CANDIDATES = 4  # latest sightings kept per n-gram; the longest match wins


class NgramDrafter(Drafter):
    name = "ngram"

    def __init__(self, n_min: int = 2, n_max: int = 4, min_match: int = 3) -> None:
        super().__init__()
        self.n_min, self.n_max = n_min, n_max
        self.min_match = min_match  # weaker matches draft nothing
        self.tokens: list[int] = []  # what the index covers
        # n-gram -> (continuation starts of its latest sightings, oldest first; sightings)
        self.index: dict[tuple[int, ...], tuple[list[int], int]] = {}

    # --- the index -------------------------------------------------------

    def begin(self, context: Sequence[int]) -> None:
        n = len(self.tokens)
        if len(context) < n or list(context[:n]) != self.tokens:
            self.tokens, self.index = [], {}  # the conversation was edited
        self.catch_up(context)

    def observe(self, committed: Sequence[int]) -> None:
        self._extend_with(committed)

    def catch_up(self, context: Sequence[int]) -> None:
        """Index the tokens of `context` past those the index covers (it
        covers a prefix of the conversation: `begin` starts it again when
        the conversation was edited)."""
        self._extend_with(context[len(self.tokens) :])

    def _extend_with(self, new: Sequence[int]) -> None:
        toks, index = self.tokens, self.index
        for t in new:
            toks.append(t)
            end = len(toks) - 1  # t continues every n-gram that ends just before it
            for n in range(self.n_min, self.n_max + 1):
                if end - n < 0:
                    break
                key = tuple(toks[end - n : end])
                seen = index.get(key)
                if seen is None:
                    index[key] = ([end], 1)
                    continue
                starts, count = seen
                starts.append(end)
                if len(starts) > CANDIDATES:
                    del starts[0]
                index[key] = (starts, count + 1)

    # --- proposing -------------------------------------------------------

    def propose(self, context: Sequence[int], k: int, pending: Sequence[int] = ()) -> Draft:
        """Up to k tokens after `context` followed by `pending`: tokens another
        drafter (hybrid) proposed after the committed context, not committed
        yet (the index never holds them)."""
        self.catch_up(context)
        return self.draft_from(self.lookup([*context, *pending] if pending else context), k)

    def draft_from(self, found: tuple[int, int, int] | None, k: int) -> Draft:
        """The draft a lookup's result earns: up to k tokens, as its evidence allows."""
        if found is None:
            return Draft(source=self.name)
        start, match, seen = found
        return Draft(tokens=self.continuation(start, min(k, self.budget(match, seen))), source=self.name)

    def continuation(self, start: int, n: int) -> list[int]:
        """n tokens copied from `start` on; past the end of the conversation the
        copy continues through itself (a loop of period len(tokens) - start)."""
        out = list(self.tokens[start : start + n])
        period = len(self.tokens) - start
        while 0 < period and len(out) < n:
            out.append(out[-period])
        return out

    def lookup(self, context: Sequence[int]) -> tuple[int, int, int] | None:
        """(continuation start, match length, sightings) of the longest suffix match."""
        for n in range(min(self.n_max, len(context)), self.n_min - 1, -1):
            hit = self.index.get(tuple(context[len(context) - n :]))
            if hit is None:
                continue
            starts, seen = hit
            # The longest match; among equals the latest (max keeps the first).
            match, start = max(((self._match_length(context, s, n), s) for s in reversed(starts)), key=lambda m: m[0])
            return start, match, seen
        return None

    def _match_length(self, context: Sequence[int], start: int, n: int) -> int:
        """Extend a match of n tokens backwards, up to n + MAX_EXTEND."""
        i, j = start - n - 1, len(context) - n - 1
        while n < self.n_max + MAX_EXTEND and i >= 0 and j > i and context[j] == self.tokens[i]:
            n, i, j = n + 1, i - 1, j - 1
        return n

    def budget(self, match: int, seen: int) -> int:
        """How many tokens the evidence is worth: none below min_match, then
        growing with the match length and with repeated sightings."""
        if match < self.min_match:
            return 0
        return 2 * match + 2 * (seen - 1)
