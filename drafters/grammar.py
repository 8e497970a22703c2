"""The grammar drafter: while a constraint is on, propose the tokens it forces.

A JSON schema forces keys, quotes, colons, commas and braces, and the rest
of an enum value once its first letters are out: whatever the model thinks,
those tokens come next. Each round proposes the run the grammar forces from
the committed state (see llamacpp/grammar.py: the forced text, tokenized once), up
to k tokens, ending where the grammar allows a choice. The target verifies
them like any draft, so the output is what constrained plain decoding gives.
With nothing forced (or no constraint) the round is a plain step.
"""

from __future__ import annotations

from collections.abc import Sequence

from specchat.decoding.constraint import Constraint
from specchat.drafters.base import Draft, Drafter


class GrammarDrafter(Drafter):
    name = "grammar"

    def __init__(self, constraint: Constraint) -> None:
        super().__init__()
        self.constraint = constraint

    def propose(self, context: Sequence[int], k: int) -> Draft:
        return Draft(tokens=self.constraint.forced(k), source=self.name)
