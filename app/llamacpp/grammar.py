"""A grammar bound to a model's vocabulary through llama.cpp's grammar sampler
(`llama_sampler_init_grammar`), which masks the tokens whose text the
grammar cannot take next; `Grammar.start()` gives the state
`specchat.decoding.constraint.Constraint` moves through a reply.

What things cost on the default pair's 151,936-token vocabulary (measured
with `python tools/grammar_cost.py`): masking a whole logits row costs about
20-35 ms, a fifth to a third of a decode step on this CPU. So:
- greedy: the target's argmax is checked alone (one candidate), and only
  when the grammar refuses it are the next most likely candidates checked,
  a few dozen at a time, in logit order: exact; about 0.2 ms a position
  (median), a few ms at worst;
- sampling: p needs the whole mask (exact rejection sampling divides by it);
- forced text: the grammar is asked about the 256 single-byte tokens and
  EOS, one byte at a time (a tenth of a millisecond each). The run ends
  where more than one byte (or a non-ASCII byte) may follow. The text is
  tokenized once; while committed tokens eat into it, the rest stays forced
  and is not probed again.

Binding is bounded. decoding/schema.py refuses a grammar too big to bind quickly
before llama.cpp sees it; a small grammar whose alternatives multiply
(each starting alike and going on differently) can still make llama.cpp
build millions of parse stacks. So the sampler is built on a thread of its
own while the caller waits, at most `BIND_SECONDS`: ctrl-c reaches a caller
on the main thread (a C call there would hold it off), and a grammar not
bound by then is refused. llama.cpp cannot be stopped midway: the thread
finishes in the background and frees what it built.

"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import tempfile
import threading
import time
from contextlib import contextmanager

import numpy as np

from specchat.decoding.schema import GrammarSpec
from specchat.errors import SpecchatError

_CANDIDATE = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])  # llama_token_data
FORCED_MAX_BYTES = 256  # longest forced run probed in one go
_ARGMAX_CHUNK = 32  # candidates checked at a time when the argmax is refused
BIND_SECONDS = 5.0  # a grammar within decoding/schema.py's limits binds in well under 0.1 s
WAIT_SLICE = 0.1  # seconds between two looks at the bind (and at a ctrl-c)


# --- binding to a vocabulary ---------------------------------------------------------


class Grammar:
    """A grammar bound to one model's vocabulary: llama.cpp's grammar sampler
    at the start of a reply, plus the single-byte tokens the probes use."""

    def __init__(self, spec: GrammarSpec, model) -> None:

        from specchat.llamacpp.llama import recent_log

        self.spec = spec
        self.model = model
        self._root = None
        if spec.schema is None:  # a GBNF file: the parser writes its errors to C's stderr, caught here
            with _stderr_to(tempfile.TemporaryFile()) as said:
                self._root = _bind(model.vocab, spec)
            parser_said = said.read().decode("utf-8", "replace").splitlines()
        else:  # the converter's GBNF parses; and the chat draws on stderr while its worker binds
            self._root, parser_said = _bind(model.vocab, spec), []
        if not self._root:
            reason = _grammar_error(parser_said + recent_log())
            raise SpecchatError(
                f"{spec.source} is not a grammar llama.cpp can read: {reason}",
                hint="see llama.cpp's grammars/README.md for the GBNF syntax",
                code=2,
            )
        self.eos = model.eos
        self.byte_of: dict[int, int] = {}  # token -> the one byte it stands for
        for b in range(256):
            t = model.byte_token(b)
            if t is not None:
                self.byte_of[t] = b
        self.probe_ids = np.array(sorted(self.byte_of) + [self.eos], dtype=np.int32)
        self._tokens: dict[bytes, list[int]] = {}  # forced text -> its tokens

    def tokens_of(self, text: bytes) -> list[int]:
        """The forced text as the model's tokens, tokenized once per text."""
        tokens = self._tokens.get(text)
        if tokens is None:
            tokens = self._tokens[text] = self.model.tokenize(text.decode("ascii"), special=False) if text else []
        return tokens

    def start(self) -> GrammarState:
        """The state at the start of a reply."""
        import llama_cpp as C

        return GrammarState(self, C.llama_sampler_clone(self._root))

    def close(self) -> None:
        import llama_cpp as C

        if self._root:
            C.llama_sampler_free(self._root)
            self._root = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _bind(vocab, spec: GrammarSpec, seconds: float | None = None):
    """llama_sampler_init_grammar on a thread, waited for at most `seconds`
    (BIND_SECONDS); None where the grammar does not parse. Past the time it
    is a SpecchatError, and the thread frees the sampler when it is done."""
    import llama_cpp as C

    seconds = BIND_SECONDS if seconds is None else seconds
    lock, done, box = threading.Lock(), threading.Event(), {"abandoned": False}

    def build() -> None:
        sampler = C.llama_sampler_init_grammar(vocab, spec.gbnf.encode(), b"root")
        with lock:
            if box["abandoned"]:
                if sampler:
                    C.llama_sampler_free(sampler)
                return
            box["sampler"] = sampler
        done.set()

    threading.Thread(target=build, name="grammar-bind", daemon=True).start()
    bound, end = False, time.monotonic() + seconds
    try:
        # Short waits: a ctrl-c the kernel hands to another thread (the bind's,
        # busy in C) is raised here at the next one, not when the time is up.
        while not bound and (left := end - time.monotonic()) > 0:
            bound = done.wait(min(WAIT_SLICE, left))
    finally:
        if not bound:
            with lock:
                box["abandoned"] = True
                if box.get("sampler"):  # it finished just now
                    C.llama_sampler_free(box.pop("sampler"))
    if not bound:
        raise SpecchatError(
            f"{spec.source}: llama.cpp did not bind the grammar within {seconds:g} s "
            "(its alternatives multiply into too many parse stacks)",
            hint="simplify it: alternatives that start alike and go on differently multiply",
            code=2,
        )
    return box["sampler"]


def _grammar_error(lines: list[str]) -> str:
    """The parser's own reason ("expecting ')' at …"), else llama.cpp's log line."""
    for line in lines:
        if "error parsing grammar:" in line:
            return re.sub(r"\s+at$", "", line.split("error parsing grammar:", 1)[1].strip()) or "it does not parse"
    said = [line.strip() for line in lines if "grammar" in line.lower()]
    return said[-1] if said else "it does not parse"


@contextmanager
def _stderr_to(f):
    """Send file descriptor 2 (C code's stderr) to f for a while; yields f, rewound."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    try:
        yield f
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        f.seek(0)


class GrammarState:
    """Where the reply is in the grammar (one llama.cpp grammar sampler)."""

    def __init__(self, grammar: Grammar, sampler) -> None:
        self.grammar = grammar
        self._s = sampler

    def clone(self) -> GrammarState:
        import llama_cpp as C

        return GrammarState(self.grammar, C.llama_sampler_clone(self._s))

    def accept(self, t: int) -> None:
        """Advance by token t. llama.cpp aborts the whole process on a token
        the grammar refuses, so that is checked first (one candidate: µs)."""
        import llama_cpp as C

        if not self.allowed(np.array([t], dtype=np.int32))[0]:
            raise SpecchatError(
                f"the grammar refuses token {t} here", hint="a bug: only allowed tokens may be committed"
            )
        C.llama_sampler_accept(self._s, t)

    def _apply(self, cands: np.ndarray) -> np.ndarray:
        """Run the grammar over candidates (llama_token_data rows) in place;
        True where a candidate is allowed."""
        import llama_cpp as C

        arr = C.llama_token_data_array(
            data=cands.ctypes.data_as(C.llama_token_data_p), size=len(cands), selected=-1, sorted=False
        )
        C.llama_sampler_apply(self._s, ctypes.byref(arr))
        return np.isfinite(cands["logit"])

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        cands = np.zeros(len(ids), dtype=_CANDIDATE)
        cands["id"] = ids
        return self._apply(cands)

    def mask(self, logits: np.ndarray) -> np.ndarray:
        """A copy of a logits row with every refused token at -inf (the whole vocabulary)."""
        cands = np.empty(len(logits), dtype=_CANDIDATE)
        cands["id"] = np.arange(len(logits), dtype=np.int32)
        cands["logit"] = logits
        ok = self._apply(cands)
        return np.where(ok, logits, -np.inf).astype(np.float32)

    def argmax(self, logits: np.ndarray) -> int:
        """The allowed token with the highest logit (the lowest id among ties,
        as np.argmax of the masked row): the argmax if allowed, else the best
        of the next candidates, a growing chunk at a time."""
        t = int(np.argmax(logits))
        if self.allowed(np.array([t], dtype=np.int32))[0]:
            return t
        return _first_allowed(self, logits)

    def forced_text(self) -> tuple[bytes, bool]:
        """(text, ends): the bytes the grammar forces from here, one at a time,
        until more than one byte may follow or a non-ASCII one; ends is True
        when after that text only the end of the reply is allowed."""
        g = self.clone()
        grammar = g.grammar
        out = bytearray()
        while len(out) < FORCED_MAX_BYTES:
            ids = grammar.probe_ids[g.allowed(grammar.probe_ids)]
            if len(ids) != 1:
                break
            t = int(ids[0])
            if t == grammar.eos:
                return bytes(out), True
            b = grammar.byte_of[t]
            if b >= 0x80:  # a lead byte: the character is not decided yet
                break
            out.append(b)
            g.accept(t)
        return bytes(out), False

    def __del__(self) -> None:
        try:
            import llama_cpp as C

            if self._s:
                C.llama_sampler_free(self._s)
                self._s = None
        except Exception:
            pass


def _first_allowed(state, logits: np.ndarray) -> int:
    """The allowed token with the highest logit, ties to the lowest id. Only
    the top of the vocabulary is put in order: sorting all of it took 20 ms."""
    n = len(logits)
    start, size = 1, _ARGMAX_CHUNK  # the first in order is the refused argmax
    while start < n:
        end = min(n, start + size)
        # Every id at or above the end-th largest logit: ties at the cut
        # included, that is exactly the first `end` or more of the full order.
        top = np.flatnonzero(logits >= np.partition(logits, n - end)[n - end])
        order = top[np.lexsort((top, -logits[top]))]  # by logit, descending; then by id
        ids = order[start:end].astype(np.int32)
        ok = state.allowed(ids)
        if ok.any():
            return int(ids[np.argmax(ok)])
        start, size = end, size * 8
    raise SpecchatError("the grammar allows no token here", hint="check the grammar: it reached a dead end")
