"""Prompt-lookup drafting: propose what followed the same words last time.

An incremental index maps every n-gram (n_min..n_max) of the conversation to
where it occurred lately and how often. A proposal looks up the context's
suffixes and copies the continuation of the sighting whose match reaches
furthest back (so a reply that copies a code block follows the block, not
the last place a common n-gram like "    return" appeared).

It drafts selectively: a short match is weak evidence, so it proposes
nothing (the round becomes a plain step); a long match, or one seen many
times, earns a long draft.

A continuation may run into the match itself: when the output loops (a
repeated line, a table row, one token over and over), the copy goes on
through the tokens it has just proposed, as llama.cpp's lookup does, so a
loop of period p still yields a draft of k tokens.

It learns the edits a reply makes to the text it copies. When a match,
followed backwards, stops at a token where the reply parts from the text it
copies and RESYNC tokens further back the two agree again, what lies
between is an edit: a few tokens of the text replaced by a few others (a
renamed word, a changed type). From then on a match reads through the edit,
and a copy writes it wherever the text it copies has the old tokens, so a
reply that renames a word throughout a file drafts past every later
occurrence instead of being rejected there. An edit that a reply then
declines (the text kept the old word at that place) is dropped, and never
learned again in this conversation.

Given the tokenizer's `respace` (a token -> the one token that reads as a
space and it), it also learns that a reply joins the lines of the text it
copies: once a reply has written " word" where the text broke the line
before "word", every copy writes a line break followed by a word as the
space and the word, whatever the word (a quote of a hard-wrapped report, a
commit message or an e-mail reflowed as one paragraph).

Given the tokenizer, a match never reaches back into a role header (a
template token, one with no text, and the rest of its line): what stands
before a reply's first tokens is the template and the end of the user's
message, which say nothing of how this reply goes on. So a reply never
starts by copying how the last one started because both follow the same
header.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specchat.drafters.base import Draft, Drafter
from specchat.drafters.textcopy import Spelling, TextCopy

MAX_EXTEND = 32  # how far back a match is measured beyond n_max
CANDIDATES = 4  # latest sightings kept per n-gram; the longest match wins
EDIT_SPAN = 3  # an edit replaces at most this many tokens by at most this many
RESYNC = 3  # tokens that agree on each side of an edit before it is learned
MAX_EDITS = 32  # edits kept per conversation; the oldest goes first


class NgramDrafter(Drafter):
    name = "ngram"

    def __init__(
        self,
        n_min: int = 2,
        n_max: int = 4,
        min_match: int = 3,
        learn_edits: bool = True,
        respace: Callable[[int], int | None] | None = None,
        spelling: Spelling | None = None,
    ) -> None:
        super().__init__()
        self.n_min, self.n_max = n_min, n_max
        self.min_match = min_match  # weaker matches draft nothing
        self.learn_edits = learn_edits
        # token -> the one token reading as a space and it, or None (from the tokenizer)
        self.respace = respace or (spelling.respace if spelling is not None else None)
        self.text = TextCopy(spelling) if spelling is not None else None  # where tokens part and words go on
        self.joins: int | None = None  # the line break a reply joins lines over, once one has
        self.tokens: list[int] = []  # what the index covers
        # n-gram -> (continuation starts of its latest sightings, oldest first; sightings)
        self.index: dict[tuple[int, ...], tuple[list[int], int]] = {}
        self.edits: dict[tuple[int, ...], tuple[int, ...]] = {}  # tokens of the copied text -> what replaced them
        self.declined: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()  # edits a reply declined
        self._looked_at = 0  # where the latest lookup's context ended: where its continuation goes
        # The latest match's length before an edit learned at that lookup lengthened it (None: none did)
        self.before_edit: int | None = None
        # The latest continuation that wrote an edit: (its position, its tokens, offset -> the edit written there)
        self._written: tuple[int, list[int], dict[int, tuple[int, ...]]] | None = None

    # --- the index -------------------------------------------------------

    def begin(self, context: Sequence[int]) -> None:
        n = len(self.tokens)
        if len(context) < n or list(context[:n]) != self.tokens:
            self.tokens, self.index, self.edits, self.joins = [], {}, {}, None  # the conversation was edited
            self.declined = set()
            if self.text is not None:
                self.text.reset()
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
            if self._written is not None:
                self._check_written(len(toks), t)
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
        if self.text is not None:
            self.text.extend(new)

    # --- proposing -------------------------------------------------------

    def propose(self, context: Sequence[int], k: int, pending: Sequence[int] = ()) -> Draft:
        """Up to k tokens after `context` followed by `pending`: tokens another
        drafter (hybrid) proposed after the committed context, not committed
        yet (the index never holds them)."""
        self.catch_up(context)
        draft = self.draft_from(self.lookup([*context, *pending] if pending else context), k)
        if not draft.tokens and not pending:
            copied = self.text_copy(context, k)
            if copied is not None:
                match, tokens = copied
                draft.tokens = tokens[: self.budget(match, 1)]
        return draft

    def text_copy(self, context: Sequence[int], k: int) -> tuple[int, list[int]] | None:
        """(match length, up to k tokens) copied from the conversation's text
        where its tokens part (textcopy); None without a tokenizer or a match."""
        if self.text is None:
            return None
        self.catch_up(context)
        copied = self.text.copy(k)
        if self.text.joining and self.joins is None:  # the copies of tokens join lines too
            newline = self.text.spelling.tokenize("\n")
            self.joins = newline[0] if len(newline) == 1 else None
        return copied

    def draft_from(self, found: tuple[int, int, int] | None, k: int) -> Draft:
        """The draft a lookup's result earns: up to k tokens, as its evidence allows."""
        if found is None:
            return Draft(source=self.name)
        start, match, seen = found
        return Draft(tokens=self.continuation(start, min(k, self.budget(match, seen))), source=self.name)

    def continuation(self, start: int, n: int) -> list[int]:
        """n tokens copied from `start` on, with the learned edits written in;
        past the end of the conversation the copy continues through itself: a
        loop whose period is the copy as written (an edit that removes more
        than it inserts makes it shorter than len(tokens) - start). With a
        tokenizer, it stops before the template's first token (textcopy's
        BARRIER): a copy of the user's message never runs into the next role."""
        toks, p = self.tokens, start
        out: list[int] = []
        written: dict[int, tuple[int, ...]] = {}  # offset in the copy -> the edit that wrote it
        while p < len(toks) and len(out) < n:
            edit = self._edit_at(p)
            if edit is None:
                out.append(toks[p])
                p += 1
                continue
            removed, inserted = edit
            new = len(inserted) - _common_tail(removed, inserted)
            written.update((len(out) + o, removed) for o in range(new))
            out.extend(inserted)
            p += len(removed)
        period = len(out) if p >= len(toks) else 0  # the copy reached the end: it loops
        del out[n:]
        while 0 < period and len(out) < n:
            out.append(out[-period])
        if self.text is not None:  # a copy ends where the template's tokens start: a turn's end, a role header
            del out[self.text.untemplated(out) :]
            written = {o: edit for o, edit in written.items() if o < len(out)}
        if self.text is not None and self.text.joining:  # a break glued to a word ("%\n") is joined too
            kept, out = self.text.respell(out)
            written = {o: edit for o, edit in written.items() if o < kept}
        self._written = (self._looked_at, out, written) if written else None
        return out

    def _edit_at(self, p: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """(old tokens, new ones) of the learned edit whose old tokens start
        at tokens[p], unless the text there reads as the edit already (an
        insertion made before); else a line joined there, where replies join them."""
        toks = self.tokens
        for removed, inserted in self.edits.items():
            if removed[0] != toks[p] or tuple(toks[p : p + len(removed)]) != removed:
                continue
            grows = len(inserted) - len(removed)
            if 0 < grows <= p and inserted[grows:] == removed and tuple(toks[p - grows : p]) == inserted[:grows]:
                continue
            return removed, inserted
        if toks[p] == self.joins and p + 1 < len(toks) and self.respace is not None:
            joined = self.respace(toks[p + 1])
            if joined is not None:
                return (toks[p], toks[p + 1]), (joined,)
        return None

    def _check_written(self, pos: int, token: int) -> None:
        """The conversation's token at `pos` is `token`. Where the latest
        continuation that wrote an edit parts from the conversation, an edit
        it wrote there was wrong, and is dropped."""
        assert self._written is not None
        at, drafted, written = self._written
        offset = pos - at
        if 0 <= offset < len(drafted) and token == drafted[offset]:
            return
        if offset in written:
            removed = written[offset]
            inserted = self.edits.pop(removed, None)
            if inserted is not None:
                self.declined.add((removed, inserted))
            elif removed[0] == self.joins:
                self.joins = None  # the reply kept this line break
                if self.text is not None:
                    self.text.joining = False
        self._written = None

    def lookup(self, context: Sequence[int]) -> tuple[int, int, int] | None:
        """(continuation start, match length, sightings) of the longest match
        among the latest sightings of each suffix n-gram (ties: the longer
        n-gram, then the later sighting). An edit where such a match stops
        is learned, and may lengthen it at once; `before_edit` then keeps
        its length without the edit, for an edit seen once is a guess (a
        reply that drops a word of the question it restates, then goes its
        own way). A match is cut where a role header ends; one shorter
        than n_min there is none."""
        self._looked_at = len(context)
        self.before_edit = None
        found = self._sightings(context)
        if not found:
            return None
        (match, _, _), start, seen = best = max(found, key=lambda f: f[0][0])  # max keeps the first
        if self.learn_edits and match >= RESYNC:
            for (m, i, j), _, _ in found:
                if m == match and 0 <= i < j and context[j] != self.tokens[i] and self._learn_edit(context, i, j):
                    straight = match
                    (match, _, _), start, seen = max(self._sightings(context), key=lambda f: f[0][0], default=best)
                    self.before_edit = straight if match > straight else None
                    break
        written = self.text.since_header(context, match) if self.text is not None else match
        if written < self.n_min:
            self.before_edit = None
            return None
        match = min(match, written)
        if self.before_edit is not None and self.before_edit >= match:
            self.before_edit = None  # what the edit lengthened lay in the header: it counts for nothing
        return start, match, seen

    def _sightings(self, context: Sequence[int]) -> list[tuple[tuple[int, int, int], int, int]]:
        """((match, i, j) as _extend gives it, start, sightings) of the latest
        sightings of each suffix n-gram, the longer n-grams' first, later sightings first."""
        found = []
        for n in range(min(self.n_max, len(context)), self.n_min - 1, -1):
            hit = self.index.get(tuple(context[len(context) - n :]))
            if hit is not None:
                starts, seen = hit
                found += [(self._extend(context, start, n), start, seen) for start in reversed(starts)]
        return found

    def _extend(self, context: Sequence[int], start: int, n: int) -> tuple[int, int, int]:
        """Follow a match of n tokens backwards, through the learned edits, to
        n_max + MAX_EXTEND tokens: (its length, where it stopped in tokens, and in context)."""
        toks = self.tokens
        i, j = start - n - 1, len(context) - n - 1
        while n < self.n_max + MAX_EXTEND and 0 <= i < j:
            if context[j] == toks[i]:
                n, i, j = n + 1, i - 1, j - 1
                continue
            edit = self._edit_behind(context, i, j)
            if edit is None:
                break
            n, i, j = n + edit[1], i - edit[0], j - edit[1]
        return n, i, j

    def _edit_behind(self, context: Sequence[int], i: int, j: int) -> tuple[int, int] | None:
        """How many old tokens and how many new ones a learned edit (or a
        joined line) spans where tokens[i] and context[j] disagree: the old
        ones end there in tokens, the new ones in context (an insertion: both
        end at the token after, which it goes before)."""
        toks = self.tokens
        for removed, inserted in self.edits.items():
            kept = _common_tail(removed, inserted)
            a, b = len(removed) - kept, len(inserted) - kept
            if (
                i - a + 1 >= 0
                and tuple(toks[i - a + 1 : i + kept + 1]) == removed
                and tuple(context[j - b + 1 : j + kept + 1]) == inserted
            ):
                return a, b
        if self.joins is not None and i >= 1 and toks[i - 1] == self.joins and self.respace is not None:
            if self.respace(toks[i]) == context[j]:
                return 2, 1  # a line break and a word, joined as the spaced word
        return None

    def _learn_edit(self, context: Sequence[int], i: int, j: int) -> bool:
        """tokens[i] and context[j] disagree, and the tokens after them agree:
        where RESYNC tokens agree again at most EDIT_SPAN tokens further back
        on each side, what lies between is an edit, learned (the smallest first)."""
        toks = self.tokens
        for size in range(1, 2 * EDIT_SPAN + 1):
            for a in range(max(0, size - EDIT_SPAN), min(size, EDIT_SPAN) + 1):
                b = size - a
                if i - a - RESYNC + 1 < 0 or j - b <= i - a:
                    continue
                if tuple(toks[i - a - RESYNC + 1 : i - a + 1]) != tuple(context[j - b - RESYNC + 1 : j - b + 1]):
                    continue
                removed, inserted = tuple(toks[i - a + 1 : i + 1]), tuple(context[j - b + 1 : j + 1])
                if len(removed) == 2 and len(inserted) == 1 and self.respace is not None:
                    if self.respace(removed[1]) == inserted[0]:
                        self.joins = removed[0]  # a line joined: every line break followed by a word, from now on
                        if self.text is not None:
                            self.text.joining = True
                        return True
                if self.text is not None and not self.text.has_word(removed + inserted):
                    return False  # punctuation and layout (a bullet at a sentence end) are no renaming
                if not removed:  # an insertion: it goes before the token after it
                    removed, inserted = (toks[i + 1],), (*inserted, toks[i + 1])
                if (removed, inserted) in self.declined:
                    return False
                self.edits.pop(removed, None)
                self.edits[removed] = inserted
                if len(self.edits) > MAX_EDITS:
                    del self.edits[next(iter(self.edits))]
                return True
        return False

    def budget(self, match: int, seen: int) -> int:
        """How many tokens the evidence is worth: none below min_match, then
        growing with the match length and with repeated sightings."""
        if match < self.min_match:
            return 0
        return 2 * match + 2 * (seen - 1)


def _common_tail(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many tokens a and b end alike."""
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n
