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
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.llamaserver import LlamaServer, RpcWorker, binary_dir, rpc_spec_args
from tests.support.server import PROMPT, acceptance_lines, run_json_checked_against_the_log


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
    data = run_json_checked_against_the_log(server, 60)
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


# --- tools/distributed.py: the relay and one small run ----------------------------------------


def test_the_relay_passes_every_byte_in_order_both_ways_and_the_close():
    from tools.distributed import Relay

    upstream = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        conn, _ = upstream.accept()
        while data := conn.recv(65536):
            conn.sendall(data[::-1])  # each chunk reversed: order and content both show
        conn.close()

    threading.Thread(target=echo, daemon=True).start()
    relay = Relay(upstream.getsockname()[1])
    relay.rtt_ms = 3.0
    try:
        with socket.create_connection(("127.0.0.1", relay.port), timeout=30) as s:
            for i in range(20):
                s.sendall(f"message {i:02d}".encode())
                got = b""
                while len(got) < 10:
                    got += s.recv(100)
                assert got == f"message {i:02d}".encode()[::-1]
            s.shutdown(socket.SHUT_WR)
            assert s.recv(10) == b""  # the worker's close comes back through the relay
    finally:
        relay.close()
        upstream.close()


def _our_processes() -> set[int]:
    """Processes running the tests' llama-server or ggml-rpc-server binaries."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            exe = os.readlink(proc / "exe")
        except OSError:
            continue
        if exe.startswith(str(binary_dir())):
            found.add(int(proc.name))
    return found


@pytest.mark.real
def test_the_distributed_script_measures_draft_and_ngram_against_off_and_ends_its_processes(tiny_pair, tmp_path):
    before = _our_processes()
    report = tmp_path / "report.json"
    root = Path(__file__).parents[2]
    out = subprocess.run([sys.executable, "-m", "tools.distributed", "--pair", "smollm2-135m", "--delays", "0,2",
                          "--tokens", "24", "--json", str(report)], capture_output=True, text=True, timeout=900,
                         cwd=root)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(report.read_text())
    assert [r["rtt_ms"] for r in data["rows"]] == [0.0, 2.0]
    for row in data["rows"]:
        for name in ("draft", "ngram"):
            f = row[name]
            assert 0 <= f["accepted"] <= f["drafted"] and 0 < f["tokens"] <= 24
            assert f["speedup"] == pytest.approx(f["tok_s"] / f["baseline_tok_s"])
        assert row["draft"]["drafted"] > 0  # the draft server really speculated
    lines = out.stdout.splitlines()
    assert lines[0].startswith("python -m tools.distributed --pair smollm2-135m --delays 0,2")
    assert [line.split(" |")[0] for line in lines[3:]] == ["| 0 ms", "| 2 ms"]
    assert _our_processes() <= before  # every worker and server it started has ended
