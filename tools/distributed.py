"""Speculation across a network hop, measured: the default pair's target split
over two llama.cpp RPC workers (`ggml-rpc-server`) on loopback, each worker
behind a TCP relay that holds every message for half the added round trip
each way (this machine's kernel has no netem), and `specchat run --server …
--baseline --baseline-server …` reading the servers' own counters.

    python -m tools.distributed [--delays 0,1,5] [--tokens 128] [--json out.json] [--pair NAME]

Three llama-servers run at once, each with its target over its own two
relayed workers (a worker serves one server at a time): plain (off), with
the draft model on the front machine (draft), and with llama.cpp's
ngram-simple (ngram). At each added round trip, every relay is set to it and
specchat runs the prompt on the draft server and on the ngram server, each
against the plain server as its measured baseline. Everything is loopback;
every process the script starts it ends. The binaries are the tests' cached
build (tests/support/llamaserver.py), the models the tests' store.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, run from anywhere

from tests.support.llamaserver import LlamaServer, RpcWorker, plain_args  # noqa: E402

PROMPT = (
    "Add type hints and a docstring to this function, and keep its body as it is:\n\n"
    "def merge(a, b):\n"
    "    out = []\n"
    "    i = j = 0\n"
    "    while i < len(a) and j < len(b):\n"
    "        if a[i] <= b[j]:\n"
    "            out.append(a[i])\n"
    "            i += 1\n"
    "        else:\n"
    "            out.append(b[j])\n"
    "            j += 1\n"
    "    out.extend(a[i:])\n"
    "    out.extend(b[j:])\n"
    "    return out\n"
)
SPEC = {"draft": ["--spec-type", "draft-simple", "-devd", "none", "-td", "1"], "ngram": ["--spec-type", "ngram-simple"]}


class Relay:
    """A TCP relay on loopback in front of one worker: each chunk, either way,
    is passed on `rtt_ms / 2` after it arrived, in order (a delay, not a
    bandwidth cap). Set `rtt_ms` at any time; it applies to what arrives next."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.rtt_ms = 0.0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.endpoint = f"127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pipe(client, upstream)
            self._pipe(upstream, client)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        held: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def read() -> None:
            while True:
                try:
                    data = src.recv(1 << 16)
                except OSError:
                    data = b""
                held.put((time.monotonic() + self.rtt_ms / 2000, data))
                if not data:
                    return

        def write() -> None:
            while True:
                due, data = held.get()
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
                try:
                    if not data:
                        dst.shutdown(socket.SHUT_WR)
                        return
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()

    def close(self) -> None:
        self.sock.close()


def specchat_run(server: str, baseline: str, tokens: int) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "specchat",
        "run",
        "--server",
        server,
        "--baseline",
        "--baseline-server",
        baseline,
        PROMPT,
        "--json",
        "--max-tokens",
        str(tokens),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"specchat run failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def figures(data: dict) -> dict:
    s = data["stats"]
    return {
        "tok_s": s["tok_s"],
        "baseline_tok_s": s["baseline_tok_s"],
        "speedup": s["speedup"],
        "alpha": s["alpha"],
        "accepted": s["accepted"],
        "drafted": s["drafted"],
        "tokens": s["tokens"],
        "identical": s["identical"],
    }


def measure(target: Path, draft: Path, delays: list[float], tokens: int, logs: Path) -> list[dict]:
    workers: list[RpcWorker] = []
    relays: list[Relay] = []
    servers: dict[str, LlamaServer] = {}
    try:
        for name in ("off", "draft", "ngram"):
            pair = [RpcWorker(logs / f"{name}-worker{i}.log").start() for i in (1, 2)]
            front = [Relay(w.port) for w in pair]
            workers += pair
            relays += front
            rpc = ["--rpc", ",".join(r.endpoint for r in front), "-ngl", "99"]
            args = plain_args(target, *rpc)
            if name != "off":
                args = [*args, "-md", str(draft), *SPEC[name]] if name == "draft" else [*args, *SPEC[name]]
            servers[name] = LlamaServer(args, logs / f"{name}-server.log").start(timeout=900)
            print(f"{name} server up on {servers[name].url} (workers {[r.endpoint for r in front]})", file=sys.stderr)
        for name in ("draft", "ngram"):  # a first request warms each server up, at 0 ms
            specchat_run(servers[name].url, servers["off"].url, 16)
        rows = []
        for rtt in delays:
            for r in relays:
                r.rtt_ms = rtt
            row: dict = {"rtt_ms": rtt}
            for name in ("draft", "ngram"):
                row[name] = figures(specchat_run(servers[name].url, servers["off"].url, tokens))
                print(f"{rtt:g} ms {name}: {row[name]}", file=sys.stderr)
            rows.append(row)
        return rows
    finally:
        for s in servers.values():
            s.stop()
        for r in relays:
            r.close()
        for w in workers:
            w.stop()


def table(rows: list[dict]) -> str:
    lines = [
        "| added round trip | off tok/s | draft tok/s | draft speedup | draft α | ngram tok/s | ngram speedup | ngram α |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        d, n = r["draft"], r["ngram"]
        lines.append(
            f"| {r['rtt_ms']:g} ms | {d['baseline_tok_s']:.2f} / {n['baseline_tok_s']:.2f} | {d['tok_s']:.2f} | "
            f"{d['speedup']:.2f}× | {d['alpha']:.2f} | {n['tok_s']:.2f} | {n['speedup']:.2f}× | {n['alpha']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delays", default="0,1,5", help="added round trips, ms, comma-separated")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--pair", default="qwen2.5-coder-1.5b", help="a pair in the tests' model store")
    args = parser.parse_args()
    from specchat.store.pairs import resolve_pair

    target, draft = resolve_pair(args.pair, root=models_root())
    delays = [float(d) for d in args.delays.split(",")]
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory(prefix="specchat-distributed-") as tmp:
        rows = measure(target, draft, delays, args.tokens, Path(tmp))
    report = {
        "date": started,
        "command": " ".join(["python -m tools.distributed", *sys.argv[1:]]),
        "target": target.name,
        "draft": draft.name,
        "tokens": args.tokens,
        "rows": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{report['command']}  ({started}; {target.name} split over two workers, draft {draft.name})")
    print(table(rows))


def models_root() -> Path:
    """The tests' model store (SPECCHAT_TEST_MODELS, as tests/conftest.py reads it)."""
    return Path(os.environ.get("SPECCHAT_TEST_MODELS", "~/.cache/specchat/test-models")).expanduser()


if __name__ == "__main__":
    main()
