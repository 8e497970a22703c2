"""The drafter interface: one shape for every source of draft tokens, and
what one drafter may ask of another.

A drafter proposes up to k tokens that might follow the committed context.
The engine verifies them on the target; the drafter never decides what is
output. Hooks default to no-ops, so a drafter implements only what it needs.

Hybrid and auto draft through the other drafters (registry.Drafters builds
one of each and shares it): `NgramPart`, `DraftModelPart`, `GrammarPart` and
`MemoryPart` name all they may ask of the n-gram, draft model and grammar
drafters and of the memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from specchat.decoding.constraint import Constraint


@dataclass
class Draft:
    """A proposal. `q` holds one probability row per token when sampling
    (None means the drafter is deterministic: q is one-hot; a None row, one
    token proposed with certainty)."""

    tokens: list[int] = field(default_factory=list)
    q: list[np.ndarray | None] | None = None
    source: str = ""  # which drafter produced it (hybrid and auto name the inner one)
    forced: int = 0  # leading tokens the grammar forced, where `source` drafted the rest (hybrid)

    def __len__(self) -> int:
        return len(self.tokens)


class Drafter:
    """Base class. Subclasses set `name` and override `propose`."""

    name = "off"
    choice = ""  # what the drafter decided for its latest round, where it decides (auto)
    chosen: dict[str, int] | None = None  # how often each choice won this turn, where it decides (auto)
    needs_costs = False  # True: the engine calibrates its cost curve before the drafter's first turn (auto)

    def __init__(self) -> None:
        self.drafted = 0  # tokens proposed, over the drafter's life
        self.accepted = 0  # of those, accepted by the target

    def begin(self, context: Sequence[int]) -> None:
        """A new turn starts, or the drafter was just switched in."""

    def propose(self, context: Sequence[int], k: int) -> Draft:
        return Draft(source=self.name)

    def settle(self, draft: Draft, n_accepted: int) -> None:
        """The target accepted the first n_accepted tokens of `draft`."""
        self.drafted += len(draft)
        self.accepted += n_accepted

    def observe(self, committed: Sequence[int]) -> None:
        """These tokens were just appended to the conversation."""

    def close(self) -> None:
        """Free what the drafter holds (a model context, say)."""


# --- what hybrid and auto ask of the drafters they draft through -------------------------


@runtime_checkable
class NgramPart(Protocol):
    """The n-gram drafter (ngram.py): hybrid drafts with it, auto prices its copies."""

    name: str
    before_edit: int | None  # the latest match's length without an edit its lookup learned

    def begin(self, context: Sequence[int]) -> None: ...
    def observe(self, committed: Sequence[int]) -> None: ...
    def settle(self, draft: Draft, n_accepted: int) -> None: ...
    def propose(self, context: Sequence[int], k: int, pending: Sequence[int] = ()) -> Draft: ...
    def catch_up(self, context: Sequence[int]) -> None: ...  # index what the conversation added
    def lookup(self, context: Sequence[int]) -> tuple[int, int, int] | None: ...  # (start, match, sightings)
    def continuation(self, start: int, n: int) -> list[int]: ...
    def draft_from(self, found: tuple[int, int, int] | None, k: int) -> Draft: ...  # what a lookup earns
    def text_copy(self, context: Sequence[int], k: int) -> tuple[int, list[int]] | None: ...  # (match, tokens)


@runtime_checkable
class DraftModelPart(Protocol):
    """The draft model drafter (draft_model.py): hybrid drafts with it, auto
    prices its drafts and its catch-up, and loads it only where it could pay."""

    name: str
    seconds_per_token: float | None  # drafting time of its last proposal; None before one

    @property
    def loaded(self) -> bool: ...
    def begin(self, context: Sequence[int]) -> None: ...  # loads the model and prefills it
    def observe(self, committed: Sequence[int]) -> None: ...
    def settle(self, draft: Draft, n_accepted: int) -> None: ...
    def propose(self, context: Sequence[int], k: int, pending: Sequence[int] = ()) -> Draft: ...
    def catch_up_cost(self, context: Sequence[int]) -> float: ...  # seconds to feed what it has not seen
    def close(self) -> None: ...


@runtime_checkable
class GrammarPart(Protocol):
    """The grammar drafter (grammar.py): the run the constraint forces, which
    hybrid continues after and auto prices like a copy."""

    name: str
    constraint: Constraint  # hybrid: a forced run that ends the grammar is the whole draft

    def settle(self, draft: Draft, n_accepted: int) -> None: ...
    def propose(self, context: Sequence[int], k: int) -> Draft: ...


@runtime_checkable
class MemoryPart(Protocol):
    """The memory (memory.py): what this user's earlier replies said; hybrid
    drafts from it, auto prices its copies."""

    def absorb(self) -> None: ...  # take in the replies offered since the last turn
    def candidate(self, context: Sequence[int], k: int) -> tuple[int, list[int]] | None: ...  # (match, tokens)
