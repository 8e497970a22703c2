"""Drafters: every source of draft tokens, behind one interface (see base.py).

This module holds the table of them (`SPECS`: one `DrafterSpec` per
drafter, with the k each runs at; the range of k is decoding/target.py's),
and imports nothing heavy: the command line reads them for its --help, and
the guide's drafter table is generated from them. `registry.Drafters` builds the drafters by name and keeps one of
each, so switching back and forth mid-conversation keeps the n-gram index
and the draft model's cache. Adding a drafter: its module, a row here, and
its case in `registry.Drafters._make`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from specchat.decoding.target import K_MAX

DEFAULT_K = 16  # copying drafters earn long drafts...
MODEL_K = 4  # ...a draft model (or an MTP head) pays for every token it drafts...
# ...and auto and the memory draft as far as the evidence goes: the memory
# as long as its match (a question asked again matches its whole answer),
# auto as long as its cost curve and the match's agreement say it pays.
LONG_K = K_MAX


class Name(StrEnum):
    """The drafters' names, one spelling each: code outside drafters/ asks
    `BY_NAME` what a drafter needs, or compares with these."""

    OFF = "off"
    NGRAM = "ngram"
    DRAFT = "draft"
    MTP = "mtp"
    HYBRID = "hybrid"
    GRAMMAR = "grammar"
    MEMORY = "memory"
    AUTO = "auto"


@dataclass(frozen=True)
class DrafterSpec:
    """One drafter, as everything outside drafters/ needs to know it."""

    name: str
    k: int  # the k it runs at unless told otherwise
    drafts: str  # what drafts, in a line: the guide's table
    reads_memory: bool = False  # drafts from the memory of stored replies
    needs_constraint: bool = False  # proposes only while a constraint (--json-schema, --grammar) is on
    # Loads the pair's draft model when chosen (auto loads it only where it could pay);
    # `head_stands_in`: in a pair without one, the target's MTP head drafts instead.
    uses_draft_model: bool = False
    head_stands_in: bool = False

    @property
    def drafts_tokens(self) -> bool:
        """False for off alone: its k means nothing."""
        return self.name != Name.OFF


SPECS = (
    DrafterSpec(Name.OFF, DEFAULT_K, "nothing: plain decoding"),
    DrafterSpec(
        Name.NGRAM,
        DEFAULT_K,
        "prompt lookup over the whole conversation, drafting only on strong evidence; it learns the edits a "
        "reply makes to what it copies (a renamed word, hard-wrapped lines joined) and writes them into its "
        "later copies, and where a reply spells the text with other tokens it copies the text itself",
    ),
    DrafterSpec(Name.DRAFT, MODEL_K, "the pair's draft model", uses_draft_model=True),
    DrafterSpec(
        Name.MTP,
        MODEL_K,
        "the MTP head the target ships (Qwen3.5, GLM-4.5, MiMo keep one in the checkpoint): no second model",
    ),
    DrafterSpec(
        Name.HYBRID,
        MODEL_K,
        "the n-gram match when it is strong, else the draft model (or the MTP head, in a pair without one); "
        "under a constraint, the grammar's forced tokens first",
        reads_memory=True,
        uses_draft_model=True,
        head_stands_in=True,
    ),
    DrafterSpec(
        Name.GRAMMAR,
        DEFAULT_K,
        "the text a JSON schema or grammar forces (only while a constraint is on)",
        needs_constraint=True,
    ),
    DrafterSpec(
        Name.MEMORY,
        LONG_K,
        "the conversation's copy or one from your earlier replies in the history (^r's replaced ones too), "
        "whichever match is longer; as long as the match",
        reads_memory=True,
    ),
    DrafterSpec(
        Name.AUTO,
        LONG_K,
        "each round, whichever of the above (plain step included) and whatever length pays best on the "
        "measured cost curve",
        reads_memory=True,
    ),
)
BY_NAME = {s.name: s for s in SPECS}
NAMES = tuple(BY_NAME)
NEEDS_CONSTRAINT = tuple(s.name for s in SPECS if s.needs_constraint)
READS_MEMORY = tuple(s.name for s in SPECS if s.reads_memory)
USES_DRAFT_MODEL = tuple(s.name for s in SPECS if s.uses_draft_model)


def default_k(drafter: str) -> int:
    """The k a drafter runs at unless told otherwise (an unknown name is
    refused where it is read, with its own line: here it gets DEFAULT_K)."""
    spec = BY_NAME.get(drafter)
    return spec.k if spec else DEFAULT_K


def k_defaults() -> str:
    """Each default k and the drafters that run at it, for --help: "64 for memory/auto, …"."""
    by_k: dict[int, list[str]] = {}
    for s in SPECS:
        if s.drafts_tokens:
            by_k.setdefault(s.k, []).append(s.name)
    return ", ".join(f"{k} for {'/'.join(names)}" for k, names in sorted(by_k.items(), reverse=True))


__all__ = [
    "BY_NAME",
    "DEFAULT_K",
    "LONG_K",
    "MODEL_K",
    "NAMES",
    "NEEDS_CONSTRAINT",
    "Name",
    "READS_MEMORY",
    "SPECS",
    "USES_DRAFT_MODEL",
    "DrafterSpec",
    "default_k",
    "k_defaults",
]
