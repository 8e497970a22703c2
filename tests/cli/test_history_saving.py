"""The history is the user's record: the chat never stops saving. A
conversation deleted while open goes on as a new one, a locked file is
waited out off the UI thread, a failed turn leaves no message behind, a
message that never got its reply stays out of the prompt, and SIGTERM or
SIGHUP end the chat as ctrl+q does, terminal restored."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time

import pytest

from specchat.errors import SpecchatError
from specchat.history.database import History, Message
from specchat.session.dialogue import Dialogue, answered
from specchat.tui.chat.widgets import AssistantMessage, PromptInput
from tests.support.tui import FakeModels, enter, make_app, notices, ready, saved, send, wait_until


def stored(history: History) -> list[list[tuple[str, str]]]:
    """Every conversation's (role, content) rows, oldest conversation first."""
    return [[(m.role, m.content) for m in history.load(c.id).messages] for c in reversed(history.list())]


async def test_deleting_the_open_conversation_in_f3_starts_a_new_one_with_the_next_message(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        first = await send(pilot, "hello")
        history = app.conversation.history
        await pilot.press("f3")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "HistoryScreen")
        await pilot.press("d")  # the open conversation, the only one: a first d asks
        assert len(history.list()) == 1 and notices(app)[-1] == "press d again to delete this conversation; it cannot be undone"
        await pilot.press("d")
        await pilot.press("escape")
        assert history.list() == []
        second = await send(pilot, "again")
        assert stored(history) == [[("user", "again"), ("assistant", second.text)]]
        assert first.text and not [n for n in notices(app) if "save" in n]


async def test_f3_never_deletes_the_conversation_a_reply_is_being_written_to(tmp_path):
    """Deleted mid-reply, its question went with it and the reply came back
    alone, as a conversation of its own."""
    app = make_app(tmp_path, models=FakeModels(step_seconds=0.03, max_tokens=150), drafter="off")  # 4.5 s a reply
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await enter(pilot, "and a long one")
        await wait_until(pilot, lambda: app.chat.generating and app.conversation.id is not None)
        await pilot.press("f3")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "HistoryScreen")
        await pilot.press("d", "d")
        assert notices(app)[-1].startswith("a reply is being written to this conversation")
        await pilot.press("escape", "escape")  # the dialog, then the reply: stopped, it is kept as it stands
        await wait_until(pilot, lambda: not app.chat.generating)
        saved(app)
        reply = app.query("AssistantMessage").last()
        assert [[role for role, _ in c] for c in stored(app.conversation.history)] == [["user", "assistant"] * 2]
        assert stored(app.conversation.history)[0][-1] == ("assistant", reply.text)


async def test_a_conversation_deleted_by_another_process_goes_on_as_a_new_one(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        other = sqlite3.connect(tmp_path / "history.sqlite3")
        other.execute("PRAGMA foreign_keys=ON")
        with other:
            other.execute("DELETE FROM conversations")
        other.close()
        reply = await send(pilot, "again")
        assert stored(app.conversation.history) == [[("user", "again"), ("assistant", reply.text)]]
        await pilot.pause()
        assert notices(app)[-1] == "this conversation was deleted meanwhile; it goes on as a new one in the history"
        await send(pilot, "and again")  # it goes on in the new conversation, without another word
        assert [len(c) for c in stored(app.conversation.history)] == [4]
        assert notices(app).count("this conversation was deleted meanwhile; it goes on as a new one in the history") == 1


async def test_a_history_locked_by_another_program_is_waited_out_off_the_ui_thread(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        other = sqlite3.connect(tmp_path / "history.sqlite3", isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")  # another program holds the file
        try:
            await enter(pilot, "hello")
            await wait_until(pilot, lambda: not app.chat.generating and app.query("AssistantMessage").last().stats)
            # The reply ended and shows while its saves still wait on the lock.
            assert app.conversation.writer.jobs.unfinished_tasks > 0
            await wait_until(pilot, lambda: any("locked by another program" in n for n in notices(app)))
        finally:
            other.execute("ROLLBACK")
            other.close()
        saved(app)
        reply = app.query("AssistantMessage").last()
        assert stored(app.conversation.history) == [[("user", "hello"), ("assistant", reply.text)]]
        await wait_until(pilot, lambda: notices(app)[-1] == "the history is free again: saved")


class FailingModels(FakeModels):
    """A pair whose turns fail while `failing` is set (the model errs mid-reply)."""

    failing = True

    def open(self, pair, drafter, k, settings):
        session = super().open(pair, drafter, k, settings)
        generate = session._generate

        def maybe_fail(*args):
            if self.failing:
                raise SpecchatError("the model failed", hint="try again")
            return generate(*args)

        session._generate = maybe_fail
        return session


async def test_a_failed_turn_leaves_no_message_in_the_history_or_the_prompt(tmp_path):
    models = FailingModels()
    app = make_app(tmp_path, models=models)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        for text in ("one", "two"):
            failed = await send(pilot, text)
            assert failed.stats == {"drafters": []}
        assert stored(app.conversation.history) == []
        assert app.chat.session.messages == []
        models.failing = False
        reply = await send(pilot, "three")
        assert stored(app.conversation.history) == [[("user", "three"), ("assistant", reply.text)]]
        assert [m["role"] for m in app.chat.session.messages] == ["user", "assistant"]


async def test_a_message_too_long_for_the_context_loses_nothing(tmp_path):
    """The prompt drops the oldest turns to fit; where even the new message
    alone does not fit, the turn fails and the conversation is as it was:
    the model still sees the earlier turns, and the message is back in the
    prompt, its file with it, to shorten and send again."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        first = await send(pilot, "one")
        before = app.chat.session.messages
        attached = tmp_path / "notes.txt"
        attached.write_text("a note\n")
        app.chat.attach_file(str(attached))
        huge = "z" * (app.chat.session.n_ctx + 10)
        failed = await send(pilot, huge)
        assert failed.stats == {"drafters": []}
        assert app.chat.session.messages == before  # the earlier turn is still in the prompt
        assert app.query_one(PromptInput).text == huge
        assert [f.path for f in app.chat.attachments] == [attached]
        assert any("your message is back in the prompt" in n for n in notices(app))
        assert stored(app.conversation.history) == [[("user", "one"), ("assistant", first.text)]]


async def test_a_regenerate_that_fails_keeps_the_last_reply_on_screen_in_the_history_and_the_prompt(tmp_path):
    models = FailingModels()
    models.failing = False
    app = make_app(tmp_path, models=models)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        first = await send(pilot, "one")
        before = app.chat.session.messages
        models.failing = True
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: any("the model failed" in n for n in notices(app)))
        await wait_until(pilot, lambda: not app.chat.generating)
        saved(app)
        shown = [r for r in app.query(AssistantMessage) if r.display]
        assert [r.text for r in shown] == [first.text] and len(app.query(AssistantMessage)) == 1
        assert app.chat.session.messages == before
        assert stored(app.conversation.history) == [[("user", "one"), ("assistant", first.text)]]
        assert any(n.endswith("; the last reply is kept") for n in notices(app))
        models.failing = False
        await pilot.press("ctrl+r")  # a regenerate that succeeds replaces it, on screen and stored
        await wait_until(pilot, lambda: len(app.query(AssistantMessage)) == 1 and app.query(AssistantMessage).last() is not shown[0])
        await wait_until(pilot, lambda: not app.chat.generating)
        saved(app)
        again = app.query(AssistantMessage).last()
        assert stored(app.conversation.history) == [[("user", "one"), ("assistant", again.text)]]


async def test_a_reply_that_never_came_stays_out_of_the_prompt_when_the_chat_goes_on(tmp_path):
    """A process killed mid-reply left the user's message without its reply:
    it shows, and the prompt keeps user and assistant alternating."""
    history = History(tmp_path / "history.sqlite3")
    conv = history.new_conversation("killed", "fake-pair")
    for role, text in (("user", "first"), ("assistant", "an answer"), ("user", "killed mid-reply")):
        history.add_message(conv, Message(role, text))
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.chat_screen.load_conversation(conv)
        assert [m["content"] for m in app.chat.session.messages] == ["first", "an answer"]
        reply = await send(pilot, "and now?")
        assert [m["role"] for m in app.chat.session.messages] == ["user", "assistant", "user", "assistant"]
        assert stored(app.conversation.history)[0][-2:] == [("user", "and now?"), ("assistant", reply.text)]


def test_answered_keeps_user_and_assistant_alternating():
    u, a = ({"role": "user", "content": "u"}, {"role": "assistant", "content": "a"})
    u2 = {"role": "user", "content": "u2"}
    assert answered([u, a, u, u2, a]) == [u, a, u2, a]
    assert answered([u, a, u2]) == [u, a]
    assert answered([u, u2]) == []
    assert answered([]) == []


def test_a_turn_that_raises_leaves_the_messages_as_they_were():
    class Broken(Dialogue):
        def _generate(self, on_round, cancel, on_idle):
            raise KeyboardInterrupt

    d = Broken()
    d.replace_messages([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    with pytest.raises(KeyboardInterrupt):
        d.reply("next")
    assert d.messages == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]


CHAT_ON_FAKES = """
import sys
sys.path[:0] = [{root!r}, {tests!r}]
from tests.support.tui import FakeModels
import specchat.tui.state.models
specchat.tui.state.models.Models = lambda target, draft, extra_bufts: FakeModels(step_seconds=0.05, max_tokens=2000)
from specchat.cli.main import main
sys.argv = ["specchat", "chat"]
main()
"""


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_mid_reply_keeps_the_reply_and_restores_the_terminal(tmp_path, number):
    """The chat in a real terminal (a pty), killed mid-reply: the partial reply
    is saved as a stopped one, and the alternate screen, mouse reporting and
    the hidden cursor are all undone before the process ends."""
    import pty

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = CHAT_ON_FAKES.format(root=root, tests=os.path.join(root, "tests"))
    (tmp_path / "home" / "config").mkdir(parents=True)
    (tmp_path / "home" / "config" / "settings.toml").write_text('drafter = "ngram"\n')  # no cost curve to measure first
    pid, fd = pty.fork()
    if pid == 0:  # the child: `specchat chat` on the pty, on the fake pair
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30",
                           "SPECCHAT_HOME": str(tmp_path / "home")})
        os.execv(sys.executable, [sys.executable, "-c", code])
    out = b""

    def read_until(predicate, timeout: float) -> None:
        nonlocal out
        end = time.monotonic() + timeout
        while not predicate() and time.monotonic() < end:
            try:
                out += os.read(fd, 65536)
            except OSError:
                return

    read_until(lambda: b"ctx 0/" in out, 60)  # the status bar: the pair is loaded
    os.write(fd, b"hello\r")
    read_until(lambda: b"tok/s" in out[-4000:] and out.count(b"hello") >= 1, 5)
    time.sleep(1.0)  # well into the reply (2000 tokens at 50 ms each)
    os.kill(pid, number)
    read_until(lambda: False, 8)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 128 + number, out[-3000:]
    tail = out[out.rfind(b"\x1b[?1049h"):]
    assert b"\x1b[?1049l" in tail  # the alternate screen left
    assert b"\x1b[?1000l" in tail or b"\x1b[?1003l" in tail  # mouse reporting off
    assert b"\x1b[?25h" in tail  # the cursor shown again
    history = History(tmp_path / "home" / "data" / "history.sqlite3")
    (conv,) = history.list()
    user, reply = history.load(conv.id).messages
    assert (user.content, reply.finish) == ("hello", "cancelled") and reply.content
