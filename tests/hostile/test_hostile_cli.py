"""Hostile arguments and pipes for `specchat run` and `bench`, in the real
process: every number out of its range is one line with a hint before any
model loads, an empty prompt is refused, `-` (or no prompt with stdin not a
terminal) reads the prompt from stdin, and off a terminal stdout carries
exactly the reply, as --json's "text" has it, and one line end."""

from __future__ import annotations

import json
import os
import pty
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from specchat.checks import INT_MAX, threads_max
from specchat.config import read_settings
from tests.support.hostile import err_lines, specchat

NO_MODELS = {"SPECCHAT_MODELS": ""}  # with SPECCHAT_HOME empty: nothing pulled, nothing to load
PIPE = {"FORCE_COLOR": "", "TTY_COMPATIBLE": ""}  # stdout a pipe, whatever the test's own environment says
COUNT = "Count from 1 to 30, separated by commas."


def refused(done) -> list[str]:
    """The refusal's lines: exit 2, an error and its hint, nothing on stdout."""
    assert done.returncode == 2, done
    assert not done.stdout, done.stdout
    lines = err_lines(done)
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines
    return lines


# --- every number has a range ------------------------------------------------------------------

MOST = threads_max()
THREADS_HINT = f"hint: {MOST} is 4 per core on this machine (ggml takes at most 512); leave it out to use the physical cores"
OUT_OF_RANGE = [
    (["run", "hi", "--threads", "100000"], f"--threads 100000 is out of range: it must be at most {MOST}", THREADS_HINT),
    (["run", "hi", "--threads", str(MOST + 1)], f"--threads {MOST + 1} is out of range: it must be at most {MOST}",
     THREADS_HINT),
    (["run", "hi", "--seed", "-1"], "--seed -1 is out of range: it must be between 0 and 4294967295",
     "hint: the same seed and prompt give the same reply; any number in range, e.g. 42"),
    (["run", "hi", "--seed", str(2**32)], f"--seed {2**32} is out of range: it must be between 0 and 4294967295", None),
    (["run", "hi", "--baseline-every", "-3"], "--baseline-every -3 is out of range: it must be ≥ 0",
     "hint: 0 measures no baseline; 8 is the default"),
    (["run", "hi", "--max-tokens", str(2**31)], f"--max-tokens {2**31} is out of range: it must be at most {INT_MAX}",
     None),
    (["run", "hi", "--n-gpu-layers", "-2"],
     "--n-gpu-layers -2 is out of range: it must be -1 (all layers), 0 (none) or a number of layers",
     "hint: -1 offloads every layer, 0 none; leave it out for all"),
    (["run", "hi", "--draft-n-gpu-layers", str(2**32)],
     f"--draft-n-gpu-layers {2**32} is out of range: it must be at most {INT_MAX}", None),
    (["run", "hi", "--ctx", str(2**40)], f"--ctx {2**40} is out of range: it must be at most {INT_MAX}", None),
    (["run", "hi", "--top-k", str(2**31)], f"--top-k {2**31} is out of range: it must be at most {INT_MAX}", None),
    (["run", "hi", "--server", "http://127.0.0.1:9", "--draft-min", "65"],
     "--draft-min 65 is out of range: it must be between 0 and 64", None),
    (["bench", "--repeats", "0"], "--repeats 0 is out of range: each prompt runs at least once", None),
    (["bench", "--threads", "100000"], f"--threads 100000 is out of range: it must be at most {MOST}", None),
    (["bench", "--n-gpu-layers", "-7"],
     "--n-gpu-layers -7 is out of range: it must be -1 (all layers), 0 (none) or a number of layers", None),
]


@pytest.mark.parametrize("args,error,hint", OUT_OF_RANGE, ids=[" ".join(c[0]) for c in OUT_OF_RANGE])
def test_a_number_out_of_range_is_one_line_before_anything_loads(args, error, hint, tmp_path):
    lines = refused(specchat(*args, env={"SPECCHAT_HOME": str(tmp_path), **NO_MODELS}))
    assert lines[0] == f"error: {error}"
    if hint is not None:
        assert lines[1] == hint


@pytest.mark.real
def test_threads_past_the_bound_never_reach_llama_cpp(tiny_pair):
    """100,000 threads crashed llama.cpp (SIGSEGV); the bound itself runs."""
    target = str(tiny_pair[0])
    lines = refused(specchat("run", "hi", "--target", target, "--threads", "100000", "--max-tokens", "2"))
    assert lines[0].startswith("error: --threads 100000 is out of range")
    done = specchat("run", "hi", "--target", target, "--threads", str(MOST), "--max-tokens", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["threads"] == MOST


def test_settings_threads_out_of_range_keep_the_default(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('theme = "specchat-light"\nthreads = 100000\n')
    loaded = read_settings(path)
    assert loaded.settings.threads == 0 and loaded.settings.theme == "specchat-light"
    assert loaded.errors == [f"{path}, line 2: threads 100000 is out of range: it must be at most {MOST}; using 0"]


# --- the prompt ------------------------------------------------------------------------------


@pytest.mark.parametrize("prompt,error", [
    ("", "the prompt is empty"),
    (" \n\t ", "the prompt has no visible text"),
    ("\u200b\u2060\ufeff\u3164", "the prompt has no visible text"),  # zero-width, joiner, BOM, a blank filler
], ids=["empty", "whitespace", "invisible"])
def test_an_empty_prompt_is_refused(prompt, error, tmp_path):
    lines = refused(specchat("run", prompt, env={"SPECCHAT_HOME": str(tmp_path), **NO_MODELS}))
    assert lines == [f"error: {error}", 'hint: say something, e.g. specchat run "Explain this error"']


@pytest.mark.parametrize("args", [["run", "-"], ["run"]], ids=["dash", "no prompt"])
@pytest.mark.parametrize("data,error", [
    (b"caf\xe9 au lait\n", "the prompt on stdin is not valid UTF-8 (a stray byte at character 4)"),
    (b"", "the prompt on stdin is empty"),
    (b"  \n\n", "the prompt on stdin has no visible text"),
], ids=["latin-1", "empty", "blank"])
def test_a_bad_prompt_on_stdin_is_one_line(args, data, error, tmp_path):
    lines = refused(specchat(*args, input=data, env={"SPECCHAT_HOME": str(tmp_path), **NO_MODELS}))
    assert lines[0] == f"error: {error}"


def test_no_prompt_with_a_terminal_on_stdin_says_how_to_give_one(tmp_path):
    leader, follower = pty.openpty()
    try:
        done = specchat("run", stdin=follower, env={"SPECCHAT_HOME": str(tmp_path), **NO_MODELS}, timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert refused(done) == ["error: no prompt given",
                             'hint: specchat run "your message", or pipe it in: echo "your message" | specchat run']


@pytest.mark.real
def test_the_prompt_is_read_from_stdin(tiny_pair):
    """`-`, or no prompt with stdin not a terminal, reads it; echo's final line end is not part of it."""
    args = ("--target", str(tiny_pair[0]), "--drafter", "ngram", "--max-tokens", "12", "--json")
    typed = specchat("run", "Name three colours.", *args)
    assert typed.returncode == 0, typed.stderr
    want = json.loads(typed.stdout)
    for prompt, data in (("-", b"Name three colours.\n"), (None, b"Name three colours.\r\n")):
        done = specchat("run", *([prompt] if prompt else []), *args, input=data)
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout)
        assert (got["text"], got["tokens"]) == (want["text"], want["tokens"]), (prompt, got["text"], want["text"])


# --- pipes get the reply ---------------------------------------------------------------------------


@pytest.mark.real
def test_a_pipe_gets_exactly_the_reply(tiny_pair):
    """Off a terminal no rejected draft and no colour reaches stdout: it is
    --json's "text" and one line end, byte for byte; the stats go to stderr."""
    args = ("run", COUNT, "--target", str(tiny_pair[0]), "--drafter", "ngram", "--k", "4", "--max-tokens", "60")
    data = json.loads(specchat(*args, "--json", env=PIPE).stdout)
    assert any(s["kind"] == "rejected" for s in data["spans"])  # there are rejected drafts to leave out
    done = specchat(*args, env=PIPE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (data["text"] + "\n").encode("utf-8")
    stats = err_lines(done)[-1]
    assert stats.startswith("α ") and " tok/s" in stats and "\x1b" not in stats


class _Server(BaseHTTPRequestHandler):
    """A llama.cpp-like server on loopback: its model list, and one streamed
    reply whose pieces hold a terminal escape and a lone surrogate."""

    PIECES = ("Hel", "lo \x1b[2J", "world \ud800!")

    def do_GET(self):
        if self.path.split("?")[0] != "/v1/models":
            self.send_error(404)  # no /props, no /slots: a plain OpenAI-like server
            return
        self._send("application/json", json.dumps({"data": [{"id": "canned"}]}).encode())

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        events = [{"choices": [{"delta": {"content": p}, "finish_reason": None}]} for p in self.PIECES]
        events.append({"choices": [{"delta": {}, "finish_reason": "stop"}]})
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self._send("text/event-stream", body.encode())

    def _send(self, kind: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server_url():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_pipe_gets_exactly_the_servers_reply(server_url):
    """`run --server` the same way. Off a terminal the reply is data, exact:
    the escape as sent, the lone surrogate as --json writes it (U+FFFD)."""
    data = json.loads(specchat("run", "--server", server_url, "hi", "--json", env=PIPE).stdout)
    assert data["text"] == "Hello \x1b[2Jworld \ufffd!"
    done = specchat("run", "--server", server_url, "hi", env=PIPE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello \x1b[2Jworld \ufffd!\n".encode("utf-8")
    assert err_lines(done)[-1].startswith(f"canned on {server_url} · ")
