"""A deterministic numpy model behind the driver's interface (target.TargetModel).

Its logits at a position depend on the two tokens before it, through a fixed
random table. It keeps a real "KV cache" (the list of evaluated tokens) and
checks that the engine evaluates only right after it, so the engine's
bookkeeping is tested, not just its output.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from specchat.decoding.target import K_MAX

EOS = 0
WORDS = [
    " the",
    " cat",
    " sat",
    " on",
    " a",
    " mat",
    " and",
    " then",
    " it",
    " ran",
    " to",
    " see",
    " dog",
    " who",
    " was",
    " very",
    " big",
    ".",
    "\n",
    " code",
    " def",
    " x",
    " y",
    " z",
]


class FakeModel:
    def __init__(
        self, n_vocab: int = 24, seed: int = 0, n_ctx: int = 4096, sharpness: float = 3.0, step_seconds: float = 0.0
    ):
        rng = np.random.default_rng(seed)
        self.n_vocab = n_vocab
        self.n_ctx = n_ctx
        self.table = rng.normal(0.0, sharpness, size=(n_vocab, n_vocab, n_vocab)).astype(np.float32)
        self.table[:, :, EOS] -= 2.0  # EOS is possible but not common
        self.tokens: list[int] = []  # the KV cache
        self._rows: list[np.ndarray] = []
        self.eval_calls = 0
        self.step_seconds = step_seconds  # sleep per eval, to make generation observable
        self.tokens_only = False  # as llama.Model: while on, logits() is refused
        # What llama.Model reports of where it runs and what it costs: nothing here is llama.cpp's.
        self.device: dict | None = None
        self.n_threads: int | None = None
        self.cpu_bound = False
        self.llama_seconds: float | None = None
        self.cost_key: str | None = None  # no cost curve is saved for a fake
        self.can_roll_back = True  # its cache is a list: it rolls back anywhere
        self.max_draft = K_MAX  # the longest draft it takes back in one step: any

    def argmax_only(self, on: bool) -> None:
        self.tokens_only = on

    def row(self, context: list[int]) -> np.ndarray:
        a = context[-2] if len(context) > 1 else 1
        b = context[-1]
        return self.table[a, b]

    def eval(self, tokens: Sequence[int], n_logits: int = 1) -> None:
        assert len(self.tokens) + len(tokens) <= self.n_ctx, "decoded past n_ctx"
        self.eval_calls += 1
        if self.step_seconds:
            time.sleep(self.step_seconds)
        self.tokens += list(tokens)
        n = len(self.tokens)
        self._rows = [self.row(self.tokens[: n - n_logits + 1 + j]) for j in range(n_logits)]

    def logits(self, j: int) -> np.ndarray:
        assert not self.tokens_only, "logits() after argmax_only(True)"
        return self._rows[j]

    def argmax(self, j: int) -> int:
        return int(np.argmax(self._rows[j]))

    def truncate(self, n: int) -> None:
        del self.tokens[n:]

    def is_eog(self, t: int) -> bool:
        return t == EOS

    def piece(self, t: int) -> bytes:
        if t == EOS:
            return b""
        return (WORDS[t] if t < len(WORDS) else f" w{t}").encode()

    # --- chat surface, so a ChatSession can run on the fake -----------------

    def apply_template(self, messages: list[dict]) -> str:
        return "".join(f"[{m['role']}]{m['content']}" for m in messages) + "[assistant]"

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return [1 + (ord(c) % (self.n_vocab - 1)) for c in text]  # never EOS

    def detokenize(self, tokens) -> str:
        return b"".join(self.piece(t) for t in tokens).decode()

    def close(self) -> None:
        """Nothing to free."""


class LoopingModel(FakeModel):
    """Greedy output that goes round a cycle of `period` tokens for ever: a
    repeated line, or (period 1) one token over and over."""

    def __init__(self, period: int, **kw):
        super().__init__(**kw)
        self.cycle = list(range(3, 3 + period))

    def row(self, context: list[int]) -> np.ndarray:
        last = context[-1]
        i = self.cycle.index(last) + 1 if last in self.cycle else 0
        out = np.zeros(self.n_vocab, dtype=np.float32)
        out[self.cycle[i % len(self.cycle)]] = 10.0
        return out
