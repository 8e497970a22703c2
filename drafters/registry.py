"""`Drafters`: one instance of each drafter, built by name on first use."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from specchat.decoding.constraint import Constraint
from specchat.decoding.costmodel import CostModel
from specchat.decoding.sampling import SamplingParams
from specchat.drafters import NAMES
from specchat.drafters.auto import AutoDrafter
from specchat.drafters.base import Drafter
from specchat.drafters.draft_model import DraftModelDrafter
from specchat.drafters.grammar import GrammarDrafter
from specchat.drafters.hybrid import HybridDrafter
from specchat.drafters.memory import Memory, MemoryDrafter
from specchat.drafters.mtp import MtpDrafter
from specchat.drafters.ngram import NgramDrafter
from specchat.drafters.textcopy import Spelling
from specchat.errors import SpecchatError

if TYPE_CHECKING:
    from specchat.decoding.target import DraftingModel, MtpHeadModel, TargetModel

D = TypeVar("D", bound=Drafter)


class Drafters:
    """One instance of each drafter, built on first use."""

    def __init__(
        self,
        load_draft_model: Callable[[], TargetModel] | None,
        sampling: SamplingParams,
        costs: CostModel | None = None,
        draft_cost_prior: float = 0.5,
        constraint: Constraint | None = None,
        memory: Memory | None = None,
        load_mtp_head: Callable[[], MtpHeadModel] | None = None,
        spelling: Spelling | None = None,
    ) -> None:
        self.load_draft_model = load_draft_model
        self.load_mtp_head = load_mtp_head  # where the target ships an MTP draft head
        self.constraint = constraint or Constraint()  # the reply's grammar, shared with the engine
        self.sampling = sampling
        self.costs = costs or CostModel()  # shared with the engine, for auto
        self.draft_cost_prior = draft_cost_prior
        self.memory = memory or Memory(tokenize=lambda text: [])  # this user's earlier replies
        self.spelling = spelling  # the target's tokenizer, for the n-gram drafter's joined lines and text copies
        self._made: dict[str, Drafter] = {}

    def get(self, name: str) -> Drafter:
        if name not in NAMES:
            raise SpecchatError(f"unknown drafter {name!r}", hint=f"choose one of: {', '.join(NAMES)}", code=2)
        if name not in self._made:
            self._made[name] = self._make(name)
        return self._made[name]

    def draft_model(self) -> DraftModelDrafter:
        """The draft model's drafter (a SpecchatError where there is no draft model)."""
        return self._get("draft", DraftModelDrafter)

    @property
    def draft_model_loaded(self) -> bool:
        made = self._made.get("draft")
        return isinstance(made, DraftModelDrafter) and made.loaded

    def loaded_models(self) -> list[DraftingModel]:
        """The draft model and the MTP head, as far as they have loaded."""
        made = (self._made.get(name) for name in ("draft", "mtp"))
        return [d.model for d in made if isinstance(d, DraftModelDrafter) and d.loaded]

    def model_part(self) -> DraftModelDrafter | None:
        """What hybrid and auto draft with beside the copies: the draft model,
        else the target's MTP head, else nothing."""
        if self.load_draft_model is not None:
            return self.draft_model()
        return self._get("mtp", MtpDrafter) if self.load_mtp_head is not None else None

    def _ngram(self) -> NgramDrafter:
        return self._get("ngram", NgramDrafter)

    def _grammar(self) -> GrammarDrafter:
        return self._get("grammar", GrammarDrafter)

    def _get(self, name: str, kind: type[D]) -> D:
        drafter = self.get(name)
        assert isinstance(drafter, kind)  # _make builds each name's own class
        return drafter

    def _make(self, name: str) -> Drafter:
        if name == "off":
            return Drafter()
        if name == "ngram":
            return NgramDrafter(spelling=self.spelling)
        if name == "grammar":
            return GrammarDrafter(self.constraint)
        if name == "memory":
            return MemoryDrafter(self._ngram(), self.memory)
        if name == "auto":
            model = self.model_part()
            return AutoDrafter(self._ngram(), model, self.costs, self.draft_cost_prior, self._grammar(), self.memory)
        if name == "mtp":
            if self.load_mtp_head is None:
                raise SpecchatError(
                    "drafter 'mtp' needs a target that ships an MTP draft head",
                    hint="models scan names the models that do (Qwen3.5, GLM-4.5, MiMo); use another drafter here",
                )
            return MtpDrafter(self.load_mtp_head, self.sampling, self.constraint)
        if name == "draft":
            if self.load_draft_model is None:
                raise SpecchatError("drafter 'draft' needs a draft model", hint="pass --draft GGUF or use a --pair")
            return DraftModelDrafter(self.load_draft_model, self.sampling, self.constraint)
        if name != "hybrid":  # a row in SPECS without its case here
            raise NotImplementedError(f"drafter {name!r} is in drafters.SPECS but Drafters._make cannot build it")
        part = self.model_part()
        if part is None:
            raise SpecchatError(
                "drafter 'hybrid' needs a draft model or a target that ships an MTP head",
                hint="pass --draft GGUF or use a --pair",
            )
        return HybridDrafter(self._ngram(), part, self._grammar(), self.memory)

    def close(self) -> None:
        for d in self._made.values():
            d.close()
        self._made.clear()
