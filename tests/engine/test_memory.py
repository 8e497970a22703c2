"""The memory drafter: what it holds, what it proposes, what it forgets, and
that drafting from it never changes a reply (fake model, real SQLite)."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest
from scipy.stats import chisquare

from specchat.decoding.sampling import SamplingParams
from specchat.drafters.memory import CAPACITY, KEY_N, MIN_MATCH, Memory, MemoryDrafter, MemoryIndex
from specchat.drafters.ngram import NgramDrafter
from specchat.engine.loop import Engine
from specchat.history.database import History, Message
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from tests.support.clock import steady_timer
from tests.support.engine import PROMPT, exact_second_token_distribution
from tests.support.fake_model import FakeModel

QUESTION = "the cat sat on the mat and then it ran"


def session(drafter: str = "memory", temp: float = 0.0) -> ChatSession:
    model = FakeModel(seed=0, n_vocab=120)  # its greedy replies repeat no two tokens: no copy within a reply
    sampling = SamplingParams(temp=temp, seed=7)
    return ChatSession(model, decode=DecodeOptions(drafter, 16, sampling, baseline_every=0, max_tokens=60))


# --- the index: bound, cost, eviction --------------------------------------------------------


def test_ten_thousand_replies_stay_inside_the_bound_and_a_proposal_stays_cheap():
    rng = np.random.default_rng(0)
    index = MemoryIndex()
    replies = [rng.integers(1, 8, 300).tolist() for _ in range(10_000)]  # 3M tokens, a small vocabulary: many sightings
    for i, reply in enumerate(replies):
        index.add(reply, owner=i)
    assert index.end == 10_000 * 301 > CAPACITY  # more was offered than the ring holds
    assert CAPACITY - 10_000 < index.held <= CAPACITY
    assert index.tokens.nbytes + index.prev.nbytes + index.head.nbytes <= 48 * 2**20
    assert 0 not in index.runs  # the oldest reply was evicted whole; the newest are kept
    assert 9_999 in index.runs
    context = replies[9_999][:40]
    match, tokens = index.candidate(context, 16)
    assert match == 40 and tokens == replies[9_999][40 : 40 + len(tokens)]
    costs = []
    for probe in [context, rng.integers(1, 8, 200).tolist()] * 100:
        t0 = time.perf_counter()
        index.candidate(probe, 16)
        costs.append(time.perf_counter() - t0)
    assert statistics.median(costs) < 0.3e-3  # a cost bound, not a speed claim


def test_the_newest_reply_is_copied_and_a_weak_match_drafts_nothing():
    memory = Memory(tokenize=lambda text: [])
    drafter = MemoryDrafter(NgramDrafter(), memory)
    reply = list(range(100, 140))
    memory.offer([1, 2, 3, *reply])
    drafter.begin([50])
    assert drafter.propose([60, 61, 1, 2, 3, *reply[:12]], 16).tokens == reply[12:27]  # match 15: 15 tokens
    assert drafter.propose([60, 61, *reply[:12]], 16).source == "memory"
    short = [70, 71, *reply[: MIN_MATCH - 1]]
    assert memory.candidate(short, 16)[0] == MIN_MATCH - 1 >= KEY_N
    fresh = MemoryDrafter(NgramDrafter(), memory)
    fresh.begin(short)
    assert fresh.propose(short, 16).tokens == []  # known, but too weak to draft


def test_two_replies_that_part_ways_draft_only_up_to_the_parting():
    memory = Memory(tokenize=lambda text: [])
    shared = list(range(200, 220))
    memory.offer([*shared, 1, 2, 3, 4, 5, 6])
    memory.offer([*shared, 1, 2, 9, 9, 9, 9])
    memory.absorb()
    assert memory.candidate(shared, 16) == (20, [1, 2])


# --- forgetting ----------------------------------------------------------------------------
def test_a_fill_still_running_never_brings_back_what_was_forgotten_or_cleared_since_it_read_the_history():
    memory = Memory(tokenize=lambda text: [])
    ticket = memory.ticket()  # the fill reads the history here, then tokenizes on its thread
    memory.offer(list(range(10, 30)), owner=7, ticket=ticket)
    memory.forget(7)  # the conversation is deleted while the fill runs
    memory.offer(list(range(30, 50)), owner=7, ticket=ticket)  # the fill's later reply of it
    memory.offer(list(range(50, 70)), owner=8, ticket=ticket)
    memory.absorb()
    assert list(memory.index.runs) == [8]
    assert not memory.cleared_since(ticket)
    memory.clear()  # F10 off, then on: a new fill takes over
    memory.offer(list(range(70, 90)), owner=8, ticket=ticket)
    memory.absorb()
    assert memory.cleared_since(ticket) and memory.index.runs == {}
    memory.offer(list(range(70, 90)), owner=9)  # the chat's own reply, no ticket: kept
    memory.absorb()
    assert list(memory.index.runs) == [9]





def test_deleting_a_conversation_removes_its_ngrams_from_the_memory(tmp_path):
    history = History(tmp_path / "history.sqlite3")
    kept = history.record("fake", "a question kept", Message("assistant", "the cat sat on the mat and then it ran"))
    gone = history.record("fake", "a question gone", Message("assistant", "a dog who was very big ran to see code"))
    s = session()
    history.on_delete.append(s.memory.forget)
    s.remember(history.replies())
    s.memory.absorb()
    drafter = s.drafters.get("memory")
    tokenize = s.memory.tokenize
    dog, cat = tokenize("a dog who was very big ran to see code"), tokenize("the cat sat on the mat and then it ran")
    assert drafter.propose([1, *dog[:10]], 16).tokens == dog[10:20]
    assert drafter.propose([1, *cat[:10]], 16).tokens == cat[10:20]
    held = s.memory.held
    history.delete(gone)
    s.memory.absorb()  # a turn's begin takes the deletion in
    assert drafter.propose([1, *dog[:10]], 16).tokens == []
    assert s.memory.index.candidate([1, *dog[:10]], 16) is None
    assert drafter.propose([1, *cat[:10]], 16).tokens == cat[10:20]
    assert s.memory.held < held and set(s.memory.index.runs) == {kept}
    history.close()


def test_turning_the_memory_off_empties_it():
    s = session()
    s.reply(QUESTION)
    assert s.status().memory > 0
    s.set_memory(False)
    s.clear()
    turn = s.reply(QUESTION)
    assert turn.stats.memory_accepted == 0 and s.status().memory is None


# --- the reply never changes ---------------------------------------------------------------


@pytest.mark.parametrize("drafter", ["memory", "auto"])
def test_a_question_asked_again_is_drafted_from_memory_and_the_reply_is_plain_decodings(drafter, monkeypatch):
    steady_timer(monkeypatch)  # auto prices the copy on timed decodes: a busy machine must not decide it
    plain = session("off")
    expected = plain.reply(QUESTION).tokens
    s = session(drafter)
    first = s.reply(QUESTION)
    s.clear()  # a new conversation: the n-gram index starts again, the memory stays
    again = s.reply(QUESTION)
    assert first.tokens == again.tokens == expected
    assert again.stats.memory_accepted >= len(expected) // 2
    assert again.stats.memory_held == s.memory.held > len(expected)
    assert any(r.drafter == "memory" for r in again.rounds)


def test_a_regenerated_reply_is_drafted_from_the_one_it_replaced():
    s = session("memory")
    first = s.reply(QUESTION)
    again = s.regenerate()
    assert again.tokens == first.tokens
    assert again.rounds[0].drafter == "memory" and len(again.rounds[0].accepted) == 16


def test_sampling_with_memory_drafts_matches_the_target_distribution():
    sp = SamplingParams(temp=1.0)
    model = FakeModel(seed=4, n_vocab=12, sharpness=1.5)
    memory = Memory(tokenize=lambda text: [])
    memory.offer([*PROMPT, 3, 4, 5, 6])  # every turn starts with a long match: a 3-token draft
    runs, drafted = 3000, 0
    counts = np.zeros(model.n_vocab)
    for seed in range(runs):
        sps = SamplingParams(temp=1.0, seed=seed)
        turn = Engine(model, MemoryDrafter(NgramDrafter(), memory), k=3, sampling=sps, baseline_every=0).generate(
            PROMPT, 4
        )
        model.truncate(0)
        drafted += turn.stats.drafted
        if len(turn.tokens) >= 2:
            counts[turn.tokens[1]] += 1
    assert drafted >= runs * 3  # the memory drafted in every turn
    expected = exact_second_token_distribution(model, sp)
    expected = expected / expected.sum() * counts.sum()
    support = expected > 0
    assert chisquare(counts[support], expected[support]).pvalue > 0.001


def test_hybrid_takes_the_memory_where_its_match_is_longer():
    plain = session("off").reply(QUESTION).tokens
    model = FakeModel(seed=0, n_vocab=120)
    s = ChatSession(model, lambda: FakeModel(seed=1, n_vocab=120), DecodeOptions(drafter="hybrid", k=4, max_tokens=60))
    s.reply(QUESTION)
    s.clear()
    again = s.reply(QUESTION)
    assert again.tokens == plain
    assert again.rounds[0].drafter == "memory" and again.stats.memory_accepted >= 40


def test_memory_tokens_have_their_own_colour_in_every_mode_and_theme():
    from specchat.decoding.stats import Round
    from specchat.display import round_spans
    from specchat.themes import BUILTIN, span_style

    for theme in BUILTIN:
        v = theme.variables
        others = {v[n] for n in ("spec-accepted", "spec-rejected", "spec-ngram", "spec-model", "spec-grammar")}
        assert v["spec-memory"] not in others, theme.name
    for mode in ("memory", "hybrid", "auto"):
        r = Round(accepted=[6], rejected=[], target=7, drafter="memory", plain=False, mode=mode, accepted_text=" x")
        [span] = [s for s in round_spans(r) if s["kind"] == "accepted"]
        assert span_style(span["kind"], span["drafter"]) == "$spec-memory"


def test_run_with_a_history_it_cannot_read_or_write_still_prints_the_reply(tmp_path, capsys):
    import json

    from specchat.cli.run import run_once

    history = History(tmp_path / "history.sqlite3")
    history.db.close()  # every read and write now fails, as a database gone bad under specchat would
    session = ChatSession(FakeModel(), decode=DecodeOptions(drafter="memory", k=4, max_tokens=20))
    assert run_once(session, "hello there", json_out=True, identical=False, history=history) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["text"] == session.messages[-1]["content"] != ""
    assert err.splitlines() == [
        "warning: cannot read the history (Cannot operate on a closed database.); this reply drafts without it",
        "warning: cannot save this turn in the history (Cannot operate on a closed database.)",
    ]


def test_the_grammars_forced_tokens_in_a_hybrid_round_are_not_counted_as_the_memorys():
    from specchat.decoding.stats import Round, summarize

    mixed = Round(accepted=[1, 2, 3, 4, 5], rejected=[9], target=6, drafter="memory", plain=False, forced=2, mode="hybrid")
    assert summarize([mixed], 1.0).memory_accepted == 3
