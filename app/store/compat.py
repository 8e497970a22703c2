"""Can this draft model draft for that target? llama.cpp's rule
(`common_speculative_are_compatible`), checked from the GGUF headers:

1. the same vocab type;
2. the same add_bos/add_eos flags and BOS/EOS ids;
3. vocab sizes that differ by at most 128;
4. identical token text for every id from 5 to min(n_vocab) - 1.

`check_pair` raises IncompatiblePair naming the first rule that fails. The
header is read as a stream, front to back, so `pull --target/--draft` can
check a pair from the first megabytes of each Hub file before downloading it.
Key names, value types and the magic come from the `gguf` package.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gguf import Keys

from specchat.errors import SpecchatError
from specchat.store.header import HeaderReader, open_gguf

MAX_VOCAB_DIFF = 128  # llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE
FIRST_CHECKED_ID = 5  # llama.cpp's SPEC_VOCAB_CHECK_START_TOKEN_ID

# tokenizer.ggml.model -> llama.cpp's vocab type
VOCAB_TYPES = {
    "no_vocab": "none",
    "llama": "SPM",
    "gpt2": "BPE",
    "bert": "WPM",
    "t5": "UGM",
    "rwkv": "RWKV",
    "plamo2": "PLaMo2",
}
# llama.cpp's defaults where a file leaves the keys out: (bos, eos, add_bos)
_DEFAULTS = {"SPM": (1, 2, True), "BPE": (11, 11, False), "WPM": (101, None, False)}


class IncompatiblePair(SpecchatError):
    """Draft and target do not share a tokenizer; `mismatch` says how."""

    def __init__(self, mismatch: str) -> None:
        super().__init__(
            f"draft and target tokenizers are incompatible: {mismatch}",
            hint="speculative decoding needs one tokenizer (llama.cpp's rule); pick a draft from the target's model family",
        )
        self.mismatch = mismatch


@dataclass(frozen=True)
class Vocab:
    """The tokenizer facts llama.cpp's rule looks at."""

    model: str
    tokens: list[bytes]
    bos: int | None
    eos: int | None
    add_bos: bool
    add_eos: bool

    @property
    def type(self) -> str:
        return VOCAB_TYPES.get(self.model, self.model)


def check_pair(target: Path, draft: Path) -> None:
    """Raise IncompatiblePair unless `draft` may draft for `target`."""
    mismatch = first_mismatch(read_vocab(target), read_vocab(draft))
    if mismatch:
        raise IncompatiblePair(mismatch)


def first_mismatch(target: Vocab, draft: Vocab) -> str | None:
    """The first way the two tokenizers differ by llama.cpp's rule, or None."""
    if target.type != draft.type:
        return f"vocab type differs: target {target.type} ({target.model}), draft {draft.type} ({draft.model})"
    for what, t, d in (
        ("add_bos flag", target.add_bos, draft.add_bos),
        ("add_eos flag", target.add_eos, draft.add_eos),
        ("BOS token id", target.bos, draft.bos),
        ("EOS token id", target.eos, draft.eos),
    ):
        if t != d:
            return f"{what} differs: target {_show(t)}, draft {_show(d)}"
    n_t, n_d = len(target.tokens), len(draft.tokens)
    if abs(n_t - n_d) > MAX_VOCAB_DIFF:
        return f"vocab sizes differ by {abs(n_t - n_d)} (target {n_t}, draft {n_d}; at most {MAX_VOCAB_DIFF} allowed)"
    for i in range(FIRST_CHECKED_ID, min(n_t, n_d)):
        if target.tokens[i] != draft.tokens[i]:
            return f"token {i} differs: target {_text(target.tokens[i])}, draft {_text(draft.tokens[i])}"
    return None


def _show(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _text(token: bytes) -> str:
    return repr(token.decode("utf-8", errors="backslashreplace"))


# --- reading the header -------------------------------------------------------------


def read_vocab(source: Path | str | BinaryIO, label: str | None = None) -> Vocab:
    """Read the tokenizer keys from a GGUF file or from a stream of one."""
    if isinstance(source, (str, Path)):
        try:
            with open_gguf(source) as stream:
                return read_vocab(stream, label or str(source))
        except ValueError as err:
            raise SpecchatError(
                f"{label or source} is not a readable GGUF file ({err})", hint="check the file"
            ) from None
    where = label or "the stream"
    try:
        return _vocab(HeaderReader(source).tokenizer_keys())
    except (struct.error, ValueError, EOFError, RecursionError) as err:
        raise SpecchatError(
            f"{where} is not a readable GGUF file ({err})", hint="check the file; re-pull it if it came from the store"
        ) from None


def read_architecture(path: Path) -> str | None:
    """The GGUF's `general.architecture` ("qwen2", "llama", ...), or None where
    the header does not say or cannot be read."""
    try:
        with open_gguf(path, 1 << 16) as stream:
            value = HeaderReader(stream).scalars(until=Keys.General.ARCHITECTURE).get(Keys.General.ARCHITECTURE)
    except (OSError, struct.error, ValueError, EOFError, RecursionError):
        return None
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else None


@dataclass(frozen=True)
class Architecture:
    """What kind of model a GGUF holds, as far as speculation cares."""

    name: str  # general.architecture
    kinds: tuple[str, ...]  # "dense" or any of "MoE", "SWA", "hybrid", plus "MTP" for shipped draft heads
    mtp_layers: int = 0

    def label(self) -> str:
        return f"{self.name}: {', '.join(self.kinds)}"

    def speculation(self) -> str:
        """What the kinds mean for speculative decoding, in one line."""
        said = {
            "dense": "a KV cache: rolls back anywhere",
            "MoE": "experts: a verify may read more of them than a step, so measure its cost (models check)",
            "SWA": "sliding-window attention: rolls back exactly, as specchat keeps the full cache (swa_full)",
            "hybrid": "a recurrent state: rolls back from llama.cpp's snapshots of the last decode where its "
            "architecture keeps them, else decodes plainly",
            "MTP": f"{self.mtp_layers} shipped MTP draft head(s): the mtp drafter drafts with the first, "
            "and hybrid and auto do where the pair has no draft model",
        }
        return "; ".join(said[k] for k in self.kinds)


def read_architecture_kinds(path: Path) -> Architecture | None:
    """The architecture and its kinds from the header's keys, or None where it cannot be read."""
    try:
        with open_gguf(path) as stream:
            kv = HeaderReader(stream).scalars()
    except (OSError, struct.error, ValueError, EOFError, RecursionError):
        return None
    name = kv.get(Keys.General.ARCHITECTURE)
    if not isinstance(name, bytes):
        return None
    arch = name.decode("utf-8", errors="replace")

    def has(key: str) -> bool:
        value = kv.get(f"{arch}.{key}")
        return value is not None and value != 0

    kinds = []
    if has("expert_count"):
        kinds.append("MoE")
    if has("attention.sliding_window"):
        kinds.append("SWA")
    if any(k.startswith((f"{arch}.ssm.", f"{arch}.wkv.", f"{arch}.shortconv.")) for k in kv):
        kinds.append("hybrid")
    mtp = kv.get(f"{arch}.nextn_predict_layers")
    mtp_layers = mtp if isinstance(mtp, int) and not isinstance(mtp, bool) and mtp > 0 else 0
    kinds = kinds or ["dense"]
    if mtp_layers:
        kinds.append("MTP")
    return Architecture(arch, tuple(kinds), mtp_layers)


def check_whole(path: Path) -> None:
    """Raise unless `path` holds every byte its GGUF header says its tensors need
    (llama.cpp refuses a shorter file when it loads it)."""
    try:
        with open_gguf(path) as stream:
            need = HeaderReader(stream).data_end()
            have = os.fstat(stream.fileno()).st_size
        if need == 0:
            raise ValueError("it holds no tensors")
    except (OSError, struct.error, ValueError, EOFError, KeyError, RecursionError) as err:
        raise SpecchatError(f"{path} is not a readable GGUF file ({err})", hint="check the file") from None
    if have < need:
        raise SpecchatError(
            f"{path} is truncated: its tensors need {need} bytes, the file holds {have}",
            hint="download it again (the download was cut short)",
        )


def _vocab(kv: dict[str, object]) -> Vocab:
    """The tokenizer keys as llama.cpp reads them; ValueError for a key of another type."""
    model = kv.get(Keys.Tokenizer.MODEL, b"no_vocab")
    tokens = kv.get(Keys.Tokenizer.LIST, [])
    if not isinstance(model, bytes):
        raise ValueError(f"{Keys.Tokenizer.MODEL} is not a string")
    if not isinstance(tokens, list) or not all(isinstance(t, bytes) for t in tokens):
        raise ValueError(f"{Keys.Tokenizer.LIST} is not a list of strings")
    name = model.decode("utf-8", errors="replace")
    bos, eos, add_bos = _DEFAULTS.get(VOCAB_TYPES.get(name, ""), (None, None, False))
    return Vocab(
        model=name,
        tokens=tokens,
        bos=_token_id(kv, Keys.Tokenizer.BOS_ID, bos),
        eos=_token_id(kv, Keys.Tokenizer.EOS_ID, eos),
        add_bos=bool(kv.get(Keys.Tokenizer.ADD_BOS, add_bos)),
        add_eos=bool(kv.get(Keys.Tokenizer.ADD_EOS, False)),
    )


def _token_id(kv: dict[str, object], key: str, default: int | None) -> int | None:
    value = kv.get(key, default)
    if value is not None and not isinstance(value, int):
        raise ValueError(f"{key} is not a token id")
    return value
