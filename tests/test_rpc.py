"""specchat against llama.cpp's distributed mode: two real `ggml-rpc-server`
workers on loopback and a real `llama-server --rpc` in front of them holding
the smollm2-135m pair (tests/support/llamaserver.py builds both binaries, with
RPC, in one cached build). The target's layers are split over the workers; the
draft stays on the front machine.

The server's log must show both workers as devices holding the target's
weights, and `specchat run --server` must report exactly the server's own
drafted and accepted counts, as for a single server (tests/test_server.py).
Every process a test starts, the test ends."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.llamaserver import LlamaServer, RpcWorker, rpc_spec_args
from tests.test_server import PROMPT, acceptance_lines, specchat


@pytest.fixture(scope="module")
def rpc_server(tiny_pair, tmp_path_factory):
    target, draft = tiny_pair
    logs = tmp_path_factory.mktemp("rpc")
    workers: list[RpcWorker] = []
    server = None
    try:
        workers = [RpcWorker(logs / f"worker{i}.log").start() for i in (1, 2)]
        server = LlamaServer(rpc_spec_args(target, draft, workers), logs / "server.log").start()
        yield server, workers
    finally:
        if server is not None:
            server.stop()
        for w in workers:
            w.stop()


@pytest.mark.real
def test_the_server_log_reports_both_rpc_workers_holding_the_target(rpc_server):
    server, workers = rpc_server
    log = server.log()
    for i, w in enumerate(workers):
        # llama.cpp names each worker's device RPC<n> with its endpoint as description...
        assert re.search(rf"using device RPC{i} \({re.escape(w.endpoint)}\)", log), log[-3000:]
        # ...and puts part of the target's weights in that worker's buffer.
        assert re.search(rf"RPC0\[{re.escape(w.endpoint)}\] model buffer size = +[1-9][0-9.]* MiB", log), log[-3000:]
        assert "Accepted client connection" in w.log()  # the server really connected to it


@pytest.mark.real
def test_run_json_reports_the_servers_counters_exactly_over_rpc(rpc_server):
    server, _ = rpc_server
    before = len(acceptance_lines(server))
    out = specchat("run", "--server", server.url, PROMPT, "--json", "--max-tokens", "60")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    logged = acceptance_lines(server)
    assert len(logged) == before + 1  # this request, as the server logged it
    accepted, drafted, mean_len = logged[-1]
    stats, timings = data["stats"], data["timings"]
    assert drafted > 0 and accepted > 0
    assert (stats["drafted"], stats["accepted"]) == (drafted, accepted)
    assert (timings["draft_n"], timings["draft_n_accepted"]) == (drafted, accepted)
    assert stats["alpha_exact"] is True and stats["alpha"] == pytest.approx(mean_len, abs=0.005)
    assert stats["tokens"] == timings["predicted_n"]
    assert data["server"]["speculative"] is True


@pytest.mark.real
def test_the_chats_session_spends_exactly_the_servers_totals_over_rpc(rpc_server):
    from specchat.server.session import ServerSession

    server, _ = rpc_server
    session = ServerSession(server.url, max_tokens=40)
    try:
        turn = session.reply(PROMPT)
    finally:
        session.close()
    t = turn.timings
    accepted, drafted, _ = acceptance_lines(server)[-1]
    assert (t["draft_n"], t["draft_n_accepted"]) == (drafted, accepted)
    assert sum(c.accepted for c in turn.chunks) == accepted
    assert sum(c.drafted for c in turn.chunks) == drafted
    assert sum(c.tokens for c in turn.chunks) == t["predicted_n"]
