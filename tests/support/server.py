"""A real llama-server run beside specchat: its own log's acceptance lines, read back to check specchat's figures."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.support.llamaserver import LlamaServer

PROMPT = "Write the numbers from 1 to 30 separated by commas."


def acceptance_lines(server: LlamaServer) -> list[tuple[int, int, float]]:
    """(accepted, drafted, mean len) of every request, from the server's log."""
    return [(int(a), int(d), float(m)) for _, a, d, m in ACCEPTANCE.findall(server.log())]


def run_json_checked_against_the_log(server: LlamaServer, max_tokens: int) -> dict:
    """`specchat run --server --json` on `server`, its counts checked against the
    server's own log line for that request: drafted, accepted, α and tokens exactly."""
    before = len(acceptance_lines(server))
    out = specchat("run", "--server", server.url, PROMPT, "--json", "--max-tokens", str(max_tokens))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    logged = acceptance_lines(server)
    assert len(logged) == before + 1  # this request, as the server logged it
    accepted, drafted, mean_len = logged[-1]
    stats, timings = data["stats"], data["timings"]
    assert drafted > 0 and accepted > 0
    assert (stats["drafted"], stats["accepted"]) == (drafted, accepted)
    assert (timings["draft_n"], timings["draft_n_accepted"]) == (drafted, accepted)
    assert stats["acceptance_rate"] == pytest.approx(accepted / drafted)
    # α: the server logs mean len = 1 + accepted / verify steps; ours counts the steps from the chunks.
    assert stats["alpha_exact"] is True
    assert stats["alpha"] == pytest.approx(mean_len, abs=0.005)
    assert stats["tokens"] == timings["predicted_n"]
    return data


ACCEPTANCE = re.compile(
    r"draft acceptance = ([0-9.]+) \(\s*(\d+) accepted /\s*(\d+) generated\), mean len =\s*([0-9.]+)"
)


def specchat(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specchat", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
