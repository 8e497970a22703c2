"""The engine on real llama.cpp with the tiny pair (SmolLM2-135M drafting for itself)."""

from __future__ import annotations

import threading

import pytest

from specchat.decoding.stats import first_difference
from specchat.drafters.base import Draft, Drafter
from specchat.session.loader import open_session
from specchat.session.options import DecodeOptions, LoadOptions

pytestmark = pytest.mark.real

CODE_PROMPT = (
    "Rewrite this function with the variable `total` renamed to `acc`. Reply with code only.\n\n"
    "def sum_squares(values):\n"
    "    total = 0\n"
    "    for v in values:\n"
    "        total += v * v\n"
    "    return total\n"
)


@pytest.fixture(scope="module")
def session(tiny_pair):
    target, draft = tiny_pair
    s = open_session(
        LoadOptions(target=str(target), draft=str(draft), ctx=2048),
        DecodeOptions(drafter="off", k=4, max_tokens=64),
    )
    yield s
    s.close()


def fresh(session, drafter: str, k: int = 4):
    session.clear()
    session.set_drafter(drafter)
    session.set_k(k)
    return session


def plain_reply(session, prompt=CODE_PROMPT) -> list[int]:
    return fresh(session, "off").reply(prompt).tokens


def test_draft_equal_to_target_accepts_almost_everything(session):
    turn = fresh(session, "draft", k=4).reply(CODE_PROMPT)
    assert turn.stats.verify_rounds > 3
    assert turn.stats.acceptance_rate >= 0.95
    # Every verify round but one that ends the reply on EOS produces k + 1 tokens.
    full = [len(r.committed) for r in turn.rounds if not r.plain and not r.eos]
    assert sum(full) / len(full) >= 0.95 * 5, turn.stats


@pytest.mark.parametrize("drafter", ["draft", "ngram", "hybrid"])
def test_speculative_greedy_output_equals_plain(session, drafter):
    expected = plain_reply(session)
    got = fresh(session, drafter).reply(CODE_PROMPT).tokens
    assert first_difference(got, expected) is None, f"diverged at token {first_difference(got, expected)}"


class WrongDrafter(Drafter):
    """Proposes tokens the target will reject: forces a rollback every round."""

    name = "wrong"

    def propose(self, context, k):
        return Draft([context[-1]] * k, source=self.name)


def test_rollback_after_rejections_continues_correctly(session):
    expected = plain_reply(session)
    s = fresh(session, "off")
    s.engine.switch_drafter(WrongDrafter())
    turn = s.reply(CODE_PROMPT)
    s.set_drafter("off")
    assert sum(len(r.rejected) for r in turn.rounds) > 10
    assert first_difference(turn.tokens, expected) is None


def test_multi_turn_prefill_counts_only_new_tokens(session):
    s = fresh(session, "ngram")
    s.target.truncate(0)  # forget earlier tests' conversations
    first = s.reply("Write a haiku about caching.")
    assert first.stats.prefill_tokens == len(first.prompt) - 1
    second = s.reply("Now one about rollback.")
    new_tokens = len(second.prompt) - len(first.prompt) - len(first.tokens)
    # Only the end of the last reply, the new message and the template around it.
    assert second.stats.prefill_tokens <= new_tokens + 4
    assert second.stats.prefill_tokens < len(second.prompt) // 2


def test_cancel_mid_turn_leaves_a_consistent_context(session):
    s = fresh(session, "draft")
    cancel = threading.Event()
    seen = []

    def on_round(r):
        seen.append(r)
        if len(seen) == 3:
            cancel.set()

    turn = s.reply(CODE_PROMPT, on_round=on_round, cancel=cancel)
    assert turn.finish == "cancelled"
    assert len(turn.rounds) == 3
    assert s.target.tokens == (turn.prompt + turn.tokens)[:-1]
    assert s.messages[-1] == {"role": "assistant", "content": turn.text}
    follow = s.reply("Thanks.")
    assert follow.tokens and follow.stats.prefill_tokens < len(follow.prompt) // 2


def test_t_llama_splits_the_decode_time_between_llama_cpp_and_specchat(session):
    """t_llama: seconds inside llama.cpp's calls during the decode, the draft model's included."""
    off = fresh(session, "off").reply(CODE_PROMPT).stats
    assert 0 < off.t_llama < off.t_decode
    assert off.t_llama > 0.7 * off.t_plain  # a plain step is mostly llama.cpp's work
    draft = fresh(session, "draft", k=4).reply(CODE_PROMPT).stats
    # Drafting is mostly the draft model's decodes: without its timer this would be about a fifth.
    assert 0.7 * (draft.t_draft + draft.t_verify + draft.t_plain) < draft.t_llama < draft.t_decode
