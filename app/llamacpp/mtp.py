"""A target's own MTP (NextN) draft head, driven through llama.cpp.

Some checkpoints ship layers trained to predict the token after next from
the trunk's hidden state (Qwen3.5, GLM-4.5, MiMo, DeepSeek V3). llama.cpp
loads them with `llama_model_params.load_mtp` and runs them in a context of
their own (`LLAMA_CONTEXT_TYPE_MTP`) with a KV cache of just those layers.

The head's row at position p reads the token at p and the target's hidden
state at p - 1 (the trunk's output there, before its final norm); its output
predicts the token at p + 1 and carries a hidden state of its own. So:

- `HiddenStates` keeps the target's hidden state at every position it has
  decoded (llama.cpp hands back one row per batch token);
- `MtpHead.follow` feeds committed tokens, paired with those states;
- `MtpHead.eval` feeds tokens that are not committed (a draft, or another
  drafter's proposal), each paired with the head's own state from the row
  before: the head then drafts on from its own guesses.

The drafter that uses it is drafters/mtp.py.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence

import llama_cpp as C
import numpy as np
from llama_cpp import llama_cpp_ext as X

from specchat.errors import SpecchatError
from specchat.llamacpp.batch import fill


class HiddenStates:
    """The target's hidden state at each position it decoded, for the head."""

    def __init__(self, ctx, n_embd: int, n_ctx: int) -> None:
        self.ctx, self.n_embd, self.n_ctx = ctx, n_embd, n_ctx
        self.rows = np.zeros((0, n_embd), dtype=np.float32)  # grows as the conversation does
        X.llama_set_embeddings_nextn(ctx, True, False)  # every batch token's row, not only the logits rows

    @classmethod
    def attach(cls, model, ctx, n_ctx: int) -> HiddenStates | None:
        """Keep them where the model ships an MTP head (None elsewhere)."""
        if C.llama_model_n_layer_nextn(model) <= 0:
            return None
        return cls(ctx, C.llama_model_n_embd(model), n_ctx)

    def keep(self, pos0: int, n: int) -> None:
        """Copy the rows of the decode that just ran (positions pos0 .. pos0 + n - 1)."""
        ptr = X.llama_get_embeddings_nextn(self.ctx)
        if not ptr:
            raise SpecchatError("llama.cpp returned no hidden states for the MTP head", hint="use another drafter")
        end = pos0 + n
        if end > len(self.rows):
            grown = np.zeros((min(self.n_ctx, max(end, 2 * len(self.rows))), self.n_embd), dtype=np.float32)
            grown[: len(self.rows)] = self.rows
            self.rows = grown
        self.rows[pos0:end] = np.ctypeslib.as_array(ptr, shape=(n, self.n_embd))


def mtp_head(target) -> MtpHead:
    """The MTP draft head a loaded target (llama.py's Model) ships, in a context of its own."""
    if target.hidden is None:
        raise SpecchatError(f"{target.path.name} ships no MTP draft head", hint="use another drafter")
    return MtpHead(target.model, target.hidden, n_ctx=target.n_ctx, n_batch=target.n_batch, n_threads=target.n_threads)


class MtpHead:
    """The MTP layers of a loaded target, in their own context, one sequence.

    `tokens` is what the head's cache holds; its first `followed` rows were
    fed from the target's hidden states, the rest chained from the head's own."""

    def __init__(self, model, hidden: HiddenStates, *, n_ctx: int, n_batch: int, n_threads: int) -> None:
        self.hidden = hidden
        cp = C.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = cp.n_ubatch = n_batch
        cp.n_threads = cp.n_threads_batch = n_threads
        cp.ctx_type = C.LLAMA_CONTEXT_TYPE_MTP
        cp.n_rs_seq = 0  # the head's layers are attention layers: a KV cache rolls back anywhere
        self.ctx = C.llama_init_from_model(model, cp)
        if not self.ctx:
            raise SpecchatError(
                "llama.cpp could not open a context for the model's MTP head", hint="use another drafter"
            )
        # The head's own state at every row, indexed by batch position (its
        # graph hands back all rows, so the masked layout would misplace them).
        X.llama_set_embeddings_nextn(self.ctx, True, False)
        self.vocab = C.llama_model_get_vocab(model)
        self.n_vocab = C.llama_vocab_n_tokens(self.vocab)
        self.n_embd, self.n_ctx, self.n_batch = hidden.n_embd, C.llama_n_ctx(self.ctx), n_batch
        self.mem = C.llama_get_memory(self.ctx)
        self.batch = C.llama_batch_init(n_batch, self.n_embd, 1)  # rows carry a token and an embedding
        self._tokens = (C.llama_token * n_batch)()
        self.batch.token = ctypes.cast(self._tokens, ctypes.POINTER(C.llama_token))
        self._embd = np.ctypeslib.as_array(self.batch.embd, shape=(n_batch, self.n_embd))
        self.tokens: list[int] = []
        self.followed = 0
        self.llama_seconds = 0.0
        self._out: list[int] = []  # batch indices of the last decode's output rows

    # --- feeding --------------------------------------------------------------

    def follow(self, tokens: Sequence[int]) -> None:
        """Feed committed tokens after the head's followed rows, paired with
        the target's hidden states; keep the last row's output."""
        if len(self.tokens) != self.followed:
            raise RuntimeError("follow() after chained rows: truncate() to `followed` first")
        pos0 = len(self.tokens)
        if pos0 + len(tokens) - 1 > len(self.hidden.rows):
            raise RuntimeError("the target has not decoded the positions these rows read")
        prev = np.zeros((len(tokens), self.n_embd), dtype=np.float32)
        first = 1 if pos0 == 0 else 0  # the first position reads no state: zeros
        prev[first:] = self.hidden.rows[pos0 - 1 + first : pos0 - 1 + len(tokens)]
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            self._decode(chunk, prev[start : start + len(chunk)])
        self.followed = len(self.tokens)

    def eval(self, tokens: Sequence[int], n_logits: int = 1) -> None:
        """Feed tokens that are not committed, one decode each: every row reads
        the head's own state from the row before. Keeps the last row's output."""
        for t in tokens:
            if not self._out:
                raise RuntimeError("eval() needs the output of a row before it")
            self._decode([t], self._out_hidden()[None, :])

    def _decode(self, tokens: Sequence[int], states: np.ndarray) -> None:
        if len(self.tokens) + len(tokens) > self.n_ctx:
            raise SpecchatError("the conversation is longer than the context", hint="raise --ctx or start a new chat")
        fill(self.batch, tokens, len(self.tokens), logits_from=len(tokens) - 1)
        self._embd[: len(tokens)] = states
        t0 = time.perf_counter()
        rc = C.llama_decode(self.ctx, self.batch)
        self.llama_seconds += time.perf_counter() - t0
        if rc != 0:
            raise SpecchatError(f"the MTP head's llama_decode failed ({rc})", hint="use another drafter")
        self.tokens.extend(tokens)
        self._out = [len(tokens) - 1]

    # --- reading ---------------------------------------------------------------

    def logits(self, j: int) -> np.ndarray:
        ptr = C.llama_get_logits_ith(self.ctx, self._out[j])
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def argmax(self, j: int) -> int:
        return int(np.argmax(self.logits(j)))

    def argmax_only(self, on: bool) -> None:
        """The host takes the argmax here either way (the head is small)."""

    def _out_hidden(self) -> np.ndarray:
        ptr = X.llama_get_embeddings_nextn_ith(self.ctx, self._out[-1])
        if not ptr:
            raise SpecchatError("llama.cpp returned no state from the MTP head", hint="use another drafter")
        return np.ctypeslib.as_array(ptr, shape=(self.n_embd,)).copy()

    def is_eog(self, t: int) -> bool:
        return bool(C.llama_vocab_is_eog(self.vocab, t))

    # --- rolling back and freeing ----------------------------------------------

    def truncate(self, n: int) -> None:
        if n >= len(self.tokens):
            return
        C.llama_memory_seq_rm(self.mem, 0, n, -1)
        del self.tokens[n:]
        self.followed = min(self.followed, n)
        self._out = []

    def close(self) -> None:
        if getattr(self, "ctx", None):
            self.batch.token = ctypes.POINTER(C.llama_token)()  # ours, not the batch's to free
            C.llama_batch_free(self.batch)
            C.llama_free(self.ctx)
            self.ctx = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
