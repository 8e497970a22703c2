"""Which of llama.cpp's CPU kernels a model may use on this machine.

llama.cpp's CPU backend has "extra buffer types": weights repacked at load
for the CPU's wide instructions, and on Intel CPUs with AMX (Sapphire
Rapids and later: cloud machines such as AWS m7i, GCP C3/C4, Azure Dv5) a
buffer for AMX tiles. The AMX kernel (`ggml_backend_amx_mul_mat`) crashes
with SIGSEGV at the first decode on such CPUs, an upstream bug that kills
the whole process. Loading with `use_extra_bufts = false` avoids it.

The choice, `extra_bufts`, is `auto`, `on` or `off`: `--extra-bufts`, else
SPECCHAT_EXTRA_BUFTS, else `extra_bufts` in settings.toml, else `auto`
(resolved by the command, session/options.py, and handed to `choose`):

- on a CPU with AMX (compiled into this llama.cpp), `auto` loads without
  the extra buffer types;
- elsewhere `auto` runs a short probe decode in a child process the first
  time it meets a (llama.cpp build, CPU, model architecture), and remembers
  the answer in the data folder (`kernels.json`): a child that dies of a
  signal means the extra buffer types are left off for that key, said in one
  line, instead of a dead terminal.

Where a model runs, F2 and `run --json` (`devices`) show the choice and why.
"""

from __future__ import annotations

import hashlib
import platform
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from specchat import kept
from specchat.errors import SpecchatError

PROBE_TIMEOUT = 300.0  # seconds for the child to load the model and decode: a big model from a cold disk
PROBE_SHAPES = (1, 2, 5, 17, 33)  # batch sizes a turn decodes: a step, short and long verifies, a prefill chunk


@dataclass(frozen=True)
class Kernels:
    """The choice for one model: extra buffer types on or off, and why."""

    extra_bufts: bool
    why: str
    warning: str | None = None  # one line for the user where a probe just crashed
    remembered: bool = True  # kept for the next load (a probe that could not run is not)


def choose(path: Path, n_gpu_layers: int, value: str = "auto", where: str = "the default") -> Kernels:
    """Whether to load `path` with the extra buffer types: `value` (auto, on
    or off) as chosen `where` (a flag, the environment, the settings)."""
    if value == "off":
        return Kernels(False, f"off, by {where}")
    if value == "auto" and has_amx():
        return Kernels(False, "off: this CPU has AMX, whose llama.cpp kernel can crash (--extra-bufts on to use it)")
    found = probed(path, n_gpu_layers, again=value == "on")
    if value == "on" and not found.extra_bufts:
        raise SpecchatError(
            f"llama.cpp cannot decode {path.name} with its extra CPU buffer types here ({found.why})",
            hint="use --extra-bufts auto or off",
        )
    return found


def probed(path: Path, n_gpu_layers: int, again: bool = False) -> Kernels:
    """The probe's answer for this (build, CPU, architecture): remembered, or
    found now; `again` probes once more where a crash was remembered."""
    key = _key(path)
    known = _load().get(key)
    if again and isinstance(known, dict) and known.get("extra_bufts") is False:
        known = None
    if isinstance(known, dict) and isinstance(known.get("extra_bufts"), bool) and isinstance(known.get("why"), str):
        return Kernels(known["extra_bufts"], known["why"])
    found = probe(path, n_gpu_layers)
    if found.remembered:
        _remember(key, found)
    return found


def has_amx() -> bool:
    """This llama.cpp was built with AMX and the CPU has it."""
    import llama_cpp as C

    built = "AMX_INT8 = 1" in C.llama_print_system_info().decode(errors="replace")
    return built and "amx_int8" in cpu_flags()


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def build_id() -> str:
    """llama.cpp's build as it says itself: its version and what it was compiled for, hashed."""
    import llama_cpp as C

    build = C.llama_print_system_info().decode(errors="replace") + getattr(C, "__version__", "")
    return hashlib.sha256(build.encode()).hexdigest()[:12]


def _key(path: Path) -> str:
    """llama.cpp's build, the CPU and the model's architecture."""
    from specchat.store.compat import read_architecture

    cpu = cpu_name() + " " + " ".join(sorted(cpu_flags()))
    digest = hashlib.sha256(f"{build_id()}\n{cpu}".encode()).hexdigest()[:16]
    return f"{digest}/{read_architecture(path) or 'unknown'}"


def probe_command(path: Path, n_gpu_layers: int) -> list[str]:
    """The child that loads `path` with the extra buffer types and decodes (_probe_child)."""
    return [sys.executable, "-m", "specchat.llamacpp.kernels", str(path), str(n_gpu_layers)]


def probe(path: Path, n_gpu_layers: int) -> Kernels:
    """Load and decode in a child process with the extra buffer types on."""
    argv = probe_command(path, n_gpu_layers)
    try:
        child = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Kernels(False, f"off: a probe decode did not finish in {PROBE_TIMEOUT:.0f} s", remembered=False)
    except OSError as err:
        return Kernels(False, f"off: the probe could not start ({err.strerror})", remembered=False)
    if child.returncode < 0:
        name = _signal_name(-child.returncode)
        return Kernels(
            False,
            f"off: a probe decode with them crashed ({name})",
            warning=f"llama.cpp crashed ({name}) decoding {path.name} with its extra CPU buffer types; "
            "loading it without them from now on (--extra-bufts on tries them again)",
        )
    if child.returncode != 0:  # it could not load the model: the real load says why
        return Kernels(True, "on: the probe could not load the model", remembered=False)
    return Kernels(True, "on: a probe decode ran with them")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


KEPT = "kernels.json"  # in the data folder
KEPT_MAX_BYTES = 1 << 20  # a bigger one is no record of specchat's: an answer takes about 100 bytes


def _load() -> dict:
    return kept.read_json(KEPT, KEPT_MAX_BYTES)


def _remember(key: str, found: Kernels) -> None:
    """Keep the answer for the next load; a folder that cannot be written only costs a probe next time."""
    data = _load()
    data[key] = {"extra_bufts": found.extra_bufts, "why": found.why}
    kept.keep(KEPT, data)


def _probe_child(path: str, n_gpu_layers: int) -> int:
    """The child: load with the extra buffer types and decode each shape once."""
    import llama_cpp as C

    quiet = C.llama_log_callback(lambda level, text, data: None)  # kept alive while llama.cpp may call it
    C.llama_log_set(quiet, None)
    C.llama_backend_init()
    mp = C.llama_model_default_params()
    mp.n_gpu_layers = 999 if n_gpu_layers < 0 else n_gpu_layers
    mp.use_extra_bufts = True
    model = C.llama_model_load_from_file(path.encode(), mp)
    if not model:
        return 3
    cp = C.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 64
    cp.n_threads = cp.n_threads_batch = 2
    ctx = C.llama_init_from_model(model, cp)
    if not ctx:
        return 4
    batch = C.llama_batch_init(64, 0, 1)
    for n in PROBE_SHAPES:
        batch.n_tokens = n
        for i in range(n):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = 0, i, 1, True
            batch.seq_id[i][0] = 0
        if C.llama_decode(ctx, batch) != 0:
            return 5
        C.llama_memory_seq_rm(C.llama_get_memory(ctx), 0, 0, -1)
    return 0


if __name__ == "__main__":
    sys.exit(_probe_child(sys.argv[1], int(sys.argv[2])))
