"""Nothing outlives its terminal, and no stream is without limits.

The chat in a real pty, on the fake pair, ends within 2 s of losing its
terminal (SIGHUP, or a hang-up on its input with no SIGHUP at all), within
5 s of SIGTERM whatever it is doing (measuring the cost curve, loading a
model, replying, writing to a terminal that reads nothing), and on SIGINT
with 130; a reply under way is kept as a stopped reply. `specchat run`
reads at most STDIN_MAX_BYTES of a prompt, and a stdout that takes no more
(/dev/full, closed) is one error line, the turn still in the history."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specchat.cli.run import STDIN_MAX_BYTES
from specchat.history.database import History

ROOT = Path(__file__).resolve().parents[2]
# The bounds the chat promises, and room for a busy machine on top: a chat
# that does not end stays for the whole cost curve (36 s) or load (60 s).
LOST_TERMINAL_S = 2.0
SIGTERM_S = 5.0
SLACK_S = 3.0

CHAT = """
import sys, time
sys.path[:0] = [{root!r}]
from tests.support.tui import FakeModels
import specchat.tui.state.models

class Models(FakeModels):
    def open(self, *args):
        time.sleep({load_s})  # a model loading: llama.cpp cannot be stopped halfway
        return super().open(*args)

specchat.tui.state.models.Models = lambda target, draft, extra_bufts: Models(step_seconds={step_s}, max_tokens=2000)
from specchat.cli.main import main
sys.argv = ["specchat", "chat"]
main()
"""


class Chat:
    """`specchat chat` on a pty: with a controlling terminal (pty.fork, as a
    terminal window starts it) or, `session=False`, with the pty as its
    stdin and stdout alone, so a hang-up sends no SIGHUP."""

    def __init__(self, home: Path, drafter: str, step_s: float, load_s: float = 0.0, session: bool = True) -> None:
        (home / "config").mkdir(parents=True)
        (home / "config" / "settings.toml").write_text(f'drafter = "{drafter}"\n')
        self.home = home
        code = CHAT.format(root=str(ROOT), load_s=load_s, step_s=step_s)
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30", "SPECCHAT_HOME": str(home)}
        self.out = b""
        self.status: int | None = None
        if session:
            self.pid, self.fd = pty.fork()
            if self.pid == 0:  # the child: the chat, on the pty
                os.execve(sys.executable, [sys.executable, "-c", code], env)
            self.proc = None
        else:
            self.fd, follower = pty.openpty()
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code], stdin=follower, stdout=follower, stderr=follower,
                env=env, start_new_session=True,
            )  # fmt: skip
            os.close(follower)
            self.pid = self.proc.pid

    def read_until(self, text: bytes, timeout: float = 60.0, tail: int = 0) -> bool:
        """Read the screen until `text` shows (in its last `tail` bytes, if given)."""
        end = time.monotonic() + timeout
        while text not in self.out[-tail:] and time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    self.out += os.read(self.fd, 65536)
                except OSError:
                    return False
        return text in self.out[-tail:]

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def replying(self) -> None:
        assert self.read_until(b"ctx 0/"), self.out[-2000:]  # the status bar: the pair is loaded
        self.type(b"hello\r")
        assert self.read_until(b"tok/s", 30, tail=4000), self.out[-2000:]
        time.sleep(1.0)  # well into the reply (2000 tokens at 50 ms each)

    def hang_up(self) -> None:
        """The terminal goes: its window closed, tmux killed."""
        os.close(self.fd)
        self.fd = -1

    def ended_within(self, seconds: float) -> None:
        """Wait for the chat to end, its exit status in `status`; killed, and
        the test failed, if it has not within `seconds`."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.fd >= 0:
                self.read_until(b"\0never", 0.05)  # keep the terminal read, as a terminal does
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return
            time.sleep(0.02)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        pytest.fail(f"the chat was still running {seconds:.0f} s later")

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        if self.fd >= 0:
            os.close(self.fd)

    def stored(self) -> list[tuple[str, str, str | None]]:
        history = History(self.home / "data" / "history.sqlite3")
        try:
            return [(m.role, m.content, m.finish) for c in history.list() for m in history.load(c.id).messages]
        finally:
            history.close()


@pytest.fixture
def chat(tmp_path):
    made: list[Chat] = []

    def start(*args, **kw) -> Chat:
        made.append(Chat(tmp_path / "home", *args, **kw))
        return made[-1]

    yield start
    for c in made:
        c.close()


def partial_reply_kept(c: Chat) -> None:
    (user, reply) = c.stored()
    assert user[:2] == ("user", "hello")
    assert reply[0] == "assistant" and reply[1] and reply[2] == "cancelled"  # kept, as a stopped reply


@pytest.mark.parametrize("session", [True, False], ids=["SIGHUP", "hang-up alone"])
def test_a_terminal_that_goes_mid_reply_ends_the_chat_and_keeps_the_reply(chat, session):
    c = chat("ngram", step_s=0.05, session=session)
    c.replying()
    c.hang_up()
    c.ended_within(LOST_TERMINAL_S + SLACK_S)
    assert c.status == 128 + signal.SIGHUP
    partial_reply_kept(c)


def test_sigint_mid_reply_keeps_the_reply_and_exits_130(chat):
    c = chat("ngram", step_s=0.05)
    c.replying()
    os.kill(c.pid, signal.SIGINT)
    c.ended_within(SIGTERM_S + SLACK_S)
    assert c.status == 130
    assert c.read_until(b"\x1b[?1049l", 5)  # the terminal restored: the alternate screen left
    partial_reply_kept(c)


def test_sigterm_while_the_cost_curve_is_measured_ends_the_chat(chat):
    c = chat("auto", step_s=0.5)  # the fake's curve takes 36 s to measure
    assert c.read_until(b"measuring auto's cost curve"), c.out[-2000:]
    os.kill(c.pid, signal.SIGTERM)
    c.ended_within(SIGTERM_S + SLACK_S)
    assert c.status == 128 + signal.SIGTERM
    assert c.read_until(b"\x1b[?1049l", 5)


def test_sigterm_while_a_model_loads_ends_the_chat(chat):
    c = chat("ngram", step_s=0.05, load_s=60)
    assert c.read_until(b"loading fake-pair"), c.out[-2000:]
    os.kill(c.pid, signal.SIGTERM)
    c.ended_within(SIGTERM_S + SLACK_S)
    assert c.status == 128 + signal.SIGTERM
    assert c.stored() == []


def test_quitting_while_the_cost_curve_is_measured_ends_the_process(chat):
    """ctrl+q ends the process, not only the screen: the measurement under way stops."""
    c = chat("auto", step_s=0.5)
    assert c.read_until(b"measuring auto's cost curve"), c.out[-2000:]
    c.type(b"\x11")  # ctrl+q
    c.ended_within(SIGTERM_S + SLACK_S)
    assert c.status == 0


def test_quitting_while_a_model_loads_then_closing_the_terminal_leaves_no_process(chat):
    """ctrl+q, then the terminal goes (tmux killed): the load still under way does not keep the process."""
    c = chat("ngram", step_s=0.05, load_s=60)
    assert c.read_until(b"loading fake-pair"), c.out[-2000:]
    c.type(b"\x11")  # ctrl+q
    assert c.read_until(b"\x1b[?1049l", 10)  # the app has ended, its terminal restored
    c.hang_up()
    c.ended_within(LOST_TERMINAL_S + SLACK_S)
    assert c.status == 0


def test_sigterm_while_the_terminal_takes_no_output_ends_the_chat(chat):
    """A paused pane that reads nothing: the screen's writes block, the app's
    loop with them, and SIGTERM still ends the chat (the reply under way then
    never reaches the history; the message it answers is there)."""
    c = chat("ngram", step_s=0.05)
    c.replying()
    time.sleep(4.0)  # nothing read: the reply redraws far more than a pty holds
    os.kill(c.pid, signal.SIGTERM)
    end = time.monotonic() + SIGTERM_S + SLACK_S
    while c.status is None and time.monotonic() < end:  # still reading nothing
        pid, status = os.waitpid(c.pid, os.WNOHANG)
        c.status = os.waitstatus_to_exitcode(status) if pid else None
        time.sleep(0.05)
    assert c.status == 128 + signal.SIGTERM, "the chat was still running"
    assert c.stored()[0][:2] == ("user", "hello")


# --- `specchat run`: what stdin may hold, a stdout that takes nothing -------------------

RUN = """
import sys
sys.path[:0] = [{root!r}]
from tests.support.tui import FakeModels
from specchat.config import Settings
import specchat.session.loader
specchat.session.loader.open_session = lambda load, decode: FakeModels(max_tokens=decode.max_tokens).open(
    "fake-pair", decode.drafter, decode.k, Settings())
from specchat.cli.main import main
sys.argv = ["specchat", "run", *sys.argv[1:]]
main()
"""
NO_MODELS = {"SPECCHAT_MODELS": ""}  # nothing pulled: a prompt that gets past its checks fails at loading


def run(*args: str, stdin=None, stdout=None, input: bytes | None = None, close_stdout: bool = False, fake=True):
    """`specchat run ARGS` in its own process: on the fake pair (`fake`), or the real command."""
    command = [sys.executable, "-c", RUN.format(root=str(ROOT)), *args] if fake else [
        sys.executable, "-m", "specchat.cli.main", "run", *args]  # fmt: skip

    def limits() -> None:
        import resource

        # A stream read whole runs out of this memory, not the machine's.
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))
        if close_stdout:
            os.close(1)

    return subprocess.run(
        command, stdin=stdin, stdout=stdout if stdout is not None else subprocess.PIPE, stderr=subprocess.PIPE,
        input=input, env={**os.environ, **NO_MODELS}, timeout=120, preexec_fn=limits,
    )  # fmt: skip


def error_lines(done) -> list[str]:
    text = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    return text.splitlines()


@pytest.mark.parametrize("how", ["/dev/zero", "one byte over"])
def test_a_prompt_on_stdin_over_the_cap_is_one_line(how, tmp_path):
    if how == "/dev/zero":
        with open("/dev/zero", "rb") as zero:
            done = run("-", stdin=zero, fake=False)
    else:
        done = run("-", input=b"a" * (STDIN_MAX_BYTES + 1), fake=False)
    assert done.returncode == 2 and not done.stdout
    assert error_lines(done) == ["error: the prompt on stdin is over 4 MiB",
                                 "hint: pipe in a shorter prompt, e.g. head -c 100000 FILE | specchat run"]  # fmt: skip


def test_a_prompt_on_stdin_at_the_cap_is_read(tmp_path):
    done = run("-", input=b"a" * STDIN_MAX_BYTES, fake=False)
    assert "the prompt on stdin" not in done.stderr.decode()  # past the prompt's checks, to the model's loading


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("where", ["/dev/full", "closed"])
def test_a_stdout_that_takes_nothing_is_one_line_and_the_turn_is_kept(where, json_out, specchat_home):
    args = ["hello", "--drafter", "ngram", "--max-tokens", "20", *(["--json"] if json_out else [])]
    if where == "closed":
        done = run(*args, close_stdout=True)
    else:
        with open("/dev/full", "wb") as full:
            done = run(*args, stdout=full)
    why = "No space left on device" if where == "/dev/full" else "it is closed"
    assert done.returncode == 1
    assert error_lines(done) == [f"error: cannot write the reply to stdout: {why}",
                                 "hint: the turn is saved in the history: specchat history search WORDS finds it"]  # fmt: skip
    history = History(specchat_home / "data" / "history.sqlite3")
    (conv,) = history.list()
    user, reply = history.load(conv.id).messages
    history.close()
    assert (user.content, reply.role, reply.finish) == ("hello", "assistant", "length") and reply.content
