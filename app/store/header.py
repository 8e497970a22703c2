"""Reading a GGUF file's header: its key/value section, front to back, as
a stream (a Hub download's first megabytes will do), with every length and
count bounded so that a damaged or hostile file is refused, never followed.
Key names, value types and the magic come from the `gguf` package."""

from __future__ import annotations

import math
import os
import stat
import struct
from pathlib import Path
from typing import BinaryIO

from gguf import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType, GGUFValueType, Keys

from specchat import paths

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


def open_gguf(path: Path | str, buffering: int = 1 << 20) -> BinaryIO:
    """A model file opened for reading its header: a regular file only (a
    FIFO named x.gguf would block a plain open forever), opened without
    blocking and checked before a byte is read; ValueError otherwise."""
    try:
        return paths.open_regular(path, follow_links=True, buffering=buffering)
    except paths.NotRegularFile:
        raise ValueError("it is not a regular file") from None


class HeaderReader:
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
