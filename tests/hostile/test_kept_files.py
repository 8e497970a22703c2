"""The files specchat keeps for itself in its data folder (kernels.json,
cost-curves.json, the memory's token cache) are untrusted too: a named pipe,
a link to /dev/zero, a folder or a file over its cap where one belongs is
no record, said in one warning line, and the next save writes a proper file
in its place. Each reader runs in a child process with a timeout and a bound
on its memory, so a reader that blocks or reads forever fails the test
instead of hanging it or filling the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from specchat import kept, paths
from specchat.decoding import keptcurve
from specchat.llamacpp import kernels

CHILD_SECONDS = 120  # a child imports specchat and reads one file: seconds, even on a busy machine
CHILD_MEMORY = 2 << 30  # address space a child may take: a read of /dev/zero ends in MemoryError, not swap


def child_limits() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))


def in_child(code: str, *args: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh Python with this test's SPECCHAT_HOME; a child still running after CHILD_SECONDS fails the test."""
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            capture_output=True,
            text=True,
            timeout=CHILD_SECONDS,
            stdin=subprocess.DEVNULL,
            preexec_fn=child_limits,
            env={**os.environ, "SPECCHAT_HOME": os.environ["SPECCHAT_HOME"]},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the reader was still blocked after {CHILD_SECONDS} s")


def plant(path: Path, kind: str) -> None:
    """Leave a named pipe, a link to /dev/zero or a folder where a kept file belongs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "pipe":
        os.mkfifo(path)
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()


KINDS = ["pipe", "link to /dev/zero"]
NOT_REGULAR = "is not a regular file (a folder, a link, a pipe or a device)"


def warning_for(path: Path, why: str = NOT_REGULAR) -> str:
    return f"warning: {path} {why}: specchat ignores it and writes a new one when it next saves"


PROBE = """
    import sys
    from pathlib import Path
    from specchat.llamacpp import kernels
    kernels.probe_command = lambda path, n_gpu_layers: [sys.executable, "-c", "pass"]  # a probe that decodes
    print(kernels.probed(Path(sys.argv[1]), 0).why)
    print(kernels.probed(Path(sys.argv[1]), 0).why)  # the second load: remembered
"""


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_kernels_json_is_probed_again_and_replaced(kind, tmp_path):
    path = paths.data_dir() / kernels.KEPT
    plant(path, kind)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"")
    r = in_child(PROBE, str(model))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["on: a probe decode ran with them"] * 2
    assert r.stderr.splitlines() == [warning_for(path)]  # once, though it was read twice
    assert path.is_file() and not path.is_symlink()
    assert list(json.loads(path.read_text()).values()) == [
        {"extra_bufts": True, "why": "on: a probe decode ran with them"}
    ]


CURVE = """
    from specchat.decoding import keptcurve
    print(keptcurve.saved_curve("k"), keptcurve.measured_at("k"))
    keptcurve.save_curve("k", {1: 0.01, 2: 0.015, 4: 0.03})
    print(keptcurve.saved_curve("k"))
"""


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_cost_curves_json_is_no_curve_and_is_replaced(kind):
    path = paths.data_dir() / keptcurve.CURVES
    plant(path, kind)
    r = in_child(CURVE)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["None None", "{1: 0.01, 2: 0.015, 4: 0.03}"]
    assert r.stderr.splitlines() == [warning_for(path)]
    assert path.is_file() and not path.is_symlink()


TOKENS = """
    from specchat.session.tokencache import TokenCache
    for _ in range(2):
        cache = TokenCache("m", None, n_vocab=24)
        print(cache.db is not None, cache.tokens("q", "r", lambda q, r: [1, 2]), cache.hits)
        cache.close()
"""


@pytest.mark.parametrize("sidecar", ["", "-wal", "-shm"], ids=["the cache", "its -wal", "its -shm"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_token_cache_is_replaced_by_a_working_one(kind, sidecar):
    path = paths.data_dir() / f"memory-tokens.sqlite3{sidecar}"
    plant(path, kind)
    r = in_child(TOKENS)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["True [1, 2] 0", "True [1, 2] 1"]  # the second cache had them kept
    assert r.stderr.splitlines() == [warning_for(path)]
    assert not path.is_symlink() and (path.is_file() or not path.exists())  # SQLite removes a -wal it is done with


def test_a_token_cache_that_is_no_database_is_made_anew():
    path = paths.data_dir() / "memory-tokens.sqlite3"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a database, " * 1000)
    r = in_child(TOKENS)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["True [1, 2] 0", "True [1, 2] 1"]
    assert r.stderr.splitlines() == [warning_for(path, "is not an SQLite database")]


def test_a_folder_where_a_record_belongs_is_no_record_and_nothing_breaks(capsys):
    path = paths.data_dir() / keptcurve.CURVES
    plant(path, "folder")
    assert keptcurve.saved_curve("k") is None
    keptcurve.save_curve("k", {1: 0.01, 2: 0.015, 4: 0.03})  # cannot replace a folder: costs a measurement
    assert keptcurve.saved_curve("k") is None and path.is_dir()
    assert capsys.readouterr().err.splitlines() == [warning_for(path)]


def test_a_record_over_its_cap_is_not_read_and_is_replaced_small(capsys):
    path = paths.data_dir() / keptcurve.CURVES
    path.parent.mkdir(parents=True)
    curve = {"seconds": {"1": 0.01, "2": 0.015, "4": 0.03}, "measured": 1.0e9, "saved": 1.0e9}
    padding = "x" * keptcurve.CURVES_MAX_BYTES
    path.write_text(json.dumps({"k": curve, "padding": {"seconds": {}, "note": padding}}))
    assert keptcurve.saved_curve("k") is None  # over the cap: not parsed at all
    assert capsys.readouterr().err.splitlines() == [warning_for(path, f"is over {keptcurve.CURVES_MAX_BYTES:,} bytes")]
    keptcurve.save_curve("k", {1: 0.01, 2: 0.015, 4: 0.03})
    assert path.stat().st_size < 1000 and list(json.loads(path.read_text())) == ["k"]


def test_a_record_that_is_no_json_object_is_said_once(capsys):
    path = paths.data_dir() / kernels.KEPT
    path.parent.mkdir(parents=True)
    path.write_text("[1, 2, 3]")
    assert kept.read_json(kernels.KEPT, kernels.KEPT_MAX_BYTES) == {}
    assert kept.read_json(kernels.KEPT, kernels.KEPT_MAX_BYTES) == {}
    assert capsys.readouterr().err.splitlines() == [warning_for(path, "does not read as a JSON object")]


@pytest.mark.parametrize("kind", ["pipe", "link"])
def test_saving_replaces_a_planted_pipe_or_link_and_never_writes_through_it(kind, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own file")
    path = paths.data_dir() / keptcurve.CURVES
    path.parent.mkdir(parents=True)
    if kind == "pipe":
        os.mkfifo(path)
    else:
        path.symlink_to(outside)
    r = in_child(
        'from specchat import paths; import sys; paths.write_atomic(paths.data_dir() / sys.argv[1], "{}")',
        keptcurve.CURVES,
    )
    assert r.returncode == 0, r.stderr
    assert path.is_file() and not path.is_symlink() and path.read_text() == "{}"
    assert outside.read_text() == "the user's own file"
