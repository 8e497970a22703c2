"""`specchat run` end to end: real models, real process, its text, numbers and colours."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.color import Color, ColorSystem

from specchat import paths
from specchat.history.database import History
from specchat.themes import SPEC_DEFAULTS
from tests.support.cli import run_json, specchat

CODE_EDIT = (Path(__file__).parents[1] / "data" / "code_edit_prompt.txt").read_text()






@pytest.mark.real
def test_run_json_on_the_tiny_pair(tiny_pair):
    target, draft = map(str, tiny_pair)
    out = run_json(CODE_EDIT, "--target", target, "--draft", draft, "--drafter", "draft", "--k", "4",
                   "--max-tokens", "48", "--check-identical")
    s = out["stats"]
    assert out["drafter"] == "draft" and out["k"] == 4
    assert s["tokens"] == len(out["tokens"]) == 48
    assert s["alpha"] >= 0.95 * 5  # draft = target: every draft is accepted
    assert s["identical"] is True and s["first_divergence"] is None
    assert s["baseline_tok_s"] > 0 and s["speedup"] > 0
    kinds = {span["kind"] for span in out["spans"]}
    assert "accepted" in kinds and "rejected" not in kinds
    # The reply text is exactly the accepted and target spans, in order.
    assert "".join(sp["text"] for sp in out["spans"] if sp["kind"] != "rejected") == out["text"]


@pytest.mark.real
def test_run_on_a_terminal_colours_accepted_and_strikes_rejected(tiny_pair):
    target, _ = map(str, tiny_pair)
    env = {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "COLUMNS": "200"}
    r = specchat("run", "Count from 1 to 30, separated by commas.", "--target", target, "--drafter", "ngram",
                 "--k", "4", "--max-tokens", "60", env=env)
    assert r.returncode == 0, r.stderr
    # The theme's colours (the dark theme's, as the chat's), as this terminal shows them.
    accepted, rejected = (terminal_code(SPEC_DEFAULTS[v]) for v in ("spec-ngram", "spec-rejected"))
    assert f"\x1b[{accepted}m" in r.stdout  # accepted n-gram drafts
    assert f"\x1b[9;{rejected}m" in r.stdout  # rejected drafts, struck through
    lines = r.stdout.strip().splitlines()
    assert lines[-1].count("α") == 1 and "tok/s" in lines[-1] and "(measured)" in lines[-1]


@pytest.mark.real
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_reply_stops_it_and_keeps_what_came(tiny_pair, sig, code):
    """As the chat does with a stopped reply: what came is printed and
    recorded, a line says what stopped it, and the status is the signal's."""
    target, _ = map(str, tiny_pair)
    argv = [sys.executable, "-m", "specchat.cli.main", "run", "Count from 1 to 5000, separated by commas.",
            "--target", target, "--drafter", "off", "--max-tokens", "4000"]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    try:
        first = child.stdout.read(8)  # the reply has begun
        child.send_signal(sig)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == code, err.decode()
    assert err.decode().splitlines()[-1].startswith(f"stopped by {signal.Signals(sig).name}; the turn is saved")
    history = History(paths.history_db())
    (conv,) = history.list()
    reply = history.load(conv.id).messages[-1]
    assert reply.finish == "cancelled" and reply.content == (first + out).decode().removesuffix("\n")
    history.close()


def terminal_code(colour: str) -> str:
    """The SGR colour code rich writes for `colour` on a 16-colour terminal (FORCE_COLOR=1)."""
    return Color.parse(colour).downgrade(ColorSystem.STANDARD).get_ansi_codes()[0]


def test_unknown_drafter_is_one_line_with_a_hint():
    r = specchat("run", "hi", "--drafter", "psychic")
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == "error: unknown drafter 'psychic'"
    assert r.stderr.splitlines()[1].startswith("hint: choose one of: off, ngram")
    assert "Traceback" not in r.stderr


def test_a_broken_gguf_is_refused_clearly(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 100)
    r = specchat("run", "hi", "--target", str(bad))
    assert r.returncode == 1
    assert r.stderr.startswith("error: cannot load broken.gguf")
    assert "Traceback" not in r.stderr


def test_a_pair_not_pulled_says_how_to_pull(tmp_path):
    r = specchat("run", "hi", "--pair", "smollm2-135m", env={"SPECCHAT_HOME": str(tmp_path), "SPECCHAT_MODELS": ""})
    assert r.returncode == 1
    assert "specchat pull smollm2-135m" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.real
@pytest.mark.parametrize("drafter,k,min_alpha", [("draft", 4, 3.5), ("ngram", 4, 1.8), ("auto", 16, None)])
def test_code_edit_on_the_default_pair(default_pair, drafter, k, min_alpha):
    target, draft = map(str, default_pair)
    out = run_json(CODE_EDIT, "--target", target, "--draft", draft, "--drafter", drafter, "--k", str(k),
                   "--max-tokens", "128", "--check-identical")
    s = out["stats"]
    # auto's choices follow this machine's measured costs, so its α is not a fixed bar.
    if min_alpha is not None:
        assert s["alpha"] >= min_alpha, s
    else:
        assert sum(out["auto_choices"].values()) > 0 and set(out["auto_choices"]) <= {"off", "ngram", "memory", "draft"}
    assert s["identical"] is True, f"diverged from plain decoding at token {s['first_divergence']}"
    assert "read_rows" in out["text"]
