"""Constrained decoding: a grammar the reply must match, and the tokens it forces.

A constraint is a GBNF grammar (`--grammar FILE.gbnf`) or a JSON schema
(`--json-schema FILE`, turned into GBNF by llama-cpp-python's converter and
laid out the way `json.dumps` writes JSON: one line, ", " and ": "). It is
bound to a model's vocabulary through llama.cpp's grammar sampler
(`llama_sampler_init_grammar`), which masks the tokens whose text the
grammar cannot take next.

`Constraint` is the reply's grammar state, shared by the engine and the
drafters. The engine moves it through committed tokens only (a rejected
draft never touches it) and masks the target's logits with it at every
verified position, so plain and speculative decoding choose from the same
tokens. Drafters read it: the grammar drafter proposes the text it forces.

This module imports nothing from llama.cpp: the grammar itself is bound by
`specchat.llamacpp.grammar` (or a test's fake) and reaches the constraint
through the two Protocols below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from specchat.decoding.schema import GrammarSpec, check_reply


class GrammarState(Protocol):
    """Where a reply stands in its grammar: what the engine and the drafters ask of it."""

    def clone(self) -> GrammarState: ...
    def accept(self, t: int) -> None: ...
    def allowed(self, ids: np.ndarray) -> np.ndarray: ...  # which of the token ids it takes next
    def mask(self, logits: np.ndarray) -> np.ndarray: ...
    def argmax(self, logits: np.ndarray) -> int: ...
    def forced_text(self) -> tuple[bytes, bool]: ...


class BoundGrammar(Protocol):
    """A grammar bound to the target's vocabulary (llamacpp.grammar.Grammar)."""

    spec: GrammarSpec
    eos: int

    def start(self) -> GrammarState: ...
    def tokens_of(self, text: bytes) -> list[int]: ...
    def close(self) -> None: ...


# --- the reply's constraint, shared by the engine and the drafters -------------------


class Constraint:
    """The grammar state of the reply being generated (None: unconstrained).

    The engine calls `begin` at the start of a reply and `commit` with the
    tokens it commits; drafters call `forced`. The state follows committed
    tokens only."""

    def __init__(self) -> None:
        self.grammar: BoundGrammar | None = None
        self.state: GrammarState | None = None
        self._ahead = b""  # forced text ahead of the state, from the last probe
        self._ahead_ends = False
        self._probed = False  # _ahead is the forced text from the current state

    @property
    def on(self) -> bool:
        return self.grammar is not None

    @property
    def label(self) -> str:
        return self.grammar.spec.label if self.grammar is not None else ""

    def check(self, text: str) -> str | None:
        """Why a finished reply does not match the constraint's schema (None if it does)."""
        return check_reply(self.grammar.spec, text) if self.grammar is not None else None

    def set(self, grammar: BoundGrammar | None) -> None:
        """Constrain the next replies with `grammar` (None: no constraint)."""
        if self.grammar is not None and self.grammar is not grammar:
            self.grammar.close()
        self.grammar, self.state = grammar, None

    def begin(self) -> None:
        self.state = self.grammar.start() if self.grammar is not None else None
        self._ahead, self._ahead_ends = b"", False
        self._probed = False

    # --- the engine's side ---

    def argmax(self, logits: np.ndarray) -> int:
        assert self.state is not None  # the engine asks only while on, after begin
        return self.state.argmax(logits)

    def mask(self, logits: np.ndarray) -> np.ndarray:
        assert self.state is not None  # the engine asks only while on, after begin
        return self.state.mask(logits)

    def commit(self, t: int, piece: bytes, eog: bool) -> None:
        """Token t (its text `piece`) joined the reply."""
        if self.state is None or eog:
            return
        self.state.accept(t)
        if self._probed and self._ahead.startswith(piece) and len(piece) < len(self._ahead):
            self._ahead = self._ahead[len(piece) :]  # still inside the forced run: no new probe
        else:
            self._probed = False

    # --- the drafters' side ---

    def state_after(self, pending: Sequence[int]) -> GrammarState | None:
        """A copy of the state moved past `pending` (proposed, not committed:
        tokens the grammar allows, such as forced ones)."""
        if self.state is None:
            return None
        g = self.state.clone()
        for t in pending:
            g.accept(t)
        return g

    @property
    def ends(self) -> bool:
        """The last forced run ends the reply (only the end is allowed after it)."""
        return self._probed and self._ahead_ends

    def forced(self, k: int) -> list[int]:
        """Up to k tokens of the text the grammar forces from the current state
        (and the end of the reply, where that is all it allows)."""
        if self.state is None or k <= 0:
            return []
        assert self.grammar is not None  # a state comes from the grammar's start
        if not self._probed:
            self._ahead, self._ahead_ends = self.state.forced_text()
            self._probed = True
        tokens = self.grammar.tokens_of(self._ahead)
        if self._ahead_ends:
            tokens = tokens + [self.grammar.eos]
        return tokens[:k]
