"""A drafter that fails mid-reply: the reply goes on, plainly, and says so.

Whichever hook raises (begin, propose, settle, observe), the engine decodes
the rest of the turn with plain steps, keeps one line that names the
drafter and its error, and the turn ends as it would have (here, greedy:
the very tokens plain decoding gives). The next turn drafts with it again.
In the chat the reply is shown and stored, with the line as a notice.
"""

from __future__ import annotations

import pytest

from specchat.drafters.base import Draft, Drafter
from specchat.drafters.ngram import NgramDrafter
from specchat.engine.loop import Engine
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from tests.support.engine import PROMPT, KVChecker, PerfectDrafter, plain_tokens
from tests.support.fake_model import FakeModel
from tests.support.tui import FakeModels, make_app, notices, ready, send


class Breaks(PerfectDrafter):
    """Right every time, until its `hook` is called for the `at`-th time."""

    name = "breaks"

    def __init__(self, model: FakeModel, hook: str, at: int = 3) -> None:
        super().__init__(model)
        self.hook, self.at, self.calls = hook, at, {}

    def _count(self, hook: str) -> None:
        self.calls[hook] = self.calls.get(hook, 0) + 1
        if hook == self.hook and self.calls[hook] == self.at:
            raise IndexError("list index out of range")

    def begin(self, context):
        self._count("begin")

    def propose(self, context, k):
        self._count("propose")
        return super().propose(context, k)

    def settle(self, draft, n_accepted):
        self._count("settle")
        super().settle(draft, n_accepted)

    def observe(self, committed):
        self._count("observe")


@pytest.mark.parametrize("hook", ["begin", "propose", "settle", "observe"])
def test_a_drafter_that_raises_leaves_the_reply_to_plain_steps_and_one_line(hook):
    model = FakeModel(seed=1)
    drafter = Breaks(model, hook, at=1 if hook == "begin" else 3)
    engine = Engine(model, drafter, k=4)
    turn = engine.generate(PROMPT, 60, on_round=KVChecker(model, PROMPT))
    assert turn.tokens == plain_tokens(1, 60) and turn.finish == "length"  # the whole reply, as plain decoding
    assert turn.drafter_failed == (
        "drafter 'breaks' failed (IndexError: list index out of range); this reply went on without drafting"
    )
    calls = dict(drafter.calls)
    assert calls[hook] == drafter.at  # it sat out the rest of the turn: never called again
    assert all(r.plain for r in turn.rounds[-20:])
    assert engine.drafter is drafter  # and drafts again from the next turn
    drafter.hook = ""
    again = engine.generate(PROMPT, 30)
    assert not again.drafter_failed and any(not r.plain for r in again.rounds)


def test_a_switch_the_user_asks_for_after_a_failure_is_kept():
    model = FakeModel(seed=1)
    engine = Engine(model, Breaks(model, "propose", at=2), k=4)
    chosen = NgramDrafter(min_match=1)
    switched = []

    def on_round(r):
        if engine.failure and not switched:
            switched.append(True)
            engine.switch_drafter(chosen)

    turn = engine.generate(PROMPT, 60, on_round=on_round)
    assert turn.tokens == plain_tokens(1, 60) and turn.drafter_failed
    assert engine.drafter is chosen


class Erring(FakeModel):
    """A target whose decode fails at its `at`-th call (a device lost, say)."""

    def __init__(self, at: int, **kw) -> None:
        super().__init__(**kw)
        self.at, self.calls = at, 0

    def eval(self, tokens, n_logits=1):
        self.calls += 1
        if self.calls == self.at:
            raise RuntimeError("llama_decode failed (-3)")
        super().eval(tokens, n_logits)


def test_a_turn_that_fails_after_its_drafter_did_leaves_the_drafter_for_the_next():
    model = Erring(at=12, seed=1)
    drafter = Breaks(model, "propose", at=2)
    engine = Engine(model, drafter, k=4)
    with pytest.raises(RuntimeError):
        engine.generate(PROMPT, 60)
    drafter.hook = ""
    model.at = 0  # the device is back
    turn = engine.generate(PROMPT, 30)
    assert engine.drafter is drafter and not turn.drafter_failed and any(not r.plain for r in turn.rounds)


class Raising(Drafter):
    name = "ngram"

    def propose(self, context, k):
        if len(context) > len(PROMPT) + 5:
            raise IndexError("list index out of range")
        return Draft()


def test_a_failed_drafter_leaves_the_session_s_turn_whole():
    model = FakeModel(seed=1)
    session = ChatSession(model, decode=DecodeOptions(drafter="ngram", k=4, max_tokens=40))
    session.drafters._made["ngram"] = session.engine.drafter = Raising()
    turn = session.reply("hello")
    assert turn.drafter_failed.startswith("drafter 'ngram' failed (IndexError")
    assert session.messages[-1] == {"role": "assistant", "content": turn.text} and turn.text


async def test_the_chat_shows_and_stores_a_reply_whose_drafter_failed(tmp_path, specchat_home):
    app = make_app(tmp_path, models=FakeModels(max_tokens=40), drafter="ngram", k=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        session = app.chat.session
        session.drafters._made["ngram"] = session.engine.drafter = Raising()
        reply = await send(pilot, "hello")
        assert reply.text and reply.text == session.messages[-1]["content"]
        assert any(n.startswith("drafter 'ngram' failed (IndexError") for n in notices(app))
        stored = app.conversation.history.load(app.conversation.id).messages
        assert [m.role for m in stored] == ["user", "assistant"] and stored[-1].content == reply.text
