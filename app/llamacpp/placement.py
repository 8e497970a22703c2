"""Where a model runs (backend, device, offloaded layers), read from
llama.cpp's own load log, and where greedy picks are taken there."""

from __future__ import annotations

import os
import re

from specchat.llamacpp.kernels import cpu_name


def placement(load_log: list[str], layers: int) -> dict:
    """Backend, device and offloaded layers of a model, as llama.cpp reported
    them while loading it ("using device CUDA0 (NVIDIA H200)", "offloaded
    29/29 layers to GPU"); a build without GPU offload runs on the CPU."""
    text = "".join(load_log)
    used = re.findall(r"using device (\S+) \((.*?)\)", text)
    offloaded = re.search(r"offloaded (\d+)/(\d+) layers to GPU", text)
    gpu_layers = int(offloaded.group(1)) if offloaded else 0
    if offloaded:
        layers = int(offloaded.group(2))
    if gpu_layers and used:
        name, description = used[0]
        return {"backend": re.sub(r"\d+$", "", name), "device": description, "gpu_layers": gpu_layers, "layers": layers}
    return {"backend": "CPU", "device": cpu_name(), "gpu_layers": 0, "layers": layers}


def argmax_where(device: dict) -> str:
    """Where greedy picks pay: "graph" (llama.cpp's argmax in its compute
    graph, one token copied back per row) where the output layer runs on a
    GPU; "host" (numpy on the copied row) on the CPU, whose in-graph argmax
    is a single-threaded scalar loop (docs/gpu.md has what it cost).
    SPECCHAT_ARGMAX=host|graph overrides, to compare the two."""
    forced = os.environ.get("SPECCHAT_ARGMAX", "")
    if forced in ("host", "graph"):
        return forced
    return "graph" if device["gpu_layers"] and device["gpu_layers"] >= device["layers"] else "host"
