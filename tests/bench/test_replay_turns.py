"""tools/replay.py reads a bench report of conversations: a later turn is
replayed after the turns before it and off's replies to them, as the bench
asked it, and its figures are a suite of their own ("… t2")."""

from __future__ import annotations

from specchat.bench import public
from specchat.bench.suites import Prompt, Suite
from tools import replay


class Session:
    """What load_replies asks of a session: the prompt a chat would send, and the tokenizer."""

    def __init__(self) -> None:
        self.target = self

    def prompt_for(self, text: str, history=()) -> list:
        return [*(m["content"] for m in history), text]

    def tokenize(self, text: str, special: bool = False) -> list:
        return list(text)


def run(suite: str, prompt: str, turn: int, slot: str, text: str) -> dict:
    return {"suite": suite, "prompt": prompt, "turn": turn, "slot": slot, "drafter": "off", "text": text}


def test_a_second_turn_is_replayed_after_the_first_and_offs_reply(monkeypatch):
    asked = Suite("mt-bench/writing", (Prompt("81", "plan a trip", followups=("now in a table",)),))
    monkeypatch.setattr(public, "suites", lambda name, *a, **k: [asked, Suite("mt-bench/math", ())])
    report = {"suites": ["mt-bench/writing", "code-edit"],
              "runs": [run("mt-bench/writing", "81", 1, "A", "day one"), run("mt-bench/writing", "81", 1, "B", "x"),
                       run("mt-bench/writing", "81", 2, "A", "| day |"),
                       run("code-edit", "rename-variable", 1, "A", "ok")]}  # fmt: skip
    replies = replay.load_replies(report, Session())
    assert [r["row"] for r in replies] == ["mt-bench/writing t1", "mt-bench/writing t2", "code-edit"]
    assert [r["suite"] for r in replies] == ["mt-bench/writing", "mt-bench/writing", "code-edit"]
    assert replies[1]["prompt"] == ["plan a trip", "day one", "now in a table"]  # the turn before and off's reply
    assert replies[1]["reply"] == list("| day |") and replies[0]["prompt"] == ["plan a trip"]
    assert replies[2]["prompt"][0].startswith("Rename")  # a suite of the repository's: its one text
