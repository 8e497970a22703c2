"""Drafting from memory: copy what this user's replies said before.

`MemoryIndex` holds the token sequences of stored replies (each behind the
tail of the prompt that asked for it), keyed by who they belong to (a
conversation's id), in a ring of `CAPACITY` tokens: the memory's bound.
When it is full the oldest tokens are overwritten. Its index is a hash
chain, as LZ77 compressors keep one: a fixed table maps the hash of every
KEY_N tokens to the latest place they occurred, and each place links to
the previous one with the same hash. So the index costs a fixed 8 bytes a
slot plus 16 bytes a stored token (about 40 MB when full), however many
replies it holds, and adding a reply is a few numpy passes over it.

Forgetting a conversation (`forget`) overwrites its tokens with a
separator: what is left links only hashes to places, no text, and those
places never match again.

`Memory` is the index with a tokenizer and a queue: texts and token runs
may be offered from any thread (a background fill from the history, the
chat after a turn); the drafting thread takes them in at `begin`, before a
turn's clock starts.

`MemoryDrafter` (name "memory") drafts the best evidence of the current
conversation (the n-gram drafter) and of the memory: the longer match wins.
A memory draft is as long as its evidence is strong: none below MIN_MATCH
matched tokens, then ALPHA tokens per matched token (SuffixDecoding's
max_spec = α·match_length), and only as far as every sighting nearly as
long as the best agrees (two stored replies that part ways leave the draft
at the parting).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from specchat.drafters.base import Draft, Drafter, MemoryPart, NgramPart

CAPACITY = 1 << 21  # tokens the memory holds at most (2,097,152); the oldest are overwritten
TABLE_BITS = 20  # hash table slots: 2**20
KEY_N = 4  # tokens hashed per key: the shortest match the memory can find
MIN_MATCH = 6  # a shorter match drafts nothing
MAX_MATCH = 64  # how far back a match is measured
CHAIN = 16  # sightings examined per lookup, newest first
ALPHA = 1.0  # tokens drafted per matched token
PROMPT_TAIL = 48  # prompt tokens stored before each reply: a question asked again matches from its start
SEP = -1  # between replies and over forgotten ones: never equal to a token
EVERYONE = object()  # what `Memory.clear` forgets

_MIX = np.uint64(0x9E3779B97F4A7C15)


def _hashes(tokens: np.ndarray) -> np.ndarray:
    """The table slot of every KEY_N tokens of `tokens` (index i: tokens[i:i+KEY_N])."""
    t = tokens.astype(np.uint64)
    h = np.zeros(len(tokens) - KEY_N + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(KEY_N):
            h = (h ^ t[j : len(t) - KEY_N + 1 + j]) * _MIX
    return (h >> np.uint64(64 - TABLE_BITS)).astype(np.int64)


class MemoryIndex:
    """Stored token runs and their hash-chain index; see the module docstring."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self.head = np.full(1 << TABLE_BITS, -1, dtype=np.int64)  # hash -> latest place
        self.tokens = np.full(min(capacity, 1 << 16), SEP, dtype=np.int64)  # grows up to capacity
        self.prev = np.full(len(self.tokens), -1, dtype=np.int64)  # place -> previous place, same hash
        self.end = 0  # places written so far (a place p lives in slot p % capacity)
        self.runs: dict[object, list[tuple[int, int]]] = {}  # owner -> its runs [start, stop)
        self.order: deque[tuple[int, object]] = deque()  # (stop, owner) of every run, oldest first

    @property
    def held(self) -> int:
        """Tokens held: the runs still inside the ring."""
        low = self.end - self.capacity
        return sum(max(0, b - max(a, low)) for runs in self.runs.values() for a, b in runs)

    def add(self, tokens: Sequence[int], owner: object = None) -> None:
        """Store one run (a prompt's tail and its reply) for `owner`."""
        n = len(tokens)
        if n < KEY_N + 1 or n + 1 > self.capacity:
            return
        self._grow(self.end + n + 1)
        start = self.end
        places = np.arange(start, start + n + 1)
        slots = places % self.capacity
        self.tokens[slots] = np.append(np.asarray(tokens, dtype=np.int64), SEP)
        self.end += n + 1
        # Each key tokens[i:i+KEY_N] points at the place after it (what to copy).
        keys, after = _hashes(np.asarray(tokens, dtype=np.int64)), places[KEY_N : n + 1]
        order = np.argsort(keys, kind="stable")
        k_sorted, p_sorted = keys[order], after[order]
        first = np.ones(len(k_sorted), dtype=bool)
        first[1:] = k_sorted[1:] != k_sorted[:-1]
        chained = np.empty_like(p_sorted)
        chained[1:] = p_sorted[:-1]
        chained[first] = self.head[k_sorted[first]]
        self.prev[p_sorted % self.capacity] = chained
        last = np.ones(len(k_sorted), dtype=bool)
        last[:-1] = k_sorted[1:] != k_sorted[:-1]
        self.head[k_sorted[last]] = p_sorted[last]
        self.runs.setdefault(owner, []).append((start, start + n))
        self.order.append((start + n, owner))
        self._drop_overwritten()

    def _grow(self, need: int) -> None:
        size = len(self.tokens)
        if size >= self.capacity or need <= size:
            return
        new = min(self.capacity, max(need, 2 * size))
        self.tokens = np.concatenate([self.tokens, np.full(new - size, SEP, dtype=np.int64)])
        self.prev = np.concatenate([self.prev, np.full(new - size, -1, dtype=np.int64)])

    def _drop_overwritten(self) -> None:
        """Forget the record of runs the ring has overwritten whole."""
        low = self.end - self.capacity
        while self.order and self.order[0][0] <= low:
            stop, owner = self.order.popleft()
            runs = self.runs.get(owner, [])
            if runs and runs[0][1] == stop:  # not forgotten meanwhile
                del runs[0]
                if not runs:
                    del self.runs[owner]

    def forget(self, owner: object) -> None:
        """Overwrite every run of `owner` still held: it never matches again."""
        low = self.end - self.capacity
        for a, b in self.runs.pop(owner, []):
            places = np.arange(max(a, low), b)
            self.tokens[places % self.capacity] = SEP

    def clear(self) -> None:
        self.__init__(self.capacity)  # type: ignore[misc]

    # --- looking up ------------------------------------------------------------------

    def sightings(self, context: Sequence[int]) -> list[tuple[int, int]]:
        """(match length, place after the match) of the latest sightings of the
        context's last KEY_N tokens, newest first."""
        if len(context) < KEY_N or self.end == 0:
            return []
        tail = np.asarray(context[-MAX_MATCH:], dtype=np.int64)[::-1]  # the context backwards
        place = int(self.head[_hashes(tail[KEY_N - 1 :: -1])[0]])
        low, cap = self.end - self.capacity, self.capacity
        found: list[tuple[int, int]] = []
        for _ in range(CHAIN):
            if place - KEY_N < max(low, 0):
                break
            match = self._match(tail, place)
            if match >= KEY_N and self.tokens[place % cap] != SEP:
                found.append((match, place))
            place = int(self.prev[place % cap])
        return found

    def _match(self, backwards: np.ndarray, place: int) -> int:
        """How many tokens before `place` equal the context's last ones (0 for a hash collision)."""
        n = min(len(backwards), place - max(self.end - self.capacity, 0))
        stored = self.tokens[np.arange(place - 1, place - 1 - n, -1) % self.capacity]
        differ = np.flatnonzero(stored != backwards[:n])
        return int(differ[0]) if len(differ) else n

    def continuation(self, place: int, n: int) -> list[int]:
        """Up to n stored tokens from `place` on, ending where its run ends."""
        stop = min(place + n, self.end)
        out = self.tokens[np.arange(place, stop) % self.capacity].tolist()
        return out[: out.index(SEP)] if SEP in out else out

    def candidate(self, context: Sequence[int], k: int) -> tuple[int, list[int]] | None:
        """(match length, up to k tokens) of the longest match (of those, the
        newest whose run goes on longest), cut where a sighting at least half
        as long continues otherwise; None where there is none."""
        seen = [(m, p, self.continuation(p, k)) for m, p in self.sightings(context)]
        if not seen:
            return None
        best_match, best_place, tokens = max(seen, key=lambda s: (s[0], len(s[2])))
        for match, place, other in seen:
            if place != best_place and 2 * match >= best_match:
                parting = next((i for i, (a, b) in enumerate(zip(tokens, other)) if a != b), None)
                tokens = tokens if parting is None else tokens[:parting]
        return best_match, tokens


class Memory:
    """The index, filled from any thread: offered runs wait in a queue until
    the drafting thread takes them in (`absorb`), so a lookup never meets a
    half-added run; `tokenize` turns offered texts into tokens."""

    def __init__(self, tokenize: Callable[[str], list[int]], capacity: int = CAPACITY) -> None:
        self.index = MemoryIndex(capacity)
        self.tokenize = tokenize
        self._queue: list[tuple[str, object, Sequence[int]]] = []
        self._lock = threading.Lock()
        self.on = True  # off: nothing is offered, nothing drafted (the chat's setting)
        self.held = 0  # tokens the index held when it last took runs in (readable from any thread)
        self._forgotten: list[object] = []  # owners forgotten so far, in order (EVERYONE: a clear)

    def ticket(self) -> int:
        """Take one before reading replies from the history: an offer made
        with it is dropped where its owner was forgotten since (a fill on its
        thread never brings back a conversation deleted meanwhile)."""
        with self._lock:
            return len(self._forgotten)

    def cleared_since(self, ticket: int | None) -> bool:
        """The memory was emptied since `ticket` was taken (a fill with it can stop)."""
        with self._lock:
            return ticket is not None and EVERYONE in self._forgotten[ticket:]

    def offer(self, tokens: Sequence[int], owner: object = None, ticket: int | None = None) -> None:
        """A run to store (a prompt's tail and its reply), taken in at the next turn."""
        with self._lock:
            since = self._forgotten[ticket:] if ticket is not None else []
            if self.on and owner not in since and EVERYONE not in since:
                self._queue.append(("add", owner, list(tokens)))

    def offer_text(self, prompt: Sequence[int], reply: str, owner: object = None, ticket: int | None = None) -> None:
        """A stored reply: its text is tokenized here, in the caller's thread."""
        self.offer([*prompt[-PROMPT_TAIL:], *self.tokenize(reply)], owner, ticket)

    def forget(self, owner: object) -> None:
        """Drop every run of `owner`, those still queued included."""
        with self._lock:
            self._queue = [q for q in self._queue if q[1] != owner]
            self._queue.append(("forget", owner, ()))
            self._forgotten.append(owner)

    def set_on(self, on: bool) -> None:
        """Draft from it, or not (the chat's setting); off empties it."""
        self.on = on
        if not on:
            self.clear()

    def clear(self) -> None:
        with self._lock:
            self._queue = [("clear", None, ())]
            self._forgotten.append(EVERYONE)

    def absorb(self) -> None:
        """Take in what was offered (the drafting thread, between rounds)."""
        with self._lock:
            queue, self._queue = self._queue, []
        for op, owner, tokens in queue:
            if op == "add":
                self.index.add(tokens, owner)
            elif op == "forget":
                self.index.forget(owner)
            else:
                self.index.clear()
        if queue:
            self.held = self.index.held

    def candidate(self, context: Sequence[int], k: int) -> tuple[int, list[int]] | None:
        return self.index.candidate(context, k) if self.on else None


def budget(match: int) -> int:
    """How many tokens a memory match is worth drafting."""
    return 0 if match < MIN_MATCH else int(ALPHA * match)


def stronger_copy(
    ngram: NgramPart, memory: MemoryPart | None, context: Sequence[int], k: int, pending: Sequence[int] = ()
) -> Draft:
    """The conversation's copy or the memory's, whichever match is longer
    (the memory's only where it is long enough to draft). `pending`: tokens
    another drafter proposed after the committed context (see NgramPart)."""
    ngram.catch_up(context)
    seen = [*context, *pending] if pending else context
    found = memory.candidate(seen, k) if memory is not None else None
    mine = ngram.lookup(seen)
    if found is not None and budget(found[0]) and (mine is None or found[0] > mine[1]):
        return Draft(found[1][: budget(found[0])], source=MemoryDrafter.name)
    return ngram.draft_from(mine, k)


class MemoryDrafter(Drafter):
    """The conversation's n-gram match or the memory's, whichever is longer."""

    name = "memory"

    def __init__(self, ngram: NgramPart, memory: Memory) -> None:
        super().__init__()
        self.ngram, self.memory = ngram, memory

    def begin(self, context: Sequence[int]) -> None:
        self.memory.absorb()
        self.ngram.begin(context)

    def observe(self, committed: Sequence[int]) -> None:
        self.ngram.observe(committed)

    def propose(self, context: Sequence[int], k: int) -> Draft:
        return stronger_copy(self.ngram, self.memory, context, k)

    def settle(self, draft: Draft, n_accepted: int) -> None:
        super().settle(draft, n_accepted)
        if draft.source != self.name:
            self.ngram.settle(draft, n_accepted)
