"""A thin driver over llama-cpp-python's low-level API.

`Model` is one llama.cpp model in one context with one sequence. It keeps
the list of tokens its KV cache holds, evaluates new tokens right after them
in one `llama_decode` (chunked by n_batch), exposes the logits rows it asked
for as zero-copy numpy views, and rolls back with `llama_memory_seq_rm`.
The rest of specchat uses only the surface `target.TargetModel` names.

Greedy decoding reads only each row's argmax. Callers say so
(`argmax_only`), and where the output layer runs on a GPU llama.cpp then
takes the argmax inside its compute graph (its backend sampling): one token
per row comes back instead of a 152k-float row copied to the host and
scanned there.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import llama_cpp as C
import numpy as np

from specchat.decoding.target import K_MAX
from specchat.errors import SpecchatError
from specchat.llamacpp.batch import fill
from specchat.llamacpp.kernels import Kernels, build_id
from specchat.llamacpp.kernels import choose as choose_kernels
from specchat.llamacpp.mtp import HiddenStates
from specchat.llamacpp.placement import argmax_where, placement

if TYPE_CHECKING:
    from specchat.llamacpp.template import ChatTemplate

_log_lines: list[str] = []  # llama.cpp's chatter, kept for --verbose and errors
_load_log: list[str] | None = None  # every line while a model loads (it says where the layers went)
_verbose = False
MAX_ROWS = K_MAX + 1  # rows one decode may keep while the argmax runs in the graph: a verify's
# Snapshots of a recurrent model's state that llama.cpp keeps per sequence, so
# a verify of up to 32 drafted tokens can roll its rejected tokens back (each
# is a copy of the whole state: a recurrent model drafts at most that far).
RS_SNAPSHOTS = 33


@C.llama_log_callback
def _log(level: int, text: bytes, user_data) -> None:
    line = text.decode("utf-8", errors="replace")
    if _verbose:
        sys.stderr.write(line)
    _log_lines.append(line)
    del _log_lines[:-200]
    if _load_log is not None:
        _load_log.append(line)


C.llama_log_set(_log, ctypes.c_void_p(0))
C.llama_backend_init()


def recent_log() -> list[str]:
    """llama.cpp's last log lines (a grammar that does not parse says why there)."""
    return list(_log_lines)


def set_verbose(on: bool) -> None:
    global _verbose
    _verbose = on


def physical_cores() -> int:
    """Physical cores, not hyperthreads (the useful thread count for decode)."""
    try:
        cores = set()
        with open("/proc/cpuinfo") as f:
            phys = core = None
            for line in f:
                if line.startswith("physical id"):
                    phys = line.split(":")[1].strip()
                elif line.startswith("core id"):
                    core = line.split(":")[1].strip()
                    cores.add((phys, core))
        if cores:
            return len(cores)
    except OSError:
        pass
    return max(1, (os.cpu_count() or 2) // 2)


class Model:
    """One model, one context, one sequence."""

    def __init__(
        self,
        path: str | Path,
        *,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_gpu_layers: int = -1,
        n_batch: int = 512,
        kernels: Kernels | None = None,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise SpecchatError(f"no model file at {self.path}", hint="check the path or run `specchat pull`")
        # The CPU's extra buffer types (repacked weights, AMX): off where they crash.
        self.kernels = kernels or choose_kernels(self.path, n_gpu_layers)
        mp = C.llama_model_default_params()
        mp.n_gpu_layers = 999 if n_gpu_layers < 0 else n_gpu_layers
        mp.use_extra_bufts = self.kernels.extra_bufts
        mp.load_mtp = True  # a shipped MTP draft head (the mtp drafter); a model without one loads as before
        global _load_log
        load_log: list[str] = []
        _load_log = load_log
        try:
            self.model = C.llama_model_load_from_file(str(self.path).encode(), mp)
        finally:
            _load_log = None
        if not self.model:
            tail = "".join(_log_lines[-5:]).strip().splitlines()
            reason = tail[-1] if tail else "llama.cpp could not read it"
            raise SpecchatError(f"cannot load {self.path.name}: {reason}", hint="is it a complete GGUF file?")
        self.device = placement(load_log, C.llama_model_n_layer(self.model) + 1)
        self.device["extra_bufts"] = self.kernels.extra_bufts
        self.device["extra_bufts_why"] = self.kernels.why
        self.vocab = C.llama_model_get_vocab(self.model)
        self.n_vocab = C.llama_vocab_n_tokens(self.vocab)
        self._row = ctypes.c_float * self.n_vocab  # one logits row; a view costs 3 µs, as_array 8
        trained = C.llama_model_n_ctx_train(self.model)
        cp = C.llama_context_default_params()
        cp.n_ctx = n_ctx or min(8192, trained)
        cp.n_batch = cp.n_ubatch = n_batch
        threads = n_threads or physical_cores()
        cp.n_threads = cp.n_threads_batch = threads
        cp.n_outputs_max_per_seq = MAX_ROWS  # read only once a greedy sampler is attached
        # A recurrent or hybrid model (Mamba, Qwen3.5, LFM2, Granite hybrids) keeps a
        # state, not a cache of every position: llama.cpp rolls it back only from
        # snapshots of the last decode's tokens, where its architecture keeps them.
        self.recurrent = bool(C.llama_model_is_recurrent(self.model) or C.llama_model_is_hybrid(self.model))
        cp.n_rs_seq = RS_SNAPSHOTS if self.recurrent else 0
        self.ctx = C.llama_init_from_model(self.model, cp)
        if not self.ctx:
            C.llama_model_free(self.model)
            raise SpecchatError(f"cannot create a context of {cp.n_ctx} tokens", hint="try a smaller --ctx")
        self.n_ctx = C.llama_n_ctx(self.ctx)
        self.n_batch = C.llama_n_batch(self.ctx)
        self.rs_snapshots = C.llama_n_rs_seq(self.ctx) if self.recurrent else 0  # 0 where the arch keeps none
        self.max_draft = max(0, self.rs_snapshots - 1) if self.recurrent else K_MAX  # the longest draft it rolls back
        self._last_fed = 0  # tokens in the last decode (a recurrent state rolls back within them)
        self._rolled_back = False  # a recurrent rollback is single-use until the next decode
        self.n_threads = threads
        # Decoding keeps every core busy: llama.cpp runs on the CPU with a thread per core.
        self.cpu_bound = not self.device["gpu_layers"] and threads >= physical_cores()
        self.mem = C.llama_get_memory(self.ctx)
        self.hidden = HiddenStates.attach(self.model, self.ctx, self.n_ctx)  # what an MTP head reads; None: no head
        self.batch = C.llama_batch_init(self.n_batch, 0, 1)
        self.tokens: list[int] = []  # what the KV cache holds, in order
        # Seconds inside llama.cpp's decode, logits and rollback calls: what a
        # turn's decode time leaves is specchat's own. (llama.cpp's own perf
        # timer loses a batch's compute when the decode syncs early, as it
        # can after a rollback, so these calls are timed here.)
        self.llama_seconds = 0.0
        self._out: list[int] = []  # batch indices of the logits rows from the last eval
        self._piece_buf = ctypes.create_string_buffer(256)
        self._pieces: dict[int, bytes] = {}
        # Where greedy picks are made once callers read only argmax(): "graph"
        # (llama.cpp's) where the output layer is on a GPU, "host" otherwise
        # (argmax_where says why).
        self.device["argmax"] = argmax_where(self.device)
        self.tokens_only = False  # callers read only argmax(), not logits()
        self._greedy: int | None = None  # the greedy sampler chain (a pointer), while attached
        self._template: ChatTemplate | None = None  # the chat template (template.ChatTemplate), compiled on first use
        self._warm_up()

    def _warm_up(self) -> bool:
        """The first decodes of each shape are slow (graph set-up); pay that now,
        so it never lands in a turn's measured rounds. The cache is kept.
        False if there was no room after the cache to do it."""
        n_kept = len(self.tokens)
        if n_kept + 2 > self.n_ctx:
            return False
        for n in (1, 2, 1):
            self.eval([0] * n, n_logits=n)
            self.truncate(n_kept)
        return True

    @property
    def cost_key(self) -> str:
        """What this model's cost curve depends on: the file (path, size,
        mtime), llama.cpp's build, threads, context and batch size, where it
        runs and its CPU kernels (keptcurve.saved_curve keeps one per key)."""
        st = self.path.stat()
        where = self.device
        parts = [
            f"{self.path.resolve()}:{st.st_size}:{st.st_mtime_ns}",
            build_id(),
            f"threads={self.n_threads} ctx={self.n_ctx} batch={self.n_batch}",
            f"{where['backend']}:{where['gpu_layers']}/{where['layers']} bufts={where.get('extra_bufts')}",
        ]
        return " | ".join(parts)

    @property
    def graph_argmax(self) -> bool:
        """Greedy picks are made in llama.cpp's graph once callers read only argmax()."""
        return self.device["argmax"] == "graph"

    def argmax_only(self, on: bool) -> None:
        """Say whether callers read only argmax() from now on (greedy, no
        grammar); while on, logits() is refused. Where the graph takes the
        argmax, a change re-warms the graph and drops the last eval's rows."""
        self.tokens_only = on
        attach = on and self.graph_argmax
        if attach == (self._greedy is not None):
            return
        warmed = self._set_greedy(attach)
        if attach and warmed and C.llama_get_sampled_token_ith(self.ctx, self._out[-1]) < 0:
            # The device could not take the argmax (llama.cpp attaches the
            # sampler anyway and leaves its tokens empty): the host keeps it.
            self.device["argmax"] = "host"
            self._set_greedy(False)

    def _set_greedy(self, attach: bool) -> bool:
        """Attach llama.cpp's greedy sampler chain to the context, or take it
        off; then warm the changed graph up (_warm_up's answer)."""
        old, self._greedy = self._greedy, None
        if attach:
            self._greedy = C.llama_sampler_chain_init(C.llama_sampler_chain_default_params())
            C.llama_sampler_chain_add(self._greedy, C.llama_sampler_init_greedy())
        C.llama_set_sampler(self.ctx, 0, self._greedy)
        warmed = self._warm_up()
        if old is not None:
            C.llama_sampler_free(old)  # only once the graph no longer uses it
        return warmed

    # --- decoding -------------------------------------------------------------

    def eval(self, tokens: Sequence[int], n_logits: int = 1) -> None:
        """Decode `tokens` right after the cache; keep logits for the last n_logits."""
        if len(self.tokens) + len(tokens) > self.n_ctx:
            raise SpecchatError("the conversation is longer than the context", hint="raise --ctx or start a new chat")
        if self._greedy is not None and n_logits > MAX_ROWS:
            raise SpecchatError(
                f"one decode can pick at most {MAX_ROWS} greedy tokens in llama.cpp's graph",
                hint="draft fewer tokens (--k)",
            )
        first_logit = len(tokens) - n_logits
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            pos0 = len(self.tokens)
            fill(self.batch, chunk, pos0, logits_from=first_logit - start)
            t0 = time.perf_counter()
            rc = C.llama_decode(self.ctx, self.batch)
            self.llama_seconds += time.perf_counter() - t0
            if rc != 0:
                raise SpecchatError(f"llama_decode failed ({rc})", hint="the context may be full; try --ctx")
            if self.hidden is not None:
                self.hidden.keep(pos0, len(chunk))
            self.tokens.extend(chunk)
            self._last_fed, self._rolled_back = len(chunk), False
        # Logits rows are addressed by batch index within the last chunk.
        last = len(tokens) - (len(tokens) - 1) // self.n_batch * self.n_batch if tokens else 0
        assert n_logits <= last, "logits are kept for the last chunk only"
        self._out = list(range(last - n_logits, last)) if n_logits else []

    def logits(self, j: int) -> np.ndarray:
        """Row j of the logits from the last eval, as a view (no copy)."""
        if self.tokens_only:
            raise RuntimeError("logits() after argmax_only(True): say argmax_only(False) first")
        return self._logits(j)

    def _logits(self, j: int) -> np.ndarray:
        t0 = time.perf_counter()
        ptr = C.llama_get_logits_ith(self.ctx, self._out[j])  # a GPU's decode finishes here
        self.llama_seconds += time.perf_counter() - t0
        return np.frombuffer(self._row.from_address(ctypes.addressof(ptr.contents)), dtype=np.float32)

    def argmax(self, j: int) -> int:
        """The greedy token after row j: from the graph's argmax, or the host's."""
        if self._greedy is None:
            return int(np.argmax(self._logits(j)))
        t0 = time.perf_counter()
        t = C.llama_get_sampled_token_ith(self.ctx, self._out[j])  # a GPU's decode finishes here
        self.llama_seconds += time.perf_counter() - t0
        if t < 0:
            raise SpecchatError("llama.cpp returned no greedy token", hint="set SPECCHAT_ARGMAX=host")
        return t

    @property
    def can_roll_back(self) -> bool:
        """A verify's rejected tokens can be taken back: a KV cache, or a
        recurrent state whose architecture llama.cpp keeps snapshots for."""
        return not self.recurrent or self.rs_snapshots > 0

    def truncate(self, n: int) -> None:
        """Roll the cache back to its first n tokens. A recurrent state rolls
        back only within the last decode (llama.cpp's snapshots, once per
        decode): further back it starts over empty, and `tokens` says so
        (kvcache.sync then feeds the rest again)."""
        if n >= len(self.tokens):
            return
        back = len(self.tokens) - n
        if self.recurrent and not (back < self._last_fed and back <= self.rs_snapshots and not self._rolled_back):
            n = 0  # no snapshot holds that state: start over
        t0 = time.perf_counter()
        removed = C.llama_memory_seq_rm(self.mem, 0, n, -1)
        self.llama_seconds += time.perf_counter() - t0
        if not removed:
            raise SpecchatError(
                f"{self.path.name} cannot roll back its cache",
                hint="speculative decoding needs a model llama.cpp can roll back; use --drafter off",
            )
        self._rolled_back = self.recurrent and n > 0
        del self.tokens[n:]

    # --- text -------------------------------------------------------------------

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        buf = (C.llama_token * (len(data) + 8))()
        n = C.llama_tokenize(self.vocab, data, len(data), buf, len(buf), False, special)
        if n < 0:
            buf = (C.llama_token * -n)()
            n = C.llama_tokenize(self.vocab, data, len(data), buf, len(buf), False, special)
        return list(buf[:n])

    def piece(self, t: int) -> bytes:
        p = self._pieces.get(t)
        if p is None:
            n = C.llama_token_to_piece(self.vocab, t, self._piece_buf, 256, 0, False)
            p = self._pieces[t] = self._piece_buf.raw[: max(n, 0)]
        return p

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def is_eog(self, t: int) -> bool:
        return bool(C.llama_vocab_is_eog(self.vocab, t))

    @property
    def eos(self) -> int:
        """The end-of-generation token a reply ends with (end of turn where the model has one)."""
        eot = C.llama_vocab_eot(self.vocab)
        return eot if eot >= 0 else C.llama_vocab_eos(self.vocab)

    def byte_token(self, b: int) -> int | None:
        """The token that stands for the single byte b, if the vocabulary has one."""
        buf = (C.llama_token * 4)()
        n = C.llama_tokenize(self.vocab, bytes([b]), 1, buf, 4, False, False)
        return buf[0] if n == 1 and self.piece(buf[0]) == bytes([b]) else None

    def meta(self, key: str) -> str | None:
        """A metadata value as text, whole whatever its length (a chat template can be 100 kB)."""
        buf = ctypes.create_string_buffer(4096)
        n = C.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        if n >= len(buf):  # llama.cpp says how long it is: read it again, whole
            buf = ctypes.create_string_buffer(n + 1)
            n = C.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.raw[:n].decode("utf-8", errors="replace") if n >= 0 else None

    def apply_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """Render messages with the GGUF's own chat template (jinja2)."""
        if self._template is None:
            from specchat.llamacpp.template import ChatTemplate

            self._template = ChatTemplate(self)
        return self._template.render(messages, add_generation_prompt)

    # --- lifetime -----------------------------------------------------------------

    def close(self) -> None:
        if getattr(self, "ctx", None):
            C.llama_batch_free(self.batch)
            C.llama_free(self.ctx)
            C.llama_model_free(self.model)
            if getattr(self, "_greedy", None) is not None:  # freed after the context that used it
                C.llama_sampler_free(self._greedy)
            self.ctx = self.model = self._greedy = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def system_info() -> str:
    return C.llama_print_system_info().decode(errors="replace").strip()
