"""specchat against a llama.cpp server: a real `llama-server`,
built from the llama.cpp source vendored in llama-cpp-python
(tests/support/llamaserver.py), started on loopback on the real smollm2-135m pair
as target and draft, and `specchat run --server` as a user runs it.

The figures are checked against the server's own: its final timings and
the acceptance line it logs at the end of every request (llama.cpp's
`print_timings`: "draft acceptance = … (A accepted / D generated), mean
len = α"). A few error cases that a real llama-server cannot be made to
produce on demand (HTTP 500, a server that sends no timings) use a small
loopback HTTP server; they are marked as such."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.llamaserver import LlamaServer, plain_args, spec_args
from tests.support.server import PROMPT, acceptance_lines, run_json_checked_against_the_log, specchat


@pytest.fixture(scope="module")
def spec_server(tiny_pair, tmp_path_factory):
    target, draft = tiny_pair
    server = LlamaServer(spec_args(target, draft), tmp_path_factory.mktemp("spec") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def plain_server(tiny_pair, tmp_path_factory):
    target, _ = tiny_pair
    server = LlamaServer(plain_args(target), tmp_path_factory.mktemp("plain") / "server.log").start()
    yield server
    server.stop()


# --- the counters, against the server's own -------------------------------------------------




@pytest.mark.real
def test_run_json_reports_the_servers_counters_exactly(spec_server):
    data = run_json_checked_against_the_log(spec_server, 80)
    stats, timings = data["stats"], data["timings"]
    assert stats["tok_s"] == timings["predicted_per_second"]
    assert stats["speedup"] is None and stats["baseline_tok_s"] is None  # no --baseline, no speedup
    assert data["server"]["speculative"] is True and data["server"]["spec_types"] == "draft-simple"
    assert data["request"]["timings_per_token"] is True and data["request"]["stream"] is True
    # Accepted text carries the provenance of the counters it came from.
    kinds = {(s["kind"], s["drafter"]) for s in data["spans"]}
    assert ("accepted", "server totals") in kinds and ("target", "target") in kinds
    assert "".join(s["text"] for s in data["spans"]) == data["text"]


@pytest.mark.real
def test_chunks_spend_exactly_the_servers_totals(spec_server):
    from specchat.server.session import ServerSession

    session = ServerSession(spec_server.url, max_tokens=60)
    seen = []
    turn = session.reply(PROMPT, on_round=seen.append)
    session.close()
    t = turn.timings
    assert sum(c.tokens for c in turn.chunks) == t["predicted_n"]
    assert sum(c.accepted for c in turn.chunks) == t["draft_n_accepted"]
    assert sum(c.drafted for c in turn.chunks) == t["draft_n"]
    # A chunk is coloured accepted only when all of its tokens were accepted drafts.
    coloured = [c for c in turn.chunks if c.kind == "accepted"]
    assert coloured and all(c.accepted == c.tokens for c in coloured)
    assert "".join(c.text for c in seen) == turn.text == session.messages[-1]["content"]
    assert turn.finish in ("eos", "length")


@pytest.mark.real
def test_run_prints_the_stats_line_from_the_server(spec_server):
    out = specchat("run", "--server", spec_server.url, PROMPT, "--max-tokens", "40")
    assert out.returncode == 0, out.stderr
    accepted, drafted, mean_len = acceptance_lines(spec_server)[-1]
    last = out.stderr.strip().splitlines()[-1]  # off a terminal the stats line goes to stderr
    assert f"α {mean_len:.2f}" in last
    assert f"{accepted}/{drafted} drafts accepted ({accepted / drafted * 100:.0f}%, server totals)" in last
    assert "tok/s (server clock)" in last
    assert "×" not in last and "off " not in last  # no baseline asked: no speedup at all
    assert last.startswith(f"SmolLM2-135M-Instruct.Q4_1.gguf on {spec_server.url} · ")  # the model, named by the server


@pytest.mark.real
def test_chunk_colours_are_the_themes_accepted_colour(spec_server):
    from specchat.cli.run import round_text  # what `run --server` prints each chunk with
    from specchat.server.session import ServerSession
    from specchat.themes import SPEC_DEFAULTS

    session = ServerSession(spec_server.url, max_tokens=40)
    turn = session.reply(PROMPT)
    session.close()
    for c in turn.chunks:
        styles = {str(span.style) for span in round_text(c).spans}
        if c.kind == "accepted":
            assert styles == {SPEC_DEFAULTS["spec-accepted"]}
        else:
            assert styles <= {""}


# --- no counters, no speedup, the baseline ------------------------------------------------


@pytest.mark.real
def test_a_server_that_does_not_speculate_says_so(plain_server):
    out = specchat("run", "--server", plain_server.url, PROMPT, "--json", "--max-tokens", "20")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert "draft_n" not in data["timings"]
    assert data["stats"]["counters"] is False and data["stats"]["drafted"] == 0
    assert data["server"]["speculative"] is False
    line = specchat("run", "--server", plain_server.url, PROMPT, "--max-tokens", "20").stderr.strip().splitlines()[-1]
    assert "no speculation data from this server" in line
    assert "α" not in line and "accepted" not in line


@pytest.mark.real
def test_baseline_on_a_second_server_is_measured_and_labelled(spec_server, plain_server):
    out = specchat("run", "--server", spec_server.url, "--baseline", "--baseline-server", plain_server.url,
                   PROMPT, "--json", "--max-tokens", "80")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    base = data["baseline"]
    assert base["url"] == plain_server.url and base["same_server"] is False
    assert "draft_n" not in base["timings"]  # speculation was really off for it
    stats = data["stats"]
    assert stats["baseline_tok_s"] == base["timings"]["predicted_per_second"] > 0
    assert stats["speedup"] == pytest.approx(data["timings"]["predicted_per_second"] / stats["baseline_tok_s"])
    assert base["identical"] == (stats["identical"] is True)
    line = specchat("run", "--server", spec_server.url, "--baseline", "--baseline-server", plain_server.url,
                    PROMPT, "--max-tokens", "80").stderr.strip().splitlines()[-1]
    assert re.search(r"off [0-9.]+ tok/s \(--baseline, measured\) · [0-9.]+×", line), line


@pytest.mark.real
def test_baseline_on_a_server_without_per_request_settings_is_refused(spec_server):
    # llama.cpp as vendored in llama-cpp-python 0.3.36 compiles its per-request
    # speculative fields out (server-schema.cpp, "#if 0"): /props lists none.
    out = specchat("run", "--server", spec_server.url, "--baseline", PROMPT, "--max-tokens", "10")
    assert out.returncode == 1 and not out.stdout  # refused before the server does any work
    assert "takes no per-request speculative settings" in out.stderr
    assert "--baseline-server" in out.stderr
    out = specchat("run", "--server", spec_server.url, "--k", "3", PROMPT)
    assert out.returncode == 2 and "does not accept speculative.n_max per request" in out.stderr
    assert "--spec-draft-n-max" in out.stderr


@pytest.mark.real
def test_baseline_server_with_a_draft_is_refused(spec_server):
    out = specchat("run", "--server", spec_server.url, "--baseline", "--baseline-server", spec_server.url,
                   PROMPT, "--max-tokens", "10")
    assert out.returncode == 1 and "the baseline server at" in out.stderr and "speculates" in out.stderr
    assert not out.stdout  # refused before any decoding


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.real
def test_a_server_killed_mid_stream_keeps_the_partial_reply(tiny_pair, tmp_path):
    from specchat.server.session import ServerSession

    target, draft = tiny_pair
    server = LlamaServer(spec_args(target, draft), tmp_path / "server.log").start()
    try:
        session = ServerSession(server.url, max_tokens=400)
        seen = []

        def kill_after_some(chunk):
            seen.append(chunk)
            if len(seen) == 5:
                server.kill()

        turn = session.reply("Count from 1 to 500, one number per line.", on_round=kill_after_some)
        session.close()
    finally:
        server.stop()
    assert turn.finish == "cut"
    assert turn.error.startswith("the server closed the stream mid-reply")
    assert len(turn.chunks) >= 5 and turn.text.startswith("".join(c.text for c in seen[:5]))
    assert session.messages[-1] == {"role": "assistant", "content": turn.text}  # kept in the conversation


@pytest.mark.real
def test_run_against_a_server_killed_mid_stream_prints_the_error(tiny_pair, tmp_path):
    target, draft = tiny_pair
    server = LlamaServer(spec_args(target, draft), tmp_path / "server.log").start()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "specchat", "run", "--server", server.url, "--max-tokens", "400",
                             "Count from 1 to 500, one number per line."],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stdout.read(8)  # the reply has begun streaming
        server.kill()
        rest, err = proc.communicate(timeout=60)
    finally:
        server.stop()
        if proc.poll() is None:
            proc.kill()
    assert first.strip()
    assert proc.returncode == 1
    assert "error: the server closed the stream mid-reply" in err
    assert "the partial reply" in err and "is kept" in err
    assert "Traceback" not in err


def test_unreachable_server_is_one_line():
    out = specchat("run", "--server", "http://127.0.0.1:9", "hi")
    assert out.returncode == 1
    assert out.stderr.splitlines()[0] == "error: cannot reach the llama.cpp server at http://127.0.0.1:9: [Errno 111] Connection refused"
    assert "Traceback" not in out.stderr


def test_the_chat_on_an_unreachable_server_is_one_line_before_the_app_starts():
    out = specchat("--server", "http://127.0.0.1:9")
    assert out.returncode == 1
    assert out.stderr.splitlines()[0].startswith("error: cannot reach the llama.cpp server at http://127.0.0.1:9")
    out = specchat("chat", "--baseline")
    assert out.returncode == 2 and "--baseline and --baseline-server need --server URL" in out.stderr


def test_a_bad_address_is_refused_at_the_edge():
    out = specchat("run", "--server", "localhost:8080", "hi")
    assert out.returncode == 2 and "is not an http(s) address" in out.stderr
    out = specchat("run", "--server", "http://127.0.0.1:9", "--pair", "smollm2-135m", "hi")
    assert out.returncode == 2 and "--pair cannot be used with --server" in out.stderr
    out = specchat("--server", "http://127.0.0.1:9", "--draft", "small.gguf")  # the chat, as run
    assert out.returncode == 2 and "--draft cannot be used with --server" in out.stderr


@pytest.mark.real
def test_a_wrong_url_names_the_fix(spec_server):
    out = specchat("run", "--server", spec_server.url + "/v1", "hi")
    assert out.returncode == 1
    assert f"{spec_server.url}/v1 has no /v1/models (HTTP 404)" in out.stderr
    assert "base address" in out.stderr


@pytest.mark.real
def test_a_request_the_server_refuses_is_http_4xx_with_its_message(spec_server):
    from specchat.errors import SpecchatError
    from specchat.server.client import ServerClient

    client = ServerClient(spec_server.url)
    with pytest.raises(SpecchatError) as err:
        list(client.stream_chat({"messages": "not a list", "stream": True}, None))
    client.close()
    assert re.match(r"the server refused the request \(HTTP 4\d\d\): .+", err.value.message), err.value.message


class _Canned(BaseHTTPRequestHandler):
    """A loopback stand-in for servers we cannot run here: `routes` maps a
    path to (status, content type, body)."""

    routes: dict = {}
    bodies: list = []  # the JSON bodies it was sent

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.bodies.append(json.loads(self.rfile.read(length)))
        status, kind, body = self.routes.get(self.path.split("?")[0], (404, "text/plain", b"not found"))
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def canned():
    servers = []

    def start(routes: dict, bodies: list | None = None) -> str:
        handler = type("Handler", (_Canned,), {"routes": routes, "bodies": [] if bodies is None else bodies})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()


MODELS = (200, "application/json", json.dumps({"data": [{"id": "other-server-model"}]}).encode())


def test_http_500_names_the_status_and_the_servers_message(canned):
    """Isolation: a loopback stand-in answers 500 (a real llama-server does so only when it breaks)."""
    error = json.dumps({"error": {"code": 500, "message": "\x1b[2Jcontext overflow", "type": "server_error"}})
    url = canned({"/v1/models": MODELS, "/v1/chat/completions": (500, "application/json", error.encode())})
    out = specchat("run", "--server", url, "hi")
    assert out.returncode == 1
    assert out.stderr.splitlines()[0] == "error: the server failed (HTTP 500): ␛[2Jcontext overflow"


def test_a_server_without_timings_says_no_speculation_data(canned):
    """Isolation: an OpenAI-compatible server that is not llama.cpp streams no timings at all."""
    events = [{"choices": [{"delta": {"content": piece}, "finish_reason": None}]} for piece in ("Hel", "lo")]
    events.append({"choices": [{"delta": {}, "finish_reason": "stop"}]})
    stream = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    url = canned({"/v1/models": MODELS, "/v1/chat/completions": (200, "text/event-stream", stream.encode())})
    out = specchat("run", "--server", url, "hi")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Hello\n"  # off a terminal, stdout is the reply; the stats line goes to stderr
    assert out.stderr.splitlines()[-1] == \
        f"other-server-model on {url} · no speculation data from this server · the server sends no timings"
    data = json.loads(specchat("run", "--server", url, "hi", "--json").stdout)
    assert data["timings"] is None and data["stats"]["drafted"] == 0 and data["stats"]["speedup"] is None


def _sse(events: list[dict]) -> bytes:
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


def test_per_request_settings_where_props_lists_them(canned):
    """Isolation: llama.cpp builds before the vendored one took speculative.n_max per request and
    listed it in /props; no such server is built here, so a stand-in checks the client's side:
    --k goes out as speculative.n_max, the baseline asks for n_max 0 on the same server, and a
    baseline reply that still drafted is refused rather than shown."""
    params = {"speculative.n_max": 16, "speculative.n_min": 0, "speculative.p_min": 0.75}
    props = {"default_generation_settings": {"params": params, "n_ctx": 4096}}
    timings = {"predicted_n": 2, "predicted_per_second": 40.0, "draft_n": 4, "draft_n_accepted": 1}
    stream = _sse([{"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}], "timings": timings}])
    drafted_anyway = {"choices": [{"message": {"content": "ok"}}], "timings": timings}
    bodies: list = []
    url = canned({"/v1/models": MODELS, "/props": (200, "application/json", json.dumps(props).encode()),
                  "/v1/chat/completions": (200, "text/event-stream", stream)}, bodies)
    from specchat.errors import SpecchatError
    from specchat.server.client import ServerClient
    from specchat.server.session import ServerSession

    session = ServerSession(url, k=5)
    assert session.info.knobs == ("n_max", "n_min", "p_min") and session.drafter_names() == ["server", "off"]
    turn = session.reply("hi")
    assert bodies[-1]["speculative.n_max"] == 5 and bodies[-1]["timings_per_token"] is True
    session.set_drafter("off")
    session.reply("again")
    assert bodies[-1]["speculative.n_max"] == 0
    session.close()
    url2 = canned({"/v1/models": MODELS, "/props": (200, "application/json", json.dumps(props).encode()),
                   "/v1/chat/completions": (200, "application/json", json.dumps(drafted_anyway).encode())}, bodies)
    session.client = ServerClient(url2)  # the same session, now answered by a server that drafts anyway
    with pytest.raises(SpecchatError) as err:
        session.baseline(turn)
    assert bodies[-1]["speculative.n_max"] == 0 and bodies[-1]["stream"] is False
    assert "still drafted 4 tokens" in err.value.message and turn.stats.speedup is None
    session.close()
