"""Text from committed tokens: the engine feeds each round's tokens and gets
their text, with the bytes of a UTF-8 character split over two tokens and a
carriage return at the end held back until what completes them comes."""

from __future__ import annotations

from collections.abc import Sequence


class PieceDecoder:
    """Turns committed tokens into text, holding back split UTF-8 sequences
    and a carriage return at the end: a Windows line end split over two
    pieces stays one line end, never a lone "\r" (shown as ␍)."""

    def __init__(self, model) -> None:
        self.model = model
        self.pending = b""

    def feed(self, tokens: Sequence[int]) -> str:
        if not tokens:
            return ""
        data = self.pending + b"".join(self.model.piece(t) for t in tokens)
        cut = _complete_utf8(data)
        if data[:cut].endswith(b"\r"):
            cut -= 1
        self.pending = data[cut:]
        return data[:cut].decode("utf-8", errors="replace")

    def flush(self) -> str:
        """A carriage return still held back at the end of the reply (the
        bytes of a character cut short stay out, as before)."""
        data, self.pending = self.pending, b""
        return data[: _complete_utf8(data)].decode("utf-8", errors="replace")


def _complete_utf8(data: bytes) -> int:
    """Length of the longest prefix that does not end inside a UTF-8 sequence."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 == 0x80:
            continue  # continuation byte: keep looking for the lead
        if b & 0x80 == 0:
            return len(data)
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4
        return len(data) if back >= need else len(data) - back
    return len(data)
