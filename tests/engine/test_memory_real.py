"""The memory on a real model: `specchat run` records its turn and the next
run drafts from it; a regenerated reply is drafted from the one it replaced."""

from __future__ import annotations

import json

import pytest

from specchat.drafters.memory import PROMPT_TAIL
from specchat.history.database import History
from specchat.session.loader import open_session
from specchat.session.options import DecodeOptions, LoadOptions
from tests.support.cli import specchat

QUESTION = "Write a short poem about a lighthouse keeper and the sea."


def run_json(home, *args: str) -> dict:
    r = specchat("run", *args, "--json", env={"SPECCHAT_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.real
def test_run_records_its_turn_and_the_next_run_drafts_from_it(tiny_pair, tmp_path):
    target = str(tiny_pair[0])
    first = run_json(tmp_path, QUESTION, "--target", target, "--drafter", "memory", "--max-tokens", "40")
    history = History(tmp_path / "data" / "history.sqlite3")
    [conv] = history.list()
    stored = history.load(conv.id)
    assert [(m.role, m.content) for m in stored.messages] == [("user", QUESTION), ("assistant", first["text"])]
    assert stored.messages[1].stats["tokens"] == 40 and stored.messages[1].stats["drafters"] == ["memory"]
    assert "".join(s["text"] for s in stored.messages[1].spans if s["kind"] != "rejected") == first["text"]
    assert first["stats"]["memory_accepted"] == 0
    again = run_json(tmp_path, QUESTION, "--target", target, "--drafter", "memory", "--max-tokens", "40")
    assert again["text"] == first["text"]
    assert again["stats"]["memory_accepted"] >= 30  # drafted from the first run's reply
    assert len(history.list()) == 2
    quiet = run_json(
        tmp_path, QUESTION, "--target", target, "--drafter", "memory", "--max-tokens", "40", "--no-history"
    )
    # Nothing read: the memory holds this turn alone (its reply behind its prompt's tail).
    assert quiet["stats"]["memory_accepted"] == 0 and quiet["stats"]["memory_held"] <= 40 + PROMPT_TAIL
    assert len(history.list()) == 2  # nothing written
    # memory = false in the settings: the turn is recorded, nothing is drafted from the history.
    (tmp_path / "config").mkdir(parents=True, exist_ok=True)
    (tmp_path / "config" / "settings.toml").write_text("memory = false\n")
    off = run_json(tmp_path, QUESTION, "--target", target, "--drafter", "memory", "--max-tokens", "40")
    assert off["stats"]["memory_accepted"] == 0 and off["stats"]["memory_held"] <= 40 + PROMPT_TAIL
    assert len(history.list()) == 3
    # A drafter that never reads the memory has none filled (the history is not tokenized for it).
    (tmp_path / "config" / "settings.toml").write_text("memory = true\n")
    plain = run_json(tmp_path, QUESTION, "--target", target, "--drafter", "ngram", "--max-tokens", "40")
    assert plain["stats"]["memory_held"] <= 40 + PROMPT_TAIL and len(history.list()) == 4
    history.close()


@pytest.mark.real
def test_a_regeneration_at_temperature_zero_is_drafted_from_the_replaced_reply(tiny_pair):
    target = str(tiny_pair[0])
    alphas = {}
    for drafter in ("ngram", "memory"):
        session = open_session(
            LoadOptions(target=target),
            DecodeOptions(drafter=drafter, k=16, baseline_every=0, max_tokens=48),
        )
        first = session.reply(QUESTION)
        again = session.regenerate()
        assert again.tokens == first.tokens
        alphas[drafter] = again.stats.alpha
        session.close()
    assert alphas["memory"] >= 4 * alphas["ngram"], alphas
