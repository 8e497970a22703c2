"""The memory costs the same at every start: a stored reply is tokenized
once per model, and the next fill takes its tokens from the cache in the
data folder."""

from __future__ import annotations

import sqlite3
from array import array

from specchat import paths
from specchat.drafters.memory import SEP
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from specchat.session.tokencache import TokenCache
from tests.support.fake_model import FakeModel

REPLIES = [(n, f"question {n}", f"the answer to question {n} is {n * 7}") for n in range(50)]


class CountingModel(FakeModel):
    """The fake model, counting what it is asked to tokenize, under a cost key as llama.Model has."""

    def __init__(self) -> None:
        super().__init__()
        self.cost_key = "model.gguf:123:456"
        self.tokenized = 0

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        self.tokenized += 1
        return super().tokenize(text, special)


def filled(model: CountingModel, system: str | None = None) -> tuple[ChatSession, int]:
    session = ChatSession(model, decode=DecodeOptions(drafter="memory", k=8, system=system))
    before = model.tokenized
    session.remember(REPLIES)
    session.memory.absorb()
    return session, model.tokenized - before


def test_a_second_fill_tokenizes_nothing_and_holds_the_same():
    first, work = filled(CountingModel())
    assert work == 2 * len(REPLIES)  # each reply: its prompt and its text
    assert (paths.data_dir() / "memory-tokens.sqlite3").is_file()
    second, work_again = filled(CountingModel())
    assert work_again == 0
    assert second.memory.held == first.memory.held > 0
    assert second.memory.index.tokens.tolist() == first.memory.index.tokens.tolist()


def test_another_model_or_system_prompt_tokenizes_again():
    filled(CountingModel())
    other = CountingModel()
    other.cost_key = "other.gguf:9:9"
    assert filled(other)[1] == 2 * len(REPLIES)
    assert filled(CountingModel(), system="be brief")[1] == 2 * len(REPLIES)


def test_a_cache_that_cannot_be_written_costs_only_the_tokenizing(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "file"))
    (tmp_path / "file").write_text("")  # the data folder cannot be made
    cache = TokenCache("m", None, n_vocab=24)
    assert cache.db is None and cache.tokens("q", "r", lambda q, r: [1, 2]) == [1, 2]
    cache.close()


def test_kept_tokens_outside_the_vocabulary_are_dropped_said_once_and_tokenized_again(capsys):
    """Token ids past the model's vocabulary would reach llama_decode as drafts
    and fail every reply that drafts from the memory."""
    first, _ = filled(CountingModel())
    path = paths.data_dir() / "memory-tokens.sqlite3"
    db = sqlite3.connect(path)
    with db:
        keys = [key for (key,) in db.execute("SELECT key FROM tokens ORDER BY key LIMIT 5")]
        for key, bad in zip(keys, [24, 10**6, -1, 2**31 - 1, 30]):
            db.execute("UPDATE tokens SET tokens = ? WHERE key = ?", (array("i", [1, bad, 2]).tobytes(), key))
    db.close()
    capsys.readouterr()
    second, work = filled(CountingModel())
    assert work == 2 * 5  # those five replies tokenized again
    held = second.memory.index.tokens[: second.memory.index.end].tolist()
    assert set(held) <= {*range(24), SEP}  # the replies' tokens, and the separator between replies
    assert second.memory.index.tokens.tolist() == first.memory.index.tokens.tolist()
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path}: dropped 5 kept token list(s) naming tokens outside the model's vocabulary of 24; "
        "they were tokenized again"
    ]
    third, work = filled(CountingModel())
    assert work == 0 and capsys.readouterr().err == ""  # replaced by good ones: nothing more to say
