"""`Drafters`: one instance of each drafter, built by name on first use."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from specchat.costmodel import CostModel
from specchat.drafters import NAMES
from specchat.drafters.auto import AutoDrafter
from specchat.drafters.base import Drafter
from specchat.drafters.draft_model import DraftModelDrafter
from specchat.drafters.grammar import GrammarDrafter
from specchat.drafters.hybrid import HybridDrafter
from specchat.drafters.ngram import NgramDrafter
from specchat.errors import SpecchatError
from specchat.grammar import Constraint
from specchat.sampling import SamplingParams

if TYPE_CHECKING:
    from specchat.engine import TargetModel


class Drafters:
    """One instance of each drafter, built on first use."""

    def __init__(
        self,
        load_draft_model: Callable[[], TargetModel] | None,
        sampling: SamplingParams,
        costs: CostModel | None = None,
        draft_cost_prior: float = 0.5,
        constraint: Constraint | None = None,
    ) -> None:
        self.load_draft_model = load_draft_model
        self.constraint = constraint or Constraint()  # the reply's grammar, shared with the engine
        self.sampling = sampling
        self.costs = costs or CostModel()  # shared with the engine, for auto
        self.draft_cost_prior = draft_cost_prior
        self._made: dict[str, Drafter] = {}

    def get(self, name: str) -> Drafter:
        if name not in NAMES:
            raise SpecchatError(f"unknown drafter {name!r}", hint=f"choose one of: {', '.join(NAMES)}", code=2)
        if name not in self._made:
            self._made[name] = self._make(name)
        return self._made[name]

    def _make(self, name: str) -> Drafter:
        if name == "off":
            return Drafter()
        if name == "ngram":
            return NgramDrafter()
        if name == "grammar":
            return GrammarDrafter(self.constraint)
        if name == "auto":
            model = self.get("draft") if self.load_draft_model else None
            return AutoDrafter(self.get("ngram"), model, self.costs, self.draft_cost_prior, self.get("grammar"))
        if self.load_draft_model is None:
            raise SpecchatError(f"drafter {name!r} needs a draft model", hint="pass --draft GGUF or use a --pair")
        if name == "draft":
            return DraftModelDrafter(self.load_draft_model, self.sampling, self.constraint)
        return HybridDrafter(self.get("ngram"), self.get("draft"), self.get("grammar"))

    def close(self) -> None:
        for d in self._made.values():
            d.close()
        self._made.clear()
