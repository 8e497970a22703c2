"""The memory suite on the fake model: each prompt answered once, then asked
again three ways, every run's figures and the medians; and its command line."""

from __future__ import annotations

from specchat.bench.memory import WAYS, Asked, load, measure, one_word_changed, summary
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from tests.support.cli import specchat
from tests.support.words import QUESTION, WordModel


def test_each_way_is_measured_off_then_per_drafter_and_new_is_drafted_from_memory():
    session = ChatSession(WordModel(), decode=DecodeOptions(drafter="off", k=16, baseline_every=0, max_tokens=60))
    asked = Asked("cat", QUESTION, one_word_changed(QUESTION))
    runs = measure(session, [asked])
    assert [(r["way"], r["drafter"]) for r in runs] == [
        (way, d) for way in WAYS for d in ("off", "ngram", "memory", "auto")
    ]
    by = {(r["way"], r["drafter"]): r for r in runs}
    assert by["new", "memory"]["identical"] is True and by["new", "auto"]["identical"] is True
    assert by["new", "memory"]["memory_accepted"] >= 40 and by["new", "ngram"]["memory_accepted"] == 0
    assert by["new", "memory"]["alpha"] > by["new", "ngram"]["alpha"]
    assert by["regenerate", "off"]["identical"] is None  # sampled: not compared
    rows = summary(runs)
    assert [(r["way"], r["drafter"]) for r in rows] == [(w, d) for w in WAYS for d in ("ngram", "memory", "auto")]
    assert rows[1]["alpha"] == by["new", "memory"]["alpha"] and rows[1]["prompts"] == 1


def test_one_word_changed_replaces_one_word_of_the_first_line():
    assert one_word_changed("Rename the variable in this function.\ncode") == "Rename the variable in this that.\ncode"
    assert one_word_changed("Say that") == "Say this"
    assert one_word_changed("Hi!") == "Hi! again"


def test_the_packaged_suite_has_a_variant_for_every_prompt():
    asked = load(None)
    assert len(asked) == 4
    for a in asked:
        changed = [(x, y) for x, y in zip(a.text.split(), a.changed.split()) if x != y]
        assert len(a.text.split()) == len(a.changed.split()) and len(changed) == 1, a.id


def test_the_memory_suite_runs_alone():
    r = specchat("bench", "--suites", "memory,chat", "--pair", "no-such-pair")
    assert r.returncode == 2
    assert "error: the memory suite runs on its own" in r.stderr and "hint: pass --suites memory alone" in r.stderr
