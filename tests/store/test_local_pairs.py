"""Local pairs: `specchat models add` registers GGUF files the user already
has, by reference; `models` lists them, `run --pair` opens them, a changed
file is refused, and `rm` forgets the pair but keeps the files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specchat.cli.main import app
from specchat.store import local


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def specchat(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specchat.cli.main", *args], capture_output=True, text=True, timeout=600, env=dict(os.environ)
    )


def lmstudio(tmp_path: Path, source: Path, publisher: str = "bartowski") -> Path:
    """`source` hard-linked where LM Studio keeps a download: models/PUBLISHER/REPO/FILE."""
    folder = tmp_path / ".lmstudio" / "models" / publisher / (source.stem + "-GGUF")
    folder.mkdir(parents=True, exist_ok=True)
    os.link(source, folder / source.name)
    return folder / source.name


def one_line_error(result) -> list[str]:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return lines


@pytest.mark.real
def test_add_records_size_mtime_and_sha256_and_run_decodes_on_it(specchat_home, tmp_path, tiny_pair):
    target = lmstudio(tmp_path, tiny_pair[0])
    result = cli("models", "add", "mine", "--target", str(target))
    assert result.exit_code == 0, result.output
    assert "added local pair mine: no draft model; chat with `specchat --pair mine`" in result.stdout
    saved = json.loads((specchat_home / "config" / "local-pairs.json").read_text())["pairs"]["mine"]
    st = target.stat()
    assert saved["target"] == {
        "path": str(target),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "sha256": local.sha256_of(tiny_pair[0]),
    }
    assert saved["draft"] is None
    assert not list(specchat_home.rglob("*.gguf"))  # nothing copied into the store

    r = specchat("run", "Count from 1 to 10.", "--pair", "mine", "--drafter", "ngram", "--max-tokens", "6", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["pair"] == "mine" and out["stats"]["tokens"] == 6 and len(out["tokens"]) == 6


@pytest.mark.real
def test_a_target_alone_refuses_the_draft_model_drafters(specchat_home, tmp_path, tiny_pair):
    target = lmstudio(tmp_path, tiny_pair[0])
    assert cli("models", "add", "solo", "--target", str(target)).exit_code == 0
    for drafter in ("draft", "hybrid"):
        lines = one_line_error(cli("run", "hi", "--pair", "solo", "--drafter", drafter, "--max-tokens", "2"))
        assert lines == [
            f"error: pair 'solo' has no draft model, so the {drafter} drafter cannot run on it",
            "hint: use --drafter auto, ngram, grammar or off, or give the pair a draft (--draft PATH)",
        ]


@pytest.mark.real
def test_a_pair_of_one_family_is_added_and_listed_with_its_paths(specchat_home, tmp_path, default_pair):
    target, draft = (lmstudio(tmp_path, p, "Qwen") for p in default_pair)
    result = cli("models", "add", "coder", "--target", str(target), "--draft", str(draft))
    assert result.exit_code == 0, result.output
    assert "added local pair coder: draft and target share a tokenizer (llama.cpp's rule)" in result.stdout

    lines = cli("models").stdout.splitlines()
    at = lines.index("  coder (local): ready")
    assert lines[at + 1] == "    target     1.1 GB  local, unchanged since added"
    assert lines[at + 2].strip() == str(target)
    assert lines[at + 3] == "    draft    491.4 MB  local, unchanged since added"
    assert lines[at + 4].strip() == str(draft)

    data = json.loads(cli("models", "--json").stdout)
    (entry,) = data["local"]
    assert entry["name"] == "coder" and entry["ready"] is True
    assert entry["target"]["path"] == str(target) and entry["target"]["size"] == 1_117_320_768
    assert entry["draft"]["state"] == "verified" and entry["draft"]["size"] == 491_400_064
    assert entry["local"] is True and all(not p["local"] for p in data["pairs"])
    assert local.resolve(local.get("coder")) == (target, draft)  # what --pair coder opens

    from specchat.store.pairs import known_pair
    from specchat.tui.state.models import Models

    known_pair("coder")  # the chat's --pair check takes it
    chat = Models()
    assert chat.is_pulled("coder")
    (info,) = [p for p in chat.pairs() if p.name == "coder"]
    assert info.pulled and info.size == 1_117_320_768 + 491_400_064
    assert info.description == f"local: {target.name} drafted by {draft.name}"


@pytest.mark.real
def test_smollm_cannot_draft_for_qwen_and_the_rule_is_named(specchat_home, tmp_path, tiny_pair, default_pair):
    target = lmstudio(tmp_path, default_pair[0], "Qwen")
    draft = lmstudio(tmp_path, tiny_pair[0])
    lines = one_line_error(cli("models", "add", "mixed", "--target", str(target), "--draft", str(draft)))
    assert lines[-2] == "error: draft and target tokenizers are incompatible: BOS token id differs: target 151643, draft 1"
    assert not (specchat_home / "config" / "local-pairs.json").exists()


@pytest.mark.real
def test_changed_bytes_are_refused_and_a_new_mtime_alone_is_not(specchat_home, tmp_path, tiny_pair):
    target = tmp_path / "models" / "smol.gguf"
    target.parent.mkdir()
    shutil.copyfile(tiny_pair[0], target)  # a copy: its bytes are changed below
    assert cli("models", "add", "smol", "--target", str(target)).exit_code == 0

    os.utime(target, ns=(1, 1))  # touched, same bytes: hashed again, still the pair
    assert local.resolve(local.get("smol")) == (target, None)
    assert local.get("smol").target.mtime_ns == 1  # the new mtime recorded: no hash next time

    os.utime(target, ns=(2, 2))  # touched again, then only listed (`models`, F4): recorded there too
    assert local.state(local.get("smol").target) == "ok"
    assert local.get("smol").target.mtime_ns == 2

    with open(target, "r+b") as f:
        f.seek(5_000_000)
        old = f.read(1)
        f.seek(5_000_000)
        f.write(bytes([old[0] ^ 0xFF]))
    lines = one_line_error(cli("run", "hi", "--pair", "smol", "--drafter", "ngram", "--max-tokens", "2"))
    assert lines == [
        f"error: the target of local pair 'smol' changed since it was added: {target} no longer matches its "
        "recorded size and sha256",
        f"hint: if the new file is what you want, register it again: specchat models add smol --target {target}",
    ]
    listed = cli("models").stdout
    assert f"local, CHANGED since added; fix: specchat models add smol --target {target}" in listed

    target.unlink()
    lines = one_line_error(cli("run", "hi", "--pair", "smol", "--drafter", "ngram", "--max-tokens", "2"))
    assert lines[0] == f"error: the target of local pair 'smol' is gone: no file at {target}"
    from specchat.tui.state.models import Models

    assert Models().is_pulled("smol")  # the chat opens it and names the fix; a local pair is never offered a pull


@pytest.mark.real
def test_rm_forgets_a_local_pair_and_keeps_its_files(specchat_home, tmp_path, tiny_pair):
    target = lmstudio(tmp_path, tiny_pair[0])
    assert cli("models", "add", "keep", "--target", str(target)).exit_code == 0
    result = cli("rm", "keep")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"forgot local pair keep; its files stay where they are: {target}\n"
    assert target.is_file() and target.stat().st_size == tiny_pair[0].stat().st_size
    assert local.get("keep") is None
    assert "keep (local)" not in cli("models").stdout
    lines = one_line_error(cli("run", "hi", "--pair", "keep", "--max-tokens", "2"))
    assert lines[0] == "error: unknown pair 'keep'"


def test_bad_names_and_files_are_one_line_each(specchat_home, tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("not a model\n")
    cases = {
        ("models", "add", "qwen2.5-coder-1.5b", "--target", str(text)): "error: 'qwen2.5-coder-1.5b' is the name of a catalog pair",
        ("models", "add", "a b", "--target", str(text)): "error: 'a b' is not a usable pair name",
        ("models", "add", "x", "--target", str(tmp_path / "none.gguf")): f"error: --target: no model file at {tmp_path / 'none.gguf'}",
        ("models", "add", "x", "--target", str(tmp_path)): f"error: --target: no model file at {tmp_path}",
        ("models", "add", "x", "--target", str(text)): f"error: {text} is not a readable GGUF file (no GGUF magic)",
    }
    for args, first in cases.items():
        lines = one_line_error(cli(*args))
        assert lines[0] == first and len(lines) == 2 and lines[1].startswith("hint: "), lines
    assert not (specchat_home / "config" / "local-pairs.json").exists()


@pytest.mark.real
async def test_the_chat_opens_a_local_pair_and_replies_on_it(specchat_home, tmp_path, tiny_pair):
    from specchat.config import Settings
    from specchat.tui.chat.panels import StatusBar
    from specchat.tui.state.models import Models
    from tests.support.tui import make_app, send, wait_until

    target = lmstudio(tmp_path, tiny_pair[0])
    assert cli("models", "add", "solo", "--target", str(target)).exit_code == 0
    app = make_app(tmp_path, models=Models(), settings=Settings(), pair="solo", drafter="ngram", k=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=120)
        assert str(app.query_one(StatusBar).render()).startswith("solo · drafter ngram · k 4")
        reply = await send(pilot, "Count from 1 to 5.")
        assert reply.stats["tokens"] > 0 and reply.text
        app.chat.session.close()
