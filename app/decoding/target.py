"""What specchat drives as a model: the one Protocol the engine, the session
and the drafters read (llama.py's `Model` has every member, and so does the
tests' numpy fake). It lives alone, below them all, so that the engine and
the drafters share it without importing each other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

# The most tokens a round may draft, and so the longest verify a model runs
# (K_MAX + 1 positions): --k, the settings, the chat's k keys and bench take
# k from this range, the driver keeps rows and snapshots for it, and the cost
# curve is measured up to it.
K_MIN, K_MAX = 1, 64


@runtime_checkable
class TargetModel(Protocol):
    """A model as specchat drives it: llama.py's Model, or a test fake. The
    engine decodes with the first part; the session builds prompts with the
    second and reports the third; the draft model has the same shape."""

    # --- decoding: the engine, kvcache.sync, the cost curve, the draft model drafter
    tokens: list[int]  # what the KV cache holds, in order
    n_ctx: int

    def eval(self, tokens: Sequence[int], n_logits: int = 1) -> None: ...
    def argmax_only(self, on: bool) -> None: ...  # while on, only argmax() is read
    def logits(self, j: int) -> np.ndarray: ...
    def argmax(self, j: int) -> int: ...
    def truncate(self, n: int) -> None: ...
    def is_eog(self, t: int) -> bool: ...
    def piece(self, t: int) -> bytes: ...
    def detokenize(self, tokens: Sequence[int]) -> str: ...

    # --- the prompt: ChatSession
    n_vocab: int  # every token id is below it (the memory's token cache checks the ids it kept)

    def tokenize(self, text: str, special: bool = True) -> list[int]: ...
    def apply_template(self, messages: list[dict]) -> str: ...

    # --- where it runs and what it costs: the reports, the chat's pacing, the warm-up steps
    @property
    def device(self) -> dict | None: ...  # llamacpp.placement's backend, device, layers; None where unknown (a fake)
    @property
    def n_threads(self) -> int | None: ...  # threads llama.cpp decodes with; None where none are llama.cpp's
    @property
    def cpu_bound(self) -> bool: ...  # decoding keeps every core busy
    @property
    def llama_seconds(self) -> float | None: ...  # seconds inside llama.cpp's calls so far; None: not llama.cpp
    @property
    def can_roll_back(self) -> bool: ...  # a verify's rejected tokens can be taken back (False: plain decoding only)
    @property
    def max_draft(self) -> int: ...  # the longest draft whose rejected tokens it takes back in one step
    @property
    def cost_key(self) -> str | None: ...  # what its cost curve depends on (keptcurve.saved_curve); None: keep none

    def close(self) -> None: ...


@runtime_checkable
class DraftingModel(Protocol):
    """What the draft model drafter drives: a draft model (a TargetModel),
    or a target's MTP head (llamacpp/mtp.py's MtpHead)."""

    tokens: list[int]
    n_ctx: int

    def eval(self, tokens: Sequence[int], n_logits: int = 1) -> None: ...
    def argmax_only(self, on: bool) -> None: ...
    def logits(self, j: int) -> np.ndarray: ...
    def argmax(self, j: int) -> int: ...
    def truncate(self, n: int) -> None: ...
    def is_eog(self, t: int) -> bool: ...
    def close(self) -> None: ...
    @property
    def llama_seconds(self) -> float | None: ...  # seconds inside llama.cpp's calls so far


@runtime_checkable
class MtpHeadModel(DraftingModel, Protocol):
    """A target's MTP head: `follow` feeds committed tokens with the target's
    hidden states; `eval` chains tokens that are not committed."""

    followed: int  # the first rows of `tokens`, fed by follow()

    def follow(self, tokens: Sequence[int]) -> None: ...
