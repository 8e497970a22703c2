"""Conversations in bench suites: a prompt of several turns is asked turn by
turn in one chat, each later turn after off's reply to the one before, and
the report keeps each turn's figures apart."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from specchat.bench import measure as measure_mod
from specchat.bench.plan import Plan
from specchat.bench.runner import Bench
from specchat.bench.scorecard import Run, rows
from specchat.bench.suites import Prompt, Suite, load_suite
from specchat.decoding.stats import TurnStats
from specchat.errors import SpecchatError


def test_a_suite_file_may_hold_conversations(tmp_path):
    path = tmp_path / "talk.toml"
    path.write_text(
        'name = "talk"\n'
        '[[prompt]]\nid = "one"\ntext = "hello"\n'
        '[[prompt]]\nid = "two"\nturns = ["Write a haiku.", "Now make it rhyme."]\n'
    )
    suite = load_suite(str(path))
    assert suite.prompts == (Prompt("one", "hello"), Prompt("two", "Write a haiku.", followups=("Now make it rhyme.",)))
    assert [p.turns for p in suite.prompts] == [("hello",), ("Write a haiku.", "Now make it rhyme.")]


@pytest.mark.parametrize(
    "table",
    [
        "turns = []",
        'turns = ["a", ""]',
        'turns = ["a", 3]',
        'turns = "a"',
        'text = "a"\nturns = ["b"]',
    ],
)
def test_a_conversation_without_turns_to_ask_is_one_line(tmp_path, table):
    path = tmp_path / "bad.toml"
    path.write_text(f'[[prompt]]\nid = "x"\n{table}\n')
    with pytest.raises(SpecchatError) as err:
        load_suite(str(path))
    assert str(err.value) == f"{path}: every [[prompt]] needs an id and a text (or turns)"
    assert err.value.hint == 'a suite file holds [[prompt]] tables: id = "…" and text = "…" (or turns = ["…", "…"])'


def test_a_conversation_counts_a_cycle_per_turn_in_the_plan():
    talk = Suite("talk", (Prompt("a", "hi"), Prompt("b", "one", followups=("two", "three"))))
    plan = Plan([talk], ["ngram"], [2], 8, extras=False)
    assert plan.total_runs == (1 + 3) * 2  # each turn: off, then ngram


def test_each_turn_is_a_row_of_its_own():
    def run(seq, cycle, slot, turn, tokens):
        stats = TurnStats(tokens=tokens, t_decode=1.0, tok_s=float(tokens))
        return Run(seq, cycle, slot, "talk", "b", 0, "off" if slot == "A" else "ngram", 0, stats, turn=turn)

    runs = [run(0, 1, "A", 1, 10), run(1, 1, "B", 1, 12), run(2, 2, "A", 2, 10), run(3, 2, "B", 2, 30)]
    by = {(r["suite"], r["drafter"]): r["speedup"] for r in rows(runs)}
    assert by == {
        ("talk · turn 1", "off"): 1.0,
        ("talk · turn 1", "ngram"): pytest.approx(1.2),
        ("talk · turn 2", "off"): 1.0,
        ("talk · turn 2", "ngram"): pytest.approx(3.0),
    }


@pytest.fixture(scope="module")
def tiny_session(tiny_pair):
    from specchat.session.loader import open_session
    from specchat.session.options import DecodeOptions, LoadOptions

    target, draft = tiny_pair
    s = open_session(
        LoadOptions(target=str(target), draft=str(draft), threads=1, ctx=1024),
        DecodeOptions(drafter="off", k=2, baseline_every=0, max_tokens=12),
    )
    yield s
    s.close()


@pytest.mark.real
def test_a_second_turn_is_asked_after_off_s_reply_to_the_first(tiny_session, monkeypatch):
    monkeypatch.setattr(measure_mod, "CURVE_CONTEXT", 64)
    monkeypatch.setattr(measure_mod, "CURVE_REPEATS", 2)
    first, second = "Name three colours.", "Repeat your answer word for word."
    plan = Plan([Suite("talk", (Prompt("again", first, followups=(second,)),))], ["ngram"], [2], 12, extras=False)
    progress = io.StringIO()  # a file, as a piped stderr is: a line per step, no bar
    b = Bench(tiny_session, plan, console=Console(file=progress, width=200))
    b.run()
    report = b.report({"name": "tiny"})

    runs = report["runs"]
    lines = [line for line in progress.getvalue().splitlines() if line]
    assert lines[0].startswith("measuring the cost curve:") and lines[0].endswith("then 4 runs")
    assert [line.split(":")[0] for line in lines[1:]] == [
        "1 of 4 · talk · again · turn 1 · A off", "2 of 4 · talk · again · turn 1 · B ngram k=2",
        "3 of 4 · talk · again · turn 2 · A off", "4 of 4 · talk · again · turn 2 · B ngram k=2"]  # fmt: skip
    first_off = b.runs[0].stats
    assert lines[1].endswith(f": {first_off.tokens} tokens, {first_off.tok_s:.1f} tok/s")
    assert [(r["turn"], r["slot"], r["drafter"]) for r in runs] == [
        (1, "A", "off"), (1, "B", "ngram"), (2, "A", "off"), (2, "B", "ngram")]  # fmt: skip
    assert runs[0]["cycle"] != runs[2]["cycle"] and all(r["identical"] for r in runs if r["slot"] == "B")
    # The last run's chat: the first turn, off's reply to it, the second turn and its reply.
    said = tiny_session.messages
    assert [m["role"] for m in said] == ["user", "assistant", "user", "assistant"]
    assert said[0]["content"] == first and said[1]["content"] == runs[0]["text"] and said[2]["content"] == second
    assert runs[2]["text"] == said[3]["content"] != ""
    assert {r["suite"] for r in report["rows"]} == {"talk · turn 1", "talk · turn 2"}
    assert report["suites"]["talk"] == [{"id": "again", "text": first, "followups": [second]}]
    assert report["runs_done"] == report["runs_planned"] == 4
