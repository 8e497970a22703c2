"""A fake model whose tokens are words, so a question and its answer can be asked again."""

from __future__ import annotations

from tests.support.fake_model import WORDS, FakeModel
from tests.support.tui import long_model

QUESTION = "the cat sat on the mat"


class WordModel(FakeModel):
    """The app's fake model with a tokenizer that reads its own pieces back
    (the fake's own reads characters): a stored reply's text becomes its tokens again."""

    def __init__(self) -> None:
        super().__init__()
        self.table, self.cpu_bound = long_model().table, False

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        out = []
        while text:
            piece = max((w for w in WORDS[1:] if text.startswith(w)), key=len, default=None)
            out.append(WORDS.index(piece) if piece else super().tokenize(text[0])[0])
            text = text[len(piece or text[0]) :]
        return out
