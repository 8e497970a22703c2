"""What the store counts as ready, how pairs resolve, and what `rm` deletes."""

from __future__ import annotations

import hashlib

import pytest

from specchat.errors import SpecchatError
from specchat.store import files as store
from specchat.store.catalog import ModelFile, load_catalog
from specchat.store.pairs import default_pair_name, file_state, pair_status, remove_pair, resolve_pair
from tests.support.hostile import put

PAIRS = """
[pairs.one]
target = { repo = "org/big-GGUF", filename = "big.gguf" }
draft = { repo = "org/small-GGUF", filename = "small.gguf" }

[pairs.two]
target = { repo = "org/other-GGUF", filename = "other.gguf" }
draft = { repo = "org/small-GGUF", filename = "small.gguf" }
"""


@pytest.fixture
def pairs(write_pairs):
    write_pairs(PAIRS)
    return load_catalog()


def test_ready_needs_the_file_and_a_matching_record(pairs):
    f = pairs.get("one").target
    assert not store.is_ready(f)
    path = put(f, b"x" * 100, record=False)
    assert not store.is_ready(f)  # in place, but never verified
    assert file_state(f)["state"] == "unverified"
    path.unlink()
    put(f, b"x" * 100)
    assert store.is_ready(f)
    with open(path, "ab") as grow:  # changed after it verified
        grow.write(b"y")
    assert not store.is_ready(f)


def test_record_must_match_the_catalog_pin(specchat_home):
    data = b"model bytes"
    f = ModelFile(repo="org/r", filename="m.gguf", sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    put(f, data)
    assert store.is_ready(f)
    assert not store.is_ready(ModelFile(repo="org/r", filename="m.gguf", sha256="0" * 64))
    assert not store.is_ready(ModelFile(repo="org/r", filename="m.gguf", size=len(data) + 1))


def test_layout_and_record(pairs):
    f = pairs.get("one").target
    path = put(f, b"abc")
    assert path == store.store_root() / "org--big-GGUF" / "big.gguf"
    record = store.read_record(f)
    assert record["sha256"] == hashlib.sha256(b"abc").hexdigest()
    assert (record["size"], record["source"], record["repo"], record["filename"]) == (3, "hub", "org/big-GGUF", "big.gguf")


def test_resolve_pair(pairs):
    with pytest.raises(SpecchatError) as err:
        resolve_pair("one")
    assert err.value.message == "pair 'one' is not pulled yet" and err.value.hint == "specchat pull one"
    put(pairs.get("one").target, b"t")
    with pytest.raises(SpecchatError, match="not pulled yet"):
        resolve_pair("one")  # half a pair is not a pair
    put(pairs.get("one").draft, b"d")
    target, draft = resolve_pair("one")
    assert (target.read_bytes(), draft.read_bytes()) == (b"t", b"d")


def test_resolve_pair_defaults_and_unknown_names(specchat_home):
    assert default_pair_name() == "qwen2.5-coder-1.5b"
    with pytest.raises(SpecchatError, match="pair 'qwen2.5-coder-1.5b' is not pulled yet") as err:
        resolve_pair(None)
    assert err.value.hint == "specchat pull qwen2.5-coder-1.5b"
    with pytest.raises(SpecchatError, match="unknown pair 'nope'") as err:
        resolve_pair("nope")
    assert "smollm2-135m" in err.value.hint


def test_resolve_pair_with_an_explicit_root(tmp_path, pairs):
    root = tmp_path / "elsewhere"
    with pytest.raises(SpecchatError):
        resolve_pair("one", root=root)
    for f in (pairs.get("one").target, pairs.get("one").draft):
        path = store.file_path(f, root)
        path.parent.mkdir(parents=True, exist_ok=True)
        store.partial_path(path).write_bytes(b"z")
        store.install(store.partial_path(path), f, sha256="s", size=1, source="pypi", root=root)
    assert resolve_pair("one", root=root)[0].is_relative_to(root)


def test_pair_status_reports_states_and_the_default(pairs):
    path = store.file_path(pairs.get("one").target)
    path.parent.mkdir(parents=True)
    store.partial_path(path).write_bytes(b"1234")
    status = {p["name"]: p for p in pair_status()}
    assert status["qwen2.5-coder-1.5b"]["default"] is True
    assert [p for p in status.values() if p["default"]] == [status["qwen2.5-coder-1.5b"]]
    one = status["one"]
    assert one["custom"] is True and one["ready"] is False
    assert one["target"]["state"] == "partial" and one["target"]["partial_bytes"] == 4
    assert one["draft"]["state"] == "missing"
    assert status["smollm2-135m"]["same_file"] is True
    assert status["smollm2-135m"]["target"]["size"] == 98_362_432


def test_shared_file_is_stored_once_and_rm_keeps_it_for_the_other_pair(pairs):
    one, two = pairs.get("one"), pairs.get("two")
    assert store.file_path(one.draft) == store.file_path(two.draft)
    for f in (one.target, one.draft, two.target):
        put(f, f.filename.encode())
    result = remove_pair("one")
    assert result["removed"] == [str(store.file_path(one.target))]
    assert result["kept"] == {str(store.file_path(one.draft)): ["two"]}
    assert not store.file_path(one.target).exists() and not (store.store_root() / "org--big-GGUF").exists()
    assert resolve_pair("two")

    result = remove_pair("two")
    assert sorted(result["removed"]) == sorted([str(store.file_path(two.target)), str(store.file_path(two.draft))])
    assert list(store.store_root().iterdir()) == []


def test_rm_also_removes_partial_downloads(pairs):
    path = store.file_path(pairs.get("one").target)
    path.parent.mkdir(parents=True)
    store.partial_path(path).write_bytes(b"half")
    store.partial_meta_path(path).write_text("{}")
    assert remove_pair("one")["removed"] == [str(path)]
    assert not path.parent.exists()
