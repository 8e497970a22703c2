"""A llama.cpp server is untrusted input, and a silent one holds nothing.

A real loopback HTTP server, written here, answers like llama-server and
then, case by case, with each field specchat reads made wrong: missing,
null, a string, a list, huge, negative, not finite, the whole answer of the
wrong type, a `data:` line that is not JSON. Each ends in a result or one
error line that names the server and what was wrong with its answer; counters
that parse but cannot be true are refused, never shown. A server that goes
silent mid-reply is cancelled by Esc within a second with its first chunk
shown, quitting ends the process, and a server that streams past
--max-tokens is stopped at the cap by the client.
"""

from __future__ import annotations

import copy
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specchat.errors import SpecchatError
from tests.support.fakeserver import Hostile, encode, good_docs, timings
from tests.support.hostile import err_lines, specchat

# --- a llama-server that answers what each test says ------------------------------------

















def mutate(docs: dict, answer: str, path: tuple, value) -> dict:
    """docs with the field at `path` of `answer` set to `value` (path () is the whole answer)."""
    docs = copy.deepcopy(docs)
    if not path:
        docs[answer] = value
        return docs
    node = docs[answer]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return docs


def error_line(done: subprocess.CompletedProcess) -> str:
    """The one error line (and its hint) of a failed run, with no traceback."""
    lines = err_lines(done)
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(errors) == 1, lines
    assert lines[errors[0] + 1 :] and lines[errors[0] + 1].startswith("hint: "), lines
    assert done.returncode == 1, lines
    return lines[errors[0]][len("error: "):]


# --- 2. every field: one line that names the server and what was wrong ----------------------

NOT_A_COUNT = "not a count from 0 to 2147483647"
CASES = [
    # (answer, path, value, the error after "the server at URL sent a bad ")
    ("/v1/models", (), [], "/v1/models: the answer is a list, not an object"),
    ("/v1/models", ("data",), "abc", '/v1/models: data is "abc", not a list'),
    ("/v1/models", ("data", 0), 7, "/v1/models: data[0] is 7, not an object"),
    ("/v1/models", ("data", 0, "id"), ["a"], "/v1/models: data[0].id is a list, not a string"),
    ("/props", (), ["a list"], "/props: the answer is a list, not an object"),
    ("/props", ("default_generation_settings", "n_ctx"), "abc",
     f'/props: default_generation_settings.n_ctx is "abc", {NOT_A_COUNT}'),
    ("/props", ("default_generation_settings", "n_ctx"), -5, f"/props: default_generation_settings.n_ctx is -5, {NOT_A_COUNT}"),
    ("/props", ("default_generation_settings", "n_ctx"), 10**40,
     f"/props: default_generation_settings.n_ctx is a 41-digit number, {NOT_A_COUNT}"),
    ("/props", ("default_generation_settings", "params"), "x",
     '/props: default_generation_settings.params is "x", not an object'),
    ("/props", ("build_info",), {"a": 1}, "/props: build_info is an object, not a string"),
    ("/slots", (), {"a": 1}, "/slots: the answer is an object, not a list"),
    ("/slots", (0, "speculative"), "yes", '/slots: item 0.speculative is "yes", not true or false'),
    ("stream", (1, "choices"), "abc", 'stream event: choices is "abc", not a list'),
    ("stream", (1,), [1, 2], "stream event: the answer is a list, not an object"),
    ("stream", (1, "choices", 0, "delta", "content"), 5, "stream event: choices[0].delta.content is 5, not a string"),
    ("stream", (1, "choices", 0, "finish_reason"), 1, "stream event: choices[0].finish_reason is 1, not a string"),
    ("stream", (1, "timings"), [], "stream event: timings is a list, not an object"),
    ("stream", (2, "timings", "draft_n"), "abc", f'stream event: timings.draft_n is "abc", {NOT_A_COUNT}'),
    ("stream", (2, "timings", "draft_n"), -10, f"stream event: timings.draft_n is -10, {NOT_A_COUNT}"),
    ("stream", (2, "timings", "draft_n"), 2.5, f"stream event: timings.draft_n is 2.5, {NOT_A_COUNT}"),
    ("stream", (4, "timings", "predicted_per_second"), -1,
     "stream event: timings.predicted_per_second is -1, not a number from 0 to 1e+12"),
    ("stream", (2,), b'data: {"choices": [], "timings": {"draft_n": 1e309}}',
     "stream event: not JSON (the number 1e309 is out of range"),
    ("stream", (2,), b'data: {"choices": [], "timings": {"predicted_ms": NaN}}', "stream event: not JSON (NaN is not a number"),
    ("stream", (2,), b"data: {not json", "stream event: not JSON (Expecting property name"),
    ("stream", (2,), b"data: " + b"[" * 100_000, "stream event: JSON nested too deep to read"),
    ("stream", (2,), b"data: " + b"x" * (2 << 20), "stream event: a line over 1 MiB"),
]


@pytest.mark.parametrize("answer, path, value, wrong", CASES, ids=[f"{c[0]}{list(c[1])}" for c in CASES])
def test_a_malformed_answer_is_one_line_naming_the_server_and_the_field(serve, answer, path, value, wrong):
    url = serve(mutate(good_docs(), answer, path, value))
    done = specchat("run", "--server", url, "hi")
    line = error_line(done)
    assert line.startswith(f"the server at {url} sent a bad {wrong}"), line


BASELINE_CASES = [
    ((), "a list", '--baseline reply: the answer is "a list", not an object'),
    (("choices",), "abc", '--baseline reply: choices is "abc", not a list'),
    (("choices", 0, "message", "content"), ["x"], "--baseline reply: choices[0].message.content is a list, not a string"),
    (("timings", "predicted_per_second"), "fast",
     '--baseline reply: timings.predicted_per_second is "fast", not a number from 0 to 1e+12'),
    (("timings", "draft_n"), 1e300, f"--baseline reply: timings.draft_n is 1e+300, {NOT_A_COUNT}"),
]


@pytest.mark.parametrize("path, value, wrong", BASELINE_CASES, ids=[str(list(c[0])) for c in BASELINE_CASES])
def test_a_malformed_baseline_reply_is_one_line_and_the_reply_stands(serve, path, value, wrong):
    url = serve(mutate(good_docs(), "baseline", path, value))
    done = specchat("run", "--server", url, "--baseline", "hi")
    assert done.stdout.decode() == "Hello world\n"  # the reply stands
    line = error_line(done)
    assert line == f"--baseline: the server at {url} sent a bad {wrong}", line


def test_null_reads_as_a_missing_field(serve):
    url = serve(good_docs())  # the template every case here breaks one field of, read exactly
    done = specchat("run", "--server", url, "--baseline", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "Hello world\n"
    assert err_lines(done) == [f"tiny.gguf on {url} · α 3.00 · 2/4 drafts accepted (50%, server totals) · "
                               "100.0 tok/s (server clock) · off 50.0 tok/s (--baseline, measured) · 2.00×"]
    docs = good_docs()
    for event in docs["stream"]:
        if "timings" in event:
            event["timings"].update(draft_n=None, draft_n_accepted=None)
    docs["/props"]["default_generation_settings"]["n_ctx"] = None
    docs["/slots"][0]["speculative"] = None
    url = serve(docs)
    done = specchat("run", "--server", url, "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "Hello world\n"
    assert err_lines(done) == [f"tiny.gguf on {url} · no speculation data from this server · 100.0 tok/s (server clock)"]


# --- impossible counters are refused, never shown --------------------------------------------


def with_counts(*counts: tuple[int, int, int]) -> dict:
    """The good stream, its four chunks carrying these (predicted, drafted, accepted) totals."""
    docs = good_docs()
    for event, c in zip(docs["stream"][1:5], counts):
        event["timings"] = timings(*c)
    for event in docs["stream"][5:]:
        event["timings"] = timings(*counts[-1])
    return docs


IMPOSSIBLE = [
    (with_counts((1, 0, 0), (2, 8, 30), (3, 8, 30), (4, 8, 30)), "30 accepted of 8 drafted"),
    (with_counts((1, 0, 0), (2, 4, 2), (1, 4, 2), (4, 4, 2)), "predicted_n went from 2 back to 1"),
    (with_counts((1, 0, 0), (2, 4, 2), (3, 2, 2), (4, 4, 2)), "draft_n went from 4 back to 2"),
    (with_counts((1, 4, 3), (2, 4, 1), (3, 4, 3), (4, 4, 3)), "draft_n_accepted went from 3 back to 1"),
    (mutate(good_docs(), "stream", (4, "timings", "predicted_per_second"), 1e6),
     "1e+06 tok/s for 4 tokens in 40 ms (predicted)"),
    (mutate(good_docs(), "stream", (6, "timings"), {"predicted_n": 4, "predicted_ms": 4e9}),
     "4 tokens took 4e+06 s by the server's clock, in a reply that came in"),
]


@pytest.mark.parametrize("docs, what", IMPOSSIBLE, ids=[w.split(" (")[0] for _, w in IMPOSSIBLE])
def test_counters_that_cannot_be_true_are_refused_not_shown(serve, docs, what):
    url = serve(docs)
    done = specchat("run", "--server", url, "hi")
    line = error_line(done)
    assert line.startswith(f"the server's counters are inconsistent: {what}"), line
    assert line.endswith(f"(the server at {url})"), line
    assert "drafts accepted" not in done.stderr.decode() and "α" not in done.stderr.decode()


def test_a_reply_shown_whole_stays_in_the_conversation_when_its_figures_are_refused(serve):
    """The server's clock says the reply took longer than it did: the figures are
    refused, but the text the user saw is the conversation's next message."""
    from specchat.server.session import ServerSession

    docs = good_docs()
    for event in docs["stream"][4:]:  # the last chunk's and the final totals
        event["timings"].update(predicted_ms=1e9, predicted_per_second=4 * 1000 / 1e9)
    session = ServerSession(serve(docs))
    try:
        with pytest.raises(SpecchatError, match="by the server's clock"):
            session.reply("hi")
        assert session.messages[-2:] == [{"role": "user", "content": "hi"},
                                           {"role": "assistant", "content": "Hello world"}]
    finally:
        session.close()


BASELINE_IMPOSSIBLE = [
    ({"predicted_n": 4, "predicted_ms": 80.0, "predicted_per_second": 0.0}, "0 tok/s for 4 tokens in 80 ms (predicted)"),
    ({"predicted_n": 4, "predicted_per_second": 0.0}, "a --baseline reply of 4 tokens at 0 tok/s"),
    ({"predicted_n": 1, "predicted_ms": 1e9, "predicted_per_second": 1e-6},
     "1 tokens took 1e+06 s by the server's clock"),
]


@pytest.mark.parametrize("baseline, what", BASELINE_IMPOSSIBLE, ids=["0 tok/s", "0 tok/s, no clock", "a million times"])
def test_an_impossible_baseline_gives_no_speedup(serve, baseline, what):
    url = serve(mutate(good_docs(), "baseline", ("timings",), baseline))
    done = specchat("run", "--server", url, "--baseline", "hi")
    line = error_line(done)
    assert line.startswith(f"--baseline: the server's counters are inconsistent: {what}"), line
    assert "×" not in done.stderr.decode() and "off 0.0 tok/s" not in done.stderr.decode()


# --- arbitrary JSON in every field: a result or one SpecchatError ---------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
TIMING_KEYS = ["predicted_n", "predicted_ms", "predicted_per_second", "prompt_n", "prompt_ms", "prompt_per_second",
               "cache_n", "draft_n", "draft_n_accepted"]
READ = (
    [("/v1/models", p) for p in [(), ("data",), ("data", 0), ("data", 0, "id"), ("data", 0, "meta"),
                                 ("data", 0, "meta", "n_ctx")]]
    + [("/props", p) for p in [(), ("default_generation_settings",), ("default_generation_settings", "n_ctx"),
                               ("default_generation_settings", "params"), ("model_alias",), ("build_info",)]]
    + [("/slots", p) for p in [(), (0,), (0, "speculative"), (0, "params"), (0, "params", "speculative.types")]]
    + [("stream", (i, *p)) for i in range(7) for p in [(), ("choices",), ("choices", 0), ("choices", 0, "delta"),
                                                       ("choices", 0, "delta", "content"),
                                                       ("choices", 0, "finish_reason"), ("timings",)]
       if i != 6 or len(p) < 2]
    + [("stream", (i, "timings", k)) for i in range(1, 7) for k in TIMING_KEYS]
    + [("baseline", p) for p in [(), ("choices",), ("choices", 0), ("choices", 0, "message"),
                                 ("choices", 0, "message", "content"), ("timings",)]]
    + [("baseline", ("timings", k)) for k in ("predicted_n", "predicted_ms", "predicted_per_second", "draft_n")]
)


def reply_once(url: str):
    """The whole client on one server: probe, a streamed reply, its baseline, its stats line."""
    from specchat.cli.run_server import as_json
    from specchat.display import stats_fields
    from specchat.server.session import ServerSession
    from specchat.textsafe import safe_json

    session = ServerSession(url, with_baseline=True)
    try:
        turn = session.reply("hi")
        line = " · ".join(text for _, text in stats_fields(turn.stats.to_dict()))
        safe_json(as_json(session, turn))
        return turn, line
    finally:
        session.close()


@pytest.fixture(scope="module")
def one_server():
    server = Hostile(good_docs())
    yield server
    server.shutdown()
    server.server_close()


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(READ), value=json_values)
def test_any_json_in_any_field_is_a_result_or_one_specchat_error(one_server, field, value):
    answer, path = field
    one_server.docs = mutate(good_docs(), answer, path, value)
    try:
        turn, line = reply_once(one_server.url)
    except SpecchatError as err:
        assert err.message.startswith((f"the server at {one_server.url} sent a bad ",
                                       "the server's counters are inconsistent: ",
                                       "the server stopped with an error: ",
                                       f"{one_server.url} lists no model")), err.message
        return
    s = turn.stats
    assert 0 <= s.accepted <= s.drafted and 0 <= s.acceptance_rate <= 1, line
    assert s.alpha == 0 or s.alpha >= 1, line
    figures = line.split(" · no baseline: ")[0]  # why a baseline failed may quote the server's answer
    assert not re.search(r"\b(nan|inf)\b|-\d", figures), line


@settings(max_examples=100, deadline=None)
@given(index=st.integers(min_value=0, max_value=6),
       line=st.binary(max_size=60) | st.binary(max_size=60).map(lambda b: b"data: " + b)
       | json_values.map(lambda v: b"data: " + json.dumps(v).encode()))
def test_any_line_in_the_stream_is_a_result_or_one_specchat_error(one_server, index, line):
    one_server.docs = mutate(good_docs(), "stream", (index,), line)
    try:
        reply_once(one_server.url)
    except SpecchatError as err:
        assert err.message.startswith((f"the server at {one_server.url} sent a bad ",
                                       "the server's counters are inconsistent: ",
                                       "the server stopped with an error: ")), err.message


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["predicted_n", "draft_n", "draft_n_accepted"]), json_values),
                max_size=6))
def test_any_sequence_of_totals_is_counted_or_refused(sequence):
    from specchat.server.counts import Totals, server_stats

    totals = Totals("http://127.0.0.1:1")
    try:
        chunks = [totals.chunk("x", t) for t in sequence]
    except SpecchatError as err:
        assert err.message.startswith(("the server at http://127.0.0.1:1 sent a bad stream event: timings.",
                                       "the server's counters are inconsistent: ")), err.message
        return
    s = server_stats(totals, 1.0)
    assert all(0 <= c.accepted <= c.n_tokens for c in chunks)
    assert 0 <= s.accepted <= s.drafted and s.plain_steps >= 0
    assert s.alpha == 0 or 1 <= s.alpha <= 1 + s.drafted / max(s.verify_rounds, 1)


# --- the address, and the cap the client keeps ------------------------------------------------


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999", "http://:8080"])
def test_a_malformed_address_is_one_line(url):
    for command in (["run", "--server", url, "hi"], ["--server", url]):
        done = specchat(*command)
        lines = err_lines(done)
        assert done.returncode == 2, lines
        assert lines == [f"error: --server {url!r} is not an http(s) address",
                         "hint: give the server's base address, e.g. --server http://127.0.0.1:8080"]


def forever(events_with_text: bool, with_timings: bool):
    """A stream route that never ends (until the client leaves, or a minute)."""

    def stream(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        end = time.monotonic() + 60
        i = 0
        try:
            while time.monotonic() < end:
                i += 1
                event = {"choices": [{"delta": {"content": f"x{i} "} if events_with_text else {}}]}
                if with_timings:
                    event["timings"] = {"predicted_n": i}
                handler.wfile.write(b"data: " + encode(event) + b"\n\n")
                handler.wfile.flush()
                time.sleep(0.001)
        except OSError:  # the client left
            pass

    return stream


@pytest.mark.parametrize("with_timings", [True, False], ids=["counted by predicted_n", "counted by chunks"])
def test_a_server_that_streams_forever_is_stopped_at_max_tokens(serve, with_timings):
    url = serve({**good_docs(), "stream": forever(True, with_timings)})
    done = specchat("run", "--server", url, "--max-tokens", "5", "--json", "hi", timeout=30)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["text"] == "x1 x2 x3 x4 x5 " and data["finish"] == "length"


def test_a_server_that_streams_empty_events_forever_is_one_line(serve):
    url = serve({**good_docs(), "stream": forever(False, False)})
    done = specchat("run", "--server", url, "--max-tokens", "5", "hi", timeout=30)
    assert error_line(done) == f"the server at {url} sent a bad stream: more than 74 lines without ending the reply"


# --- 3. a server that goes silent mid-reply ---------------------------------------------------


class Stall:
    """A stream route that sends its first chunk, then nothing, and notes
    when the client leaves (its connection shut)."""

    def __init__(self) -> None:
        self.left = threading.Event()
        self.left_at = 0.0

    def __call__(self, handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        event = {"choices": [{"delta": {"content": "Hel"}, "finish_reason": None}], "timings": timings(1, 0, 0)}
        handler.wfile.write(b"data: " + encode(event) + b"\n\n")
        handler.wfile.flush()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if select.select([handler.connection], [], [], 0.02)[0] and not handler.connection.recv(1):
                self.left_at = time.monotonic()
                self.left.set()
                return


def stall_docs(stall: Stall) -> dict:
    docs = good_docs()
    del docs["/props"]["default_generation_settings"]["params"]  # no per-request settings
    return {**docs, "stream": stall}


def test_a_stalled_stream_is_cancelled_within_a_second_and_the_server_is_let_go(serve):
    from specchat.server.session import ServerSession

    stall = Stall()
    session = ServerSession(serve(stall_docs(stall)))
    cancel, shown, result = threading.Event(), [], []
    worker = threading.Thread(target=lambda: result.append(session.reply("hi", shown.append, cancel)), daemon=True)
    worker.start()
    deadline = time.monotonic() + 10
    while not shown and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [c.text for c in shown] == ["Hel"]
    t0 = time.monotonic()
    cancel.set()
    worker.join(timeout=5)
    assert result and time.monotonic() - t0 < 1.0
    turn = result[0]
    assert (turn.finish, turn.text) == ("cancelled", "Hel")
    assert session.messages[-1] == {"role": "assistant", "content": "Hel"}
    assert stall.left.wait(5) and stall.left_at - t0 < 1.0  # the connection is shut: the server stops too
    session.close()


@pytest.mark.usefixtures("specchat_home")
async def test_esc_stops_a_stalled_stream_in_the_chat_within_a_second(tmp_path, serve):
    from specchat.config import Settings
    from specchat.tui.chat.widgets import AssistantMessage, PromptInput, StatsLine
    from specchat.tui.state.models import chat_models
    from tests.support.tui import make_app, ready, wait_until

    stall = Stall()
    url = serve(stall_docs(stall))
    models = chat_models(url, pair=None, drafter=None, baseline=False, baseline_server=None)
    app = make_app(tmp_path, models=models, settings=Settings())
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        app.query_one(PromptInput).text = "hi"
        await pilot.press("enter")
        # The first chunk is on screen while the server is silent.
        await wait_until(pilot, lambda: app.query(AssistantMessage) and app.query(AssistantMessage).last().spans,
                         timeout=5)
        reply = app.query(AssistantMessage).last()
        assert "".join(s["text"] for s in reply.spans) == "Hel" and app.chat.generating
        t0 = time.monotonic()
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.generating, timeout=5)
        assert time.monotonic() - t0 < 1.0
        await pilot.pause()
        assert reply.finish == "cancelled" and reply.text == "Hel"
        assert str(reply.query_one(StatsLine).render()).startswith("cancelled · ")
        assert stall.left.wait(5)
        app.chat.session.close()


QUIT_WHILE_STALLED = """
import sys, time
from specchat.tui.app import SpecchatApp
from specchat.tui.chat.widgets import PromptInput

mounted = SpecchatApp.on_mount

def on_mount(self):
    mounted(self)
    def send():
        if self.chat.session is not None and not self.chat.generating and not getattr(self, "sent", False):
            self.sent = True
            self.query_one(PromptInput).post_message(PromptInput.Submitted("hi"))
            self.set_timer(1.0, quit)
    def quit():
        sys.__stderr__.write(f"quit at {time.monotonic()}\\n")
        sys.__stderr__.flush()
        self.exit()  # what ctrl+q does
    self.set_interval(0.05, send)

SpecchatApp.on_mount = on_mount
from specchat.cli.main import main
main()
"""


def test_quitting_while_a_server_is_silent_ends_the_process(serve, tmp_path):
    stall = Stall()
    url = serve(stall_docs(stall))
    env = {**os.environ, "SPECCHAT_HOME": str(tmp_path), "TEXTUAL_DRIVER": "textual.drivers.headless_driver:HeadlessDriver"}
    done = subprocess.run([sys.executable, "-c", QUIT_WHILE_STALLED, "--server", url], capture_output=True, env=env,
                          timeout=60)
    ended = time.monotonic()
    lines = err_lines(done)
    quits = [float(line.split()[-1]) for line in lines if line.startswith("quit at ")]
    assert done.returncode == 0 and len(quits) == 1, lines
    assert ended - quits[0] < 5  # not the 600 s read timeout
    assert stall.left.wait(5)


def test_a_stored_replys_impossible_counters_are_not_shown_either():
    """A reply's stats come back from the history too: the stats line shows no figure that cannot be true."""
    from specchat.display import stats_fields

    stored = {"source": "server", "timings_sent": True, "counters": True, "accepted": 30, "drafted": 8,
              "acceptance_rate": 3.75, "verify_rounds": 2, "alpha": 16.0, "alpha_exact": True, "tok_s": 100.0,
              "baseline_tok_s": 1e-9, "speedup": 1e11}
    assert stats_fields(stored) == [("speculation", "the server's counters are inconsistent, not shown"),
                                    ("tok_s", "100.0 tok/s (server clock)"),
                                    ("baseline", "the baseline's figures are inconsistent, not shown")]
