"""llama.cpp's native libraries, loaded before numpy's.

Some llama.cpp builds link their own copy of libstdc++ statically and export
its symbols: the prebuilt CUDA libraries some llama.cpp builds ship carry GCC 13's,
with hundreds of process-wide (GNU_UNIQUE) symbols. numpy's C++ core links
the system's libstdc++.so.6 instead. Whichever copy is loaded first owns
those symbols for the whole process, and on an H200 a process that imported
numpy first segfaulted in `llama_model_load_from_file`; loading llama.cpp
first works. So `specchat/__init__.py` loads the library here, before any
module can import numpy, and every entry point (the CLI, the tests, the
tools) gets it for free by importing specchat.

This only dlopens the library, the way llama-cpp-python will (same path, same
flags, so its own load later finds it already mapped). It does not import
llama_cpp's Python package, so `specchat --help` stays fast.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from pathlib import Path

# True when the library was mapped before numpy was imported (the safe order).
loaded_before_numpy: bool | None = None


def library_path() -> Path | None:
    """Where llama-cpp-python will load libllama from (LLAMA_CPP_LIB_PATH wins)."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        base = Path(override)
    else:
        spec = importlib.util.find_spec("llama_cpp")
        if spec is None or not spec.submodule_search_locations:
            return None
        base = Path(list(spec.submodule_search_locations)[0]) / "lib"
    names = {"darwin": ("libllama.dylib", "libllama.so"), "win32": ("llama.dll", "libllama.dll")}
    for name in names.get(sys.platform, ("libllama.so",)):
        if (base / name).is_file():
            return base / name
    return None


def preload() -> None:
    """Map libllama (and the ggml libraries it needs) now, once."""
    global loaded_before_numpy
    if loaded_before_numpy is not None:
        return
    path = library_path()
    if path is None:
        return  # not installed: the command that needs it says so
    before = "numpy" not in sys.modules
    try:
        ctypes.CDLL(str(path))
    except OSError:
        return  # llama_cpp's own import reports it, with its message
    loaded_before_numpy = before
