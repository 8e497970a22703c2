"""Exact speculation on every architecture llama.cpp runs: dense, MoE,
sliding-window and hybrid (recurrent) models, made by tools/synth_gguf.py
(random weights, real layouts: their α means nothing, their output must
equal plain decoding's). A hybrid rolls a verify's rejected tokens back from
llama.cpp's state snapshots; a model that cannot roll back decodes plainly,
said in one line; `models scan` names each file's kinds."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from specchat.cli.main import app
from specchat.errors import SpecchatError
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from tests.support.fake_model import FakeModel
from tools.synth_gguf import write

ARCHS = ["llama", "qwen2", "qwen3moe", "gemma3", "qwen35"]
# Long enough to cross gemma3's 32-token window; repeated, so the n-gram drafter finds matches.
PROMPT = "Repeat after me: red green blue red green blue red green blue red green blue."


@pytest.fixture(scope="session")
def synthetic(tiny_pair, tmp_path_factory):
    """Each architecture's model, and a llama with other weights: a draft model that disagrees."""
    folder = tmp_path_factory.mktemp("synthetic")
    models = {arch: write(arch, folder / f"{arch}.gguf", tiny_pair[0]) for arch in ARCHS}
    models["other"] = write("llama", folder / "other-llama.gguf", tiny_pair[0], seed=99)
    return models


def run(*args: str) -> dict:
    r = CliRunner().invoke(app, ["run", PROMPT, "--json", "--check-identical", "--max-tokens", "40", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.real
@pytest.mark.parametrize("arch", ARCHS)
def test_every_drafter_gives_plain_decodings_output(synthetic, arch):
    target = str(synthetic[arch])
    plain = run("--target", target, "--drafter", "off", "--no-history")["tokens"]
    cases = {
        "draft that disagrees": ("--draft", str(synthetic["other"]), "--drafter", "draft", "--k", "4"),
        "draft that agrees": ("--draft", target, "--drafter", "draft", "--k", "4"),
        "hybrid": ("--draft", str(synthetic["other"]), "--drafter", "hybrid"),
        "ngram": ("--drafter", "ngram"),
        "auto": ("--draft", str(synthetic["other"]), "--drafter", "auto"),
    }
    if arch == "qwen35":  # it ships an MTP head: mtp drafts with it, and so do hybrid and auto without a draft model
        cases |= {"mtp": ("--drafter", "mtp"), "hybrid on the head": ("--drafter", "hybrid", "--k", "4")}
        cases |= {"auto on the head": ("--drafter", "auto")}
    for case, args in cases.items():
        out = run("--target", target, *args, "--no-history")
        s = out["stats"]
        assert (s["identical"], s["first_divergence"], out["tokens"]) == (True, None, plain), case
        if case == "draft that disagrees":
            assert s["drafted"] > 0 and s["accepted"] < s["drafted"]  # rejected drafts were rolled back
        if case in ("mtp", "hybrid on the head"):
            assert s["drafted"] > 0 and out["devices"]["mtp"]["backend"] == "CPU"
        if case == "draft that agrees":
            assert s["drafted"] > 0 and s["accepted"] == s["drafted"]


@pytest.mark.real
@pytest.mark.parametrize("arch", ["llama", "qwen35"])
def test_the_memory_drafts_an_answer_asked_again_exactly(synthetic, arch):
    target = str(synthetic[arch])
    first = run("--target", target, "--drafter", "memory")  # recorded in this test's history
    again = run("--target", target, "--drafter", "memory")
    s = again["stats"]
    assert again["tokens"] == first["tokens"] and s["identical"] is True
    assert s["accepted"] >= len(again["tokens"]) // 2  # drafted from the first answer


@pytest.mark.real
def test_a_hybrid_target_rolls_back_from_snapshots(synthetic):
    from specchat.llamacpp.llama import RS_SNAPSHOTS, Model

    m = Model(synthetic["qwen35"], n_ctx=256, n_threads=2, n_gpu_layers=0)
    try:
        assert m.recurrent and m.rs_snapshots == RS_SNAPSHOTS and m.can_roll_back
        m.eval(list(range(100, 120)), n_logits=1)
        m.eval(list(range(200, 205)), n_logits=5)  # a verify of 4 drafts
        m.truncate(22)  # 3 of them rejected: rolled back from the snapshots
        assert len(m.tokens) == 22
        m.eval([300], n_logits=1)
        after_rollback = m.logits(0).copy()
        m.truncate(0)
        m.eval([*range(100, 120), 200, 201, 300], n_logits=1)
        assert (m.logits(0) == after_rollback).all()  # as if the rejected tokens were never decoded
        m.eval([301], n_logits=1)
        m.truncate(10)  # further back than the last decode: no snapshot holds it, so it starts over
        assert m.tokens == []
    finally:
        m.close()


def test_a_target_that_cannot_roll_back_decodes_plainly_and_says_why():
    model = FakeModel()
    model.can_roll_back = False  # as a recurrent model whose architecture keeps no snapshots
    session = ChatSession(model, decode=DecodeOptions(drafter="ngram", k=8, max_tokens=10), pair="mamba-pair")
    why = ("mamba-pair keeps a recurrent state that llama.cpp cannot roll back, so it cannot take back "
           "rejected drafts: decoding plainly")
    assert (session.drafter_name, session.no_drafting, session.drafter_names()) == ("off", why, ["off"])
    with pytest.raises(SpecchatError) as err:
        session.set_drafter("auto")
    assert err.value.message == why
    assert session.reply("hello").stats.drafted == 0


@pytest.mark.real
def test_scan_names_each_files_kinds(synthetic):
    r = CliRunner().invoke(app, ["models", "scan", str(synthetic["qwen35"].parent), "--json"])
    assert r.exit_code == 0, r.output
    kinds = {f["name"]: (f["architecture"], f["kinds"]) for f in json.loads(r.stdout)["files"]}
    assert kinds["qwen35.gguf"] == ("qwen35", ["hybrid", "MTP"])
    assert kinds["qwen3moe.gguf"] == ("qwen3moe", ["MoE"])
    assert kinds["gemma3.gguf"] == ("gemma3", ["SWA"])
    assert kinds["llama.gguf"] == ("llama", ["dense"])
    text = CliRunner().invoke(app, ["models", "scan", str(synthetic["qwen35"].parent)], env={"COLUMNS": "300"}).stdout
    assert (
        "qwen35: hybrid, MTP: a recurrent state: rolls back from llama.cpp's snapshots of the last decode where its "
        "architecture keeps them, else decodes plainly; 1 shipped MTP draft head(s): the mtp drafter drafts with the "
        "first, and hybrid and auto do where the pair has no draft model"
    ) in text
