"""llama.cpp's extra CPU buffer types (repacked weights, AMX): off where they
crash, probed in a child process elsewhere, and a crash there is one line and
a fallback, never a dead terminal. On an AMX machine the real probe crashes
for real; on every machine a child that kills itself with SIGSEGV stands in
for the crash, so the fallback runs everywhere."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from specchat import paths
from specchat.cli.main import app
from specchat.config import read_settings
from specchat.display import device_text
from specchat.llamacpp import kernels
from specchat.session.options import load_options

CRASH = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
SURVIVE = [sys.executable, "-c", "pass"]


@pytest.fixture
def no_amx(monkeypatch):
    """A CPU without AMX, whatever this one has: auto probes instead of turning them off."""
    monkeypatch.setattr(kernels, "has_amx", lambda: False)
    monkeypatch.delenv("SPECCHAT_EXTRA_BUFTS", raising=False)


def child(monkeypatch, argv: list[str]) -> list[int]:
    """Make the probe run `argv`; the list counts the probes run."""
    runs: list[int] = []

    def command(path, n_gpu_layers):
        runs.append(1)
        return argv

    monkeypatch.setattr(kernels, "probe_command", command)
    return runs


def test_a_probe_that_crashes_turns_them_off_in_one_line_and_is_remembered(no_amx, monkeypatch, tiny_pair):
    runs = child(monkeypatch, CRASH)
    found = kernels.choose(tiny_pair[0], 0)
    assert (found.extra_bufts, found.why) == (False, "off: a probe decode with them crashed (SIGSEGV)")
    assert found.warning == (
        f"llama.cpp crashed (SIGSEGV) decoding {tiny_pair[0].name} with its extra CPU buffer types; "
        "loading it without them from now on (--extra-bufts on tries them again)"
    )
    stored = json.loads((paths.data_dir() / "kernels.json").read_text())
    assert list(stored.values()) == [{"extra_bufts": False, "why": "off: a probe decode with them crashed (SIGSEGV)"}]
    assert next(iter(stored)).endswith("/llama")  # keyed by build and CPU, then the model's architecture
    again = kernels.choose(tiny_pair[0], 0)  # the next load: remembered, no probe, no second warning
    assert (again.extra_bufts, again.warning, len(runs)) == (False, None, 1)


def test_a_probe_that_survives_keeps_them_on(no_amx, monkeypatch, tiny_pair):
    child(monkeypatch, SURVIVE)
    found = kernels.choose(tiny_pair[0], 0)
    assert (found.extra_bufts, found.why, found.warning) == (True, "on: a probe decode ran with them", None)


def test_a_probe_that_cannot_load_the_model_is_not_remembered(no_amx, monkeypatch, tiny_pair):
    runs = child(monkeypatch, [sys.executable, "-c", "raise SystemExit(3)"])
    assert kernels.choose(tiny_pair[0], 0).extra_bufts is True
    kernels.choose(tiny_pair[0], 0)
    assert len(runs) == 2 and not (paths.data_dir() / "kernels.json").exists()


def test_on_an_amx_cpu_auto_turns_them_off_without_a_probe(monkeypatch, tiny_pair):
    monkeypatch.setattr(kernels, "has_amx", lambda: True)
    monkeypatch.delenv("SPECCHAT_EXTRA_BUFTS", raising=False)
    runs = child(monkeypatch, CRASH)
    found = kernels.choose(tiny_pair[0], 0)
    assert not found.extra_bufts and found.why.startswith("off: this CPU has AMX") and not runs


@pytest.mark.real
def test_the_real_probe_answers_what_its_child_met(no_amx, tiny_pair):
    """The real child: on an AMX CPU llama.cpp's AMX kernel kills it (SIGSEGV),
    elsewhere it decodes; either way this process lives and the answer says which."""
    argv = kernels.probe_command(tiny_pair[0], 0)
    fate = subprocess.run(argv, capture_output=True, timeout=300).returncode
    found = kernels.probe(tiny_pair[0], 0)
    if fate < 0:
        assert found.why == f"off: a probe decode with them crashed ({signal.Signals(-fate).name})"
    else:
        assert (fate, found.extra_bufts) == (0, True)
    if "amx_int8" in kernels.cpu_flags() and kernels.has_amx():
        assert fate == -signal.SIGSEGV  # the upstream bug this module exists for


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})  # a warning line unwrapped


@pytest.mark.real
def test_run_falls_back_with_one_warning_line_when_the_probe_crashes(no_amx, monkeypatch, tiny_pair):
    child(monkeypatch, CRASH)
    r = invoke("run", "Say hi", "--target", str(tiny_pair[0]), "--max-tokens", "4", "--json", "--no-history")
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines() == [
        f"warning: llama.cpp crashed (SIGSEGV) decoding {tiny_pair[0].name} with its extra CPU buffer types; "
        "loading it without them from now on (--extra-bufts on tries them again)"
    ]
    target = json.loads(r.stdout)["devices"]["target"]
    assert (target["extra_bufts"], target["extra_bufts_why"]) == (False, "off: a probe decode with them crashed (SIGSEGV)")
    assert json.loads(r.stdout)["stats"]["tokens"] == 4


@pytest.mark.real
def test_extra_bufts_on_where_they_crash_is_one_error_line(no_amx, monkeypatch, tiny_pair):
    child(monkeypatch, CRASH)
    r = invoke("run", "Say hi", "--target", str(tiny_pair[0]), "--max-tokens", "4", "--extra-bufts", "on")
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        f"error: llama.cpp cannot decode {tiny_pair[0].name} with its extra CPU buffer types here "
        "(off: a probe decode with them crashed (SIGSEGV))",
        "hint: use --extra-bufts auto or off",
    ]


def test_a_bad_extra_bufts_is_one_line(no_amx):
    r = invoke("run", "Say hi", "--extra-bufts", "maybe")
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [
        "error: --extra-bufts must be auto, on or off, not 'maybe'",
        "hint: auto turns them off where they crash",
    ]


@pytest.mark.real
def test_the_settings_and_the_environment_choose_and_run_json_says_why(no_amx, monkeypatch, tiny_pair):
    runs = child(monkeypatch, CRASH)
    settings = paths.settings_file()
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text('extra_bufts = "off"\n')
    r = invoke("run", "Say hi", "--target", str(tiny_pair[0]), "--max-tokens", "2", "--json", "--no-history")
    assert r.exit_code == 0, r.output
    target = json.loads(r.stdout)["devices"]["target"]
    assert (target["extra_bufts"], target["extra_bufts_why"]) == (False, "off, by settings.toml")
    monkeypatch.setenv("SPECCHAT_EXTRA_BUFTS", "off")
    load = load_options()
    assert kernels.choose(tiny_pair[0], 0, load.extra_bufts, load.extra_bufts_from).why == "off, by SPECCHAT_EXTRA_BUFTS"
    assert load_options(extra_bufts="on").extra_bufts_from == "--extra-bufts"  # the flag before the environment
    assert not runs  # off is off: nothing probed


def test_a_bad_setting_is_named_and_auto_kept(specchat_home):
    settings = paths.settings_file()
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text('extra_bufts = "sometimes"\n')
    loaded = read_settings()
    assert loaded.settings.extra_bufts == "auto"
    assert loaded.errors == [
        f"{settings}, line 1: extra_bufts must be auto, on or off, not 'sometimes'; using 'auto'"
    ]


def test_f2_and_bench_name_why_they_are_off():
    device = {"backend": "CPU", "device": "Xeon", "gpu_layers": 0, "layers": 31, "argmax": "host",
              "extra_bufts": False, "extra_bufts_why": "off: this CPU has AMX, whose llama.cpp kernel can crash"}
    assert device_text(device) == (
        "CPU · Xeon · 0/31 layers offloaded · extra CPU buffer types off: this CPU has AMX, "
        "whose llama.cpp kernel can crash"
    )
    assert device_text({**device, "extra_bufts": True}) == "CPU · Xeon · 0/31 layers offloaded"


def test_a_kernels_json_over_its_cap_is_probed_again_and_replaced(no_amx, monkeypatch, tmp_path, capsys):
    runs = child(monkeypatch, SURVIVE)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"")  # no architecture to read: keyed "unknown"
    path = paths.data_dir() / "kernels.json"
    path.parent.mkdir(parents=True)
    planted = {"extra_bufts": False, "why": "off: planted"}
    path.write_text(json.dumps({kernels._key(model): planted, "padding": "x" * kernels.KEPT_MAX_BYTES}))
    found = kernels.choose(model, 0)
    assert (found.why, len(runs)) == ("on: a probe decode ran with them", 1)
    assert json.loads(path.read_text()) == {kernels._key(model): {"extra_bufts": True, "why": found.why}}
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path} is over {kernels.KEPT_MAX_BYTES:,} bytes: specchat ignores it and writes a new one "
        "when it next saves"
    ]
