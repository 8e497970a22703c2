"""Drafters: every source of draft tokens, behind one interface (see base.py).

This module holds their names and the limits on k, and imports nothing heavy:
the command line reads them for its --help. `registry.Drafters` builds the
drafters by name and keeps one of each, so switching back and forth
mid-conversation keeps the n-gram index and the draft model's cache.
"""

from __future__ import annotations

NAMES = ("off", "ngram", "draft", "mtp", "hybrid", "grammar", "memory", "auto")
# Drafters that propose only while a constraint (--json-schema, --grammar) is on.
NEEDS_CONSTRAINT = ("grammar",)
# Drafters that draft from the memory of stored replies (the others never read it).
READS_MEMORY = ("memory", "hybrid", "auto")
# The most tokens a drafter may propose per round: --k, the settings, the
# chat's k keys and bench all take k from this range.
K_MIN, K_MAX = 1, 64
DEFAULT_K = 16  # copying drafters earn long drafts...
MODEL_K = 4  # ...a draft model (or an MTP head) pays for every token it drafts...
# ...and auto and the memory draft as far as the evidence goes: the memory
# as long as its match (a question asked again matches its whole answer),
# auto as long as its cost curve and the match's agreement say it pays.
LONG_K = K_MAX


def default_k(drafter: str) -> int:
    """The k a drafter runs at unless told otherwise."""
    if drafter in ("draft", "mtp", "hybrid"):
        return MODEL_K
    return LONG_K if drafter in ("auto", "memory") else DEFAULT_K


__all__ = ["DEFAULT_K", "K_MAX", "K_MIN", "LONG_K", "MODEL_K", "NAMES", "NEEDS_CONSTRAINT", "READS_MEMORY", "default_k"]
