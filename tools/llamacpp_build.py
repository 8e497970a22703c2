"""Build llama.cpp's own programs from the source vendored in the installed
llama-cpp-python, cached outside the clone: the tests' llama-server and RPC
worker, and the lookup and speculative examples that
`python -m tools.native_compare` runs beside specchat.

Cache: SPECCHAT_LLAMA_SERVER_CACHE, default ~/.cache/specchat/llama-server,
one folder per llama-cpp-python version:
    <version>/src                 the vendored llama.cpp (from the sdist, or SPECCHAT_LLAMA_CPP_SRC)
    <version>/build-<tag>         cmake's build tree; <tag> is a short hash of the flags and targets
    <version>/bin-<tag>/NAME      the binaries

A binary or build tree made with other flags is never reused: new flags are
a new tag, hence new folders and a new build (10–30 minutes on 2 cores). A
build holds a lock, so two runs never build at once. The sdist comes from
PyPI with `pip download`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path

COMMON_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DGGML_OPENMP=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
]


class Build:
    """Some of llama.cpp's programs, built with these cmake flags."""

    def __init__(self, flags: list[str], targets: list[str]) -> None:
        self.flags, self.targets = flags, targets
        self.tag = hashlib.sha256(" ".join(flags + targets).encode()).hexdigest()[:8]

    @property
    def binaries(self) -> Path:
        return cache_dir() / f"bin-{self.tag}"

    def binary(self, name: str) -> Path:
        """The cached binary, built first (with the others) when the cache is cold."""
        home = cache_dir()
        if not self.binaries.exists():
            home.mkdir(parents=True, exist_ok=True)
            with open(home / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be building it right now
                if not self.binaries.exists():
                    self._build(home)
        return self.binaries / name

    def _build(self, home: Path) -> None:
        """Every target in one build; the folder appears whole or not at all."""
        src = source(home)
        build = home / f"build-{self.tag}"
        log = open(home / "build.log", "a")
        print(f"building {' and '.join(self.targets)} from {src} (log: {home / 'build.log'})", file=sys.stderr)
        subprocess.run(["cmake", "-S", str(src), "-B", str(build), *self.flags], check=True, stdout=log, stderr=log)
        jobs = str(os.cpu_count() or 2)
        subprocess.run(
            ["cmake", "--build", str(build), "--target", *self.targets, "-j", jobs], check=True, stdout=log, stderr=log
        )
        tmp = self.binaries.with_name(self.binaries.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for name in self.targets:
            shutil.copy2(build / "bin" / name, tmp / name)
        tmp.replace(self.binaries)


def cache_dir() -> Path:
    root = Path(os.environ.get("SPECCHAT_LLAMA_SERVER_CACHE", "~/.cache/specchat/llama-server")).expanduser()
    return root / version("llama-cpp-python")


def source(home: Path) -> Path:
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
