"""A deterministic numpy model behind the driver's interface.

Its logits at a position depend on the two tokens before it, through a fixed
random table. It keeps a real "KV cache" (the list of evaluated tokens) and
checks that the engine evaluates only right after it, so the engine's
bookkeeping is tested, not just its output.
"""

from __future__ import annotations

import numpy as np

EOS = 0


class FakeModel:
    def __init__(self, n_vocab: int = 24, seed: int = 0, n_ctx: int = 4096, sharpness: float = 3.0):
        rng = np.random.default_rng(seed)
        self.n_vocab = n_vocab
        self.n_ctx = n_ctx
        self.table = rng.normal(0.0, sharpness, size=(n_vocab, n_vocab, n_vocab)).astype(np.float32)
        self.table[:, :, EOS] -= 2.0  # EOS is possible but not common
        self.tokens: list[int] = []  # the KV cache
        self._rows: list[np.ndarray] = []
        self.eval_calls = 0

    def row(self, context: list[int]) -> np.ndarray:
        a = context[-2] if len(context) > 1 else 1
        b = context[-1]
        return self.table[a, b]

    def eval(self, tokens: list[int], n_logits: int) -> None:
        assert len(self.tokens) + len(tokens) <= self.n_ctx, "decoded past n_ctx"
        self.eval_calls += 1
        self.tokens += list(tokens)
        n = len(self.tokens)
        self._rows = [self.row(self.tokens[: n - n_logits + 1 + j]) for j in range(n_logits)]

    def logits(self, j: int) -> np.ndarray:
        return self._rows[j]

    def argmax(self, j: int) -> int:
        return int(np.argmax(self._rows[j]))

    def truncate(self, n: int) -> None:
        del self.tokens[n:]

    def is_eog(self, t: int) -> bool:
        return t == EOS

    def piece(self, t: int) -> bytes:
        return b"" if t == EOS else f"<{t}>".encode()

    def detokenize(self, tokens) -> str:
        return b"".join(self.piece(t) for t in tokens).decode()
