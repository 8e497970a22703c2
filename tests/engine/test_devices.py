"""Where models run: llama.cpp loads before numpy in every entry point, and
the backend, device and offloaded layers of target and draft are reported."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from specchat.display import device_text
from specchat.errors import SpecchatError
from specchat.llamacpp.placement import argmax_where, placement
from specchat.session.loader import placement_warning
from specchat.session.options import DecodeOptions, LoadOptions

# Each entry point, imported first in a fresh interpreter, must map libllama
# before numpy is imported (native.py says why: a CUDA build with its own
# libstdc++ segfaulted in llama_model_load_from_file when numpy came first).
ENTRY_POINTS = ["specchat.cli.main", "specchat.engine.loop", "specchat.drafters", "specchat.bench.runner",
                "specchat.tui.app", "specchat.decoding.sampling", "specchat.llamacpp.llama", "tests.conftest"]


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_llama_cpp_loads_before_numpy_whatever_is_imported_first(module):
    code = (
        f"import {module}, sys, specchat.llamacpp.native as n\n"
        "import numpy\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(n.loaded_before_numpy, 'libllama' in maps)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]


def test_numpy_imported_before_specchat_is_reported_not_hidden():
    code = "import numpy, specchat.llamacpp.native as n; print(n.loaded_before_numpy)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False"]


CUDA_LOG = [
    "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA H200) (0000:19:00.0) - 139773 MiB free\n",
    "load_tensors: offloading output layer to GPU\n",
    "load_tensors: offloading 28 repeating layers to GPU\n",
    "load_tensors: offloaded 29/29 layers to GPU\n",
]


def test_placement_reads_what_llama_cpp_said_while_loading():
    assert placement(CUDA_LOG, 29) == {"backend": "CUDA", "device": "NVIDIA H200", "gpu_layers": 29, "layers": 29}
    partial = CUDA_LOG[:1] + ["load_tensors: offloaded 10/29 layers to GPU\n"]
    assert placement(partial, 29)["gpu_layers"] == 10
    metal = ["llama_model_load_from_file_impl: using device Metal (Apple M3 Max) (unknown id) - 98304 MiB free\n",
             "load_tensors: offloaded 25/25 layers to GPU\n"]
    assert placement(metal, 25)["backend"] == "Metal"
    cpu = placement(["load_tensors: CPU_Mapped model buffer size = 1000 MiB\n"], 31)
    assert cpu["backend"] == "CPU" and cpu["gpu_layers"] == 0 and cpu["layers"] == 31


def test_a_target_on_the_gpu_with_its_draft_on_the_cpu_gets_a_warning():
    gpu = placement(CUDA_LOG, 29)
    cpu = {"backend": "CPU", "device": "x", "gpu_layers": 0, "layers": 25}
    assert "--draft-n-gpu-layers -1" in placement_warning(gpu, cpu)
    assert placement_warning(gpu, {**gpu, "layers": 25, "gpu_layers": 25}) is None
    assert placement_warning(cpu, cpu) is None  # both on the CPU: nothing to say
    assert device_text(gpu) == "CUDA · NVIDIA H200 · 29/29 layers offloaded"
    assert device_text({**gpu, "argmax": "graph"}) == "CUDA · NVIDIA H200 · 29/29 layers offloaded · argmax in llama.cpp's graph"
    assert device_text(None) == "not loaded"


def test_greedy_argmax_goes_into_the_graph_only_where_the_output_layer_is_on_a_gpu(monkeypatch):
    monkeypatch.delenv("SPECCHAT_ARGMAX", raising=False)
    gpu = placement(CUDA_LOG, 29)
    assert argmax_where(gpu) == "graph"
    assert argmax_where({**gpu, "gpu_layers": 28}) == "host"  # the output layer stayed on the CPU
    assert argmax_where({"backend": "CPU", "device": "x", "gpu_layers": 0, "layers": 31}) == "host"
    monkeypatch.setenv("SPECCHAT_ARGMAX", "host")
    assert argmax_where(gpu) == "host"
    monkeypatch.setenv("SPECCHAT_ARGMAX", "graph")
    assert argmax_where({"backend": "CPU", "device": "x", "gpu_layers": 0, "layers": 31}) == "graph"


@pytest.mark.real
def test_run_json_names_the_backend_of_target_and_draft(tiny_pair):
    target, draft = map(str, tiny_pair)
    out = subprocess.run(
        [sys.executable, "-m", "specchat.cli.main", "run", "Say hi.", "--target", target, "--draft", draft,
         "--drafter", "draft", "--k", "2", "--max-tokens", "8", "--json", "--n-gpu-layers", "0"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    devices = json.loads(out.stdout)["devices"]
    for role in ("target", "draft"):  # this machine has no GPU: llama.cpp runs all 31 layers on the CPU
        assert devices[role]["backend"] == "CPU" and devices[role]["gpu_layers"] == 0
        assert devices[role]["layers"] == 31


def test_the_stats_panel_names_where_each_model_runs():
    from specchat.tui.chat.panels import panel_text

    gpu = placement(CUDA_LOG, 29)
    text = panel_text([], {"target": gpu, "draft": None}).plain
    assert "target: CUDA · NVIDIA H200 · 29/29 layers offloaded" in text
    assert " draft: not loaded" in text
    assert "target" not in panel_text([], {"target": None, "draft": None}).plain  # a fake model: nothing to say


def test_baseline_samples_wait_for_warm_up_steps_only_where_the_model_runs_on_a_gpu():
    from specchat.decoding.costmodel import WARMUP_STEPS, warmup_steps

    assert warmup_steps(placement(CUDA_LOG, 29)) == WARMUP_STEPS == 2  # CUDA graphs re-capture after a batch
    assert warmup_steps({"backend": "CPU", "device": "x", "gpu_layers": 0, "layers": 31}) == 0
    assert warmup_steps(None) == 0


def test_the_stats_panel_says_how_much_of_the_decode_time_was_llama_cpps():
    from specchat.tui.chat.panels import panel_text

    timed = {"t_decode": 2.0, "t_llama": 1.9, "t_verify": 1.95, "tokens": 10}
    assert "inside llama.cpp 95.0% · specchat 5.0%" in panel_text([timed]).plain
    untimed = {"t_decode": 2.0, "t_llama": None, "t_verify": 1.95, "tokens": 10}  # a server's or a fake model's reply
    assert "inside llama.cpp 95.0%" in panel_text([timed, untimed]).plain
    assert "inside llama.cpp" not in panel_text([untimed]).plain


def test_the_stats_panel_says_a_server_reports_no_time_split():
    from specchat.tui.chat.panels import panel_text

    server = {"tokens": 40, "t_decode": 0.3, "alpha": 2.0, "drafted": 30, "accepted": 20}  # no t_draft, t_verify…
    text = panel_text([server]).plain
    assert "time split (all replies)\n        not reported by the server" in text
    assert "verify" not in text and "inside llama.cpp" not in text


@pytest.mark.real
def test_the_graph_argmax_picks_the_hosts_tokens_and_keeps_the_cache(tiny_pair, monkeypatch):
    """llama.cpp's backend greedy sampler, run here on the CPU backend (a GPU
    runs the same code with its own argmax kernel): the same tokens as numpy's
    argmax, for a plain step and for every row of a 5-position batch."""
    from specchat.llamacpp import llama

    monkeypatch.setenv("SPECCHAT_ARGMAX", "graph")
    m = llama.Model(tiny_pair[0], n_ctx=1024)
    try:
        prompt = m.tokenize("def add(a, b):\n    return")

        def greedy_then_batch() -> tuple[list[int], list[int]]:
            m.truncate(0)
            m.eval(prompt, n_logits=1)
            steps = []
            for _ in range(12):
                steps.append(m.argmax(0))
                m.eval(steps[-1:], n_logits=1)
            m.eval(steps[:5], n_logits=5)
            return steps, [m.argmax(j) for j in range(5)]

        on_host = greedy_then_batch()  # nobody said argmax_only yet: rows are read on the host
        assert m._greedy is None and m.device["argmax"] == "graph"  # where greedy turns will pick
        m.argmax_only(True)
        assert m._greedy is not None
        assert greedy_then_batch() == on_host
        with pytest.raises(RuntimeError, match="argmax_only"):
            m.logits(0)
        with pytest.raises(SpecchatError, match=f"at most {llama.MAX_ROWS} greedy tokens"):
            m.eval([0] * (llama.MAX_ROWS + 1), n_logits=llama.MAX_ROWS + 1)
        kept = list(m.tokens)
        m.argmax_only(False)  # the sampler comes off and the graph is warmed again, after the cache
        assert m.tokens == kept and m._greedy is None
        assert m.logits(0).shape == (m.n_vocab,)
        assert greedy_then_batch() == on_host
    finally:
        m.close()


@pytest.mark.real
def test_where_the_device_gives_no_greedy_token_the_host_keeps_the_argmax(tiny_pair, monkeypatch):
    from specchat.llamacpp import llama

    monkeypatch.setenv("SPECCHAT_ARGMAX", "graph")
    # A device without the argmax op: llama.cpp attaches the sampler anyway and its tokens stay empty.
    monkeypatch.setattr(llama.C, "llama_get_sampled_token_ith", lambda ctx, i: -1)
    m = llama.Model(tiny_pair[0], n_ctx=512)
    try:
        m.argmax_only(True)
        assert m._greedy is None and not m.graph_argmax and m.device["argmax"] == "host"
        m.eval(m.tokenize("Hello"), n_logits=1)
        assert m.argmax(0) == int(np.argmax(m._logits(0)))
    finally:
        m.close()


@pytest.mark.real
@pytest.mark.parametrize("drafter", ["off", "draft", "ngram"])
def test_a_greedy_reply_is_the_same_whether_the_argmax_is_in_the_graph_or_on_the_host(tiny_pair, monkeypatch, drafter):
    from specchat.session.loader import open_session

    prompt = ("Rewrite this function with the variable `total` renamed to `acc`. Reply with code only.\n\n"
              "def sum_squares(values):\n    total = 0\n    for v in values:\n        total += v * v\n    return total\n")
    replies = {}
    for where in ("host", "graph"):
        monkeypatch.setenv("SPECCHAT_ARGMAX", where)
        s = open_session(
            LoadOptions(target=str(tiny_pair[0]), draft=str(tiny_pair[1]), ctx=1024),
            DecodeOptions(drafter=drafter, k=4, max_tokens=48),
        )
        try:
            replies[where] = s.reply(prompt).tokens
            assert s.devices["target"]["argmax"] == where
            if drafter == "draft":
                assert s.devices["draft"]["argmax"] == where
        finally:
            s.close()
    assert len(replies["host"]) > 20 and replies["graph"] == replies["host"]
