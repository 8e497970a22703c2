"""Running specchat's commands from the tests: in process, and as a user would in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def specchat(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specchat.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def run_json(*args: str) -> dict:
    r = specchat("run", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)
