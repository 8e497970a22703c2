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

import math
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gguf import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType, GGUFValueType, Keys

from specchat.errors import SpecchatError

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

_SCALAR = {
    GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H", GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i",
    GGUFValueType.UINT64: "Q", GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT32: "f", GGUFValueType.FLOAT64: "d",
    GGUFValueType.BOOL: "?",
}  # fmt: skip
_ALIGNMENT = Keys.General.ALIGNMENT.encode()
_WANTED = {
    Keys.Tokenizer.MODEL, Keys.Tokenizer.LIST, Keys.Tokenizer.BOS_ID,
    Keys.Tokenizer.EOS_ID, Keys.Tokenizer.ADD_BOS, Keys.Tokenizer.ADD_EOS,
}  # fmt: skip


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


def open_gguf(path: Path | str, buffering: int = 1 << 20) -> BinaryIO:
    """A model file opened for reading its header: a regular file only (a
    FIFO named x.gguf would block a plain open forever), opened without
    blocking and checked before a byte is read; ValueError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("it is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


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
        return _vocab(_HeaderReader(source).tokenizer_keys())
    except (struct.error, ValueError, EOFError, RecursionError) as err:
        raise SpecchatError(
            f"{where} is not a readable GGUF file ({err})", hint="check the file; re-pull it if it came from the store"
        ) from None


def read_architecture(path: Path) -> str | None:
    """The GGUF's `general.architecture` ("qwen2", "llama", ...), or None where
    the header does not say or cannot be read."""
    try:
        with open_gguf(path, 1 << 16) as stream:
            value = _HeaderReader(stream).scalars(until=Keys.General.ARCHITECTURE).get(Keys.General.ARCHITECTURE)
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
            "MTP": f"{self.mtp_layers} shipped MTP draft head(s), which specchat does not draft with yet",
        }
        return "; ".join(said[k] for k in self.kinds)


def read_architecture_kinds(path: Path) -> Architecture | None:
    """The architecture and its kinds from the header's keys, or None where it cannot be read."""
    try:
        with open_gguf(path) as stream:
            kv = _HeaderReader(stream).scalars()
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
            need = _HeaderReader(stream).data_end()
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


class _HeaderReader:
    """Walks the GGUF key/value section; keeps the tokenizer keys, skips the rest.

    Reads the stream in 1 MiB blocks and parses from that buffer, because a
    vocab holds ~10^5 strings and merges as many again.
    """

    BLOCK = 1 << 20
    # No header value is this big (a vocab's whole token list is ~2 MB): a
    # larger length is a damaged or hostile file, refused before reading it.
    MAX_VALUE = 1 << 30
    MAX_COUNT = 1 << 22  # entries in one array: a vocabulary or its merges hold ~10^5
    MAX_DEPTH = 4  # arrays of arrays: real files nest none

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.order = "<"
        self.buf = b""
        self.pos = 0
        self.size: int | None = None  # a file's size bounds every count in it; a stream (a download) has none
        try:
            st = os.fstat(stream.fileno())
            if stat.S_ISREG(st.st_mode):
                self.size = st.st_size
        except (AttributeError, OSError, ValueError):
            pass

    def _left(self) -> int | None:
        """Bytes after the parse position, where the size is known."""
        if self.size is None:
            return None
        return self.size - (self.stream.tell() - (len(self.buf) - self.pos))

    def _bound(self, count: int, each: int) -> None:
        """Refuse a count that the file cannot hold (each entry takes at least `each` bytes)."""
        left = self._left()
        if count > self.MAX_COUNT or (left is not None and count * each > left):
            raise ValueError(f"its header declares an array of {count} entries, more than the file holds")

    def _ensure(self, n: int) -> None:
        if self.pos + n <= len(self.buf):
            return
        if n > self.MAX_VALUE:
            raise ValueError(f"its header declares a value of {n} bytes")
        parts, have = [self.buf[self.pos :]], len(self.buf) - self.pos
        while have < n:
            chunk = self.stream.read(max(self.BLOCK, n - have))
            if not chunk:
                raise EOFError("the file ends inside its header")
            parts.append(chunk)
            have += len(chunk)
        self.buf, self.pos = b"".join(parts), 0

    def take(self, n: int) -> bytes:
        self._ensure(n)
        self.pos += n
        return self.buf[self.pos - n : self.pos]

    def scalar(self, vtype: int):
        code = struct.Struct(self.order + _SCALAR[GGUFValueType(vtype)])
        self._ensure(code.size)
        (value,) = code.unpack_from(self.buf, self.pos)
        self.pos += code.size
        return value

    def string(self) -> bytes:
        return self.take(self.scalar(GGUFValueType.UINT64))

    def start(self) -> tuple[int, int]:
        """The magic and version checked: (tensor count, key/value count)."""
        if self.take(4) != struct.pack("<I", GGUF_MAGIC):
            raise ValueError("no GGUF magic")
        version = struct.unpack("<I", self.take(4))[0]
        if version & 0xFFFF == 0:  # written big-endian
            self.order, version = ">", struct.unpack(">I", struct.pack("<I", version))[0]
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} is not supported")
        return self.scalar(GGUFValueType.UINT64), self.scalar(GGUFValueType.UINT64)

    def data_end(self) -> int:
        """Where the last tensor's data ends: the size a whole file has at least."""
        n_tensors, n_kv = self.start()
        alignment = 32  # GGUF's default
        if n_tensors == 0:
            return 0
        for _ in range(n_kv):
            key = self.string()
            value = self.value(self.scalar(GGUFValueType.UINT32), keep=key == _ALIGNMENT)
            if key == _ALIGNMENT:
                alignment = value if isinstance(value, int) and value > 0 else alignment
        end = 0
        for _ in range(n_tensors):
            self.string()  # its name
            dims = [self.scalar(GGUFValueType.UINT64) for _ in range(self.scalar(GGUFValueType.UINT32))]
            block, size = GGML_QUANT_SIZES[GGMLQuantizationType(self.scalar(GGUFValueType.UINT32))]
            end = max(end, self.scalar(GGUFValueType.UINT64) + math.prod(dims) // block * size)
        here = self.stream.tell() - (len(self.buf) - self.pos)
        return -(-here // alignment) * alignment + end

    def tokenizer_keys(self) -> dict[str, object]:
        n_kv = self.start()[1]
        found: dict[str, object] = {}
        for _ in range(n_kv):
            key = self.string().decode("utf-8", errors="replace")
            vtype = self.scalar(GGUFValueType.UINT32)
            value = self.value(vtype, keep=key in _WANTED)
            if key in _WANTED:
                found[key] = value
            if len(found) == len(_WANTED):
                break
        return found

    def scalars(self, until: str | None = None) -> dict[str, object]:
        """Every key whose value is a scalar or a string (arrays are skipped),
        up to the key `until` where one is named (it comes first in most files)."""
        n_kv = self.start()[1]
        found: dict[str, object] = {}
        for _ in range(n_kv):
            key = self.string().decode("utf-8", errors="replace")
            vtype = self.scalar(GGUFValueType.UINT32)
            value = self.value(vtype, keep=False)
            if vtype != GGUFValueType.ARRAY:
                found[key] = value
            if key == until:
                break
        return found

    def value(self, vtype: int, keep: bool, depth: int = 0):
        if vtype == GGUFValueType.STRING:
            return self.string()
        if vtype == GGUFValueType.ARRAY:
            if depth >= self.MAX_DEPTH:
                raise ValueError(f"its header nests arrays more than {self.MAX_DEPTH} deep")
            return self.array(keep, depth + 1)
        return self.scalar(vtype)

    def array(self, keep: bool, depth: int = 1) -> list | None:
        etype = self.scalar(GGUFValueType.UINT32)
        count = self.scalar(GGUFValueType.UINT64)
        if etype == GGUFValueType.STRING:
            self._bound(count, 8)  # a string is at least its 8-byte length
            return self.strings(count, keep)
        if etype in _SCALAR:
            code = _SCALAR[GGUFValueType(etype)]
            self._bound(count, struct.calcsize(code))
            data = self.take(count * struct.calcsize(code))
            return list(struct.unpack(f"{self.order}{count}{code}", data)) if keep else None
        self._bound(count, 4)  # an array is at least its element type
        items = [self.value(etype, keep, depth) for _ in range(count)]
        return items if keep else None

    def strings(self, count: int, keep: bool) -> list[bytes] | None:
        """The hot loop: a string array, parsed in place in the buffer."""
        length = struct.Struct(self.order + "Q")
        out = []
        for _ in range(count):
            if self.pos + 8 > len(self.buf):
                self._ensure(8)
            (n,) = length.unpack_from(self.buf, self.pos)
            if self.pos + 8 + n > len(self.buf):
                self._ensure(8 + n)
            start = self.pos + 8
            if keep:
                out.append(self.buf[start : start + n])
            self.pos = start + n
        return out if keep else None
