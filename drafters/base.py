"""The drafter interface: one shape for every source of draft tokens.

A drafter proposes up to k tokens that might follow the committed context.
The engine verifies them on the target; the drafter never decides what is
output. Hooks default to no-ops, so a drafter implements only what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np


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
