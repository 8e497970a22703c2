"""A grammar over the fake model's words, with the surface of grammar.Grammar.

A small automaton: some states allow exactly one word (forced runs), some a
choice, one a free run of words ended by "."; a reply may end (EOS) after a
line. Like llama.cpp, whose process aborts on a token its grammar refuses,
the state asserts that only allowed tokens are accepted: a fake that checks
its caller.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tests.support.fake_model import EOS, WORDS

FREE = [1, 2, 4, 5, 9, 11, 12, 13, 16, 19, 20, 21, 22, 23]  # words a free run may use
# state -> {token: next state}; END marks states where the reply may end.
MACHINE: dict[int, dict[int, int]] = {
    0: {8: 1},  # " it"          forced
    1: {14: 2},  # " was"        forced
    2: {t: 3 for t in FREE},  # a free run of words...
    3: {**{t: 3 for t in FREE}, 17: 4},  # ...ended by "."
    4: {6: 5},  # " and"         forced
    5: {7: 6},  # " then"        forced
    6: {8: 7},  # " it"          forced
    7: {9: 8, 2: 8},  # " ran" | " sat"
    8: {10: 9},  # " to"         forced
    9: {11: 10},  # " see"       forced
    10: {21: 11, 22: 11, 23: 11},  # " x" | " y" | " z"
    11: {18: 12},  # "\n"        forced
    12: {8: 1},  # " it" again, or the end
}
END = {12}


@dataclass(frozen=True)
class FakeSpec:
    source: str = "fake.gbnf"
    label: str = "grammar · fake.gbnf"


class FakeGrammar:
    def __init__(self, model) -> None:
        self.model = model
        self.spec = FakeSpec()
        self.eos = EOS
        self.probes = 0  # forced_text calls: the drafter's cost

    def start(self) -> FakeGrammarState:
        return FakeGrammarState(self, 0)

    def close(self) -> None:
        pass

    def tokens_of(self, text: bytes) -> list[int]:
        out, rest = [], text.decode()
        while rest:
            t = max((i for i, w in enumerate(WORDS) if i != EOS and rest.startswith(w)), key=lambda i: len(WORDS[i]))
            out.append(t)
            rest = rest[len(WORDS[t]) :]
        return out


class FakeGrammarState:
    def __init__(self, grammar: FakeGrammar, state: int) -> None:
        self.grammar, self.s = grammar, state

    def clone(self) -> FakeGrammarState:
        return FakeGrammarState(self.grammar, self.s)

    def allowed(self, ids) -> np.ndarray:
        ok = MACHINE[self.s]
        return np.array([int(t) in ok or (int(t) == EOS and self.s in END) for t in ids], dtype=bool)

    def mask(self, logits: np.ndarray) -> np.ndarray:
        return np.where(self.allowed(range(len(logits))), logits, -np.inf).astype(np.float32)

    def argmax(self, logits: np.ndarray) -> int:
        return int(np.argmax(self.mask(logits)))

    def accept(self, t: int) -> None:
        assert t in MACHINE[self.s], f"the grammar refuses token {t} in state {self.s}"
        self.s = MACHINE[self.s][t]

    def forced_text(self) -> tuple[bytes, bool]:
        self.grammar.probes += 1
        s, out = self.s, b""
        while len(MACHINE[s]) == 1 and s not in END:
            ((t, s),) = MACHINE[s].items()
            out += WORDS[t].encode()
        return out, s in END and not MACHINE[s]


def matches(tokens: list[int]) -> bool:
    """Whether a reply (EOS excluded) is a prefix the grammar takes."""
    s = 0
    for t in tokens:
        if t not in MACHINE[s]:
            return False
        s = MACHINE[s][t]
    return True
