"""Constrained decoding on real llama.cpp: llama.cpp's grammar sampler on real
vocabularies, `specchat run --json-schema/--grammar` end to end, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specchat.decoding.schema import check_reply, load_gbnf, load_schema
from specchat.errors import SpecchatError
from specchat.llamacpp.grammar import Grammar
from tests.support.cli import run_json, specchat

DATA = Path(__file__).parents[1] / "data"
SCHEMA = DATA / "person.schema.json"
GBNF = DATA / "answer.gbnf"
PERSON = ("Extract the person as JSON: Maria Lopez, 34, is a senior engineer in Porto, Portugal, "
          "who knows Rust, Go and Kubernetes.")


@pytest.fixture(scope="module")
def tiny_model(tiny_pair):
    from specchat.llamacpp.llama import Model

    m = Model(tiny_pair[0], n_ctx=512)
    yield m
    m.close()


# --- the grammar on a real vocabulary ----------------------------------------------------


@pytest.mark.real
def test_forced_text_of_a_schema_is_its_layout_up_to_each_choice(tiny_model):
    from specchat.decoding.constraint import Constraint

    c = Constraint()
    c.set(Grammar(load_schema(SCHEMA), tiny_model))
    c.begin()
    forced = c.forced(32)
    assert tiny_model.detokenize(forced) == '{"name": "'
    for t in forced:
        c.commit(t, tiny_model.piece(t), False)
    assert c.forced(32) == []  # inside a free string: a choice at every position
    for t in tiny_model.tokenize('Maria"', special=False):
        c.commit(t, tiny_model.piece(t), False)
    assert tiny_model.detokenize(c.forced(32)) == ', "age": '
    for text in (', "age": ', "34", ', "role": "', "man"):
        for t in tiny_model.tokenize(text, special=False):
            c.commit(t, tiny_model.piece(t), False)
    # The rest of an enum value once it is decided, then the next key.
    assert tiny_model.detokenize(c.forced(32)) == 'ager", "skills": ['


@pytest.mark.real
def test_cheap_argmax_equals_the_argmax_of_the_fully_masked_row(tiny_model):
    grammar = Grammar(load_schema(SCHEMA), tiny_model)
    state = grammar.start()
    rng = np.random.default_rng(0)
    texts = ['{"name": "', 'Maria", "age": ', "3", '4, "role": "']
    checked = 0
    for text in texts:
        for _ in range(10):
            logits = rng.normal(size=tiny_model.n_vocab).astype(np.float32)
            masked = state.mask(logits)
            assert state.argmax(logits) == int(np.argmax(masked))
            checked += int(np.argmax(logits)) != int(np.argmax(masked))  # the argmax was refused
        for t in tiny_model.tokenize(text, special=False):
            state.accept(t)
    assert checked >= 10  # the slow branch (a refused argmax) ran too
    allowed = np.isfinite(state.mask(np.zeros(tiny_model.n_vocab, dtype=np.float32)))
    pieces = {tiny_model.piece(int(t)) for t in np.nonzero(allowed)[0]}
    assert pieces and all(p[:1] in (b"e", b"m", b"d") or b"engineer".startswith(p) or b"manager".startswith(p)
                          or b"designer".startswith(p) for p in pieces)


# --- specchat run, end to end ------------------------------------------------------------


@pytest.mark.real
@pytest.mark.parametrize("drafter", ["grammar", "hybrid"])
def test_run_json_schema_replies_valid_json_identical_to_constrained_off(tiny_pair, drafter):
    target, draft = map(str, tiny_pair)
    out = run_json(PERSON, "--target", target, "--draft", draft, "--json-schema", str(SCHEMA), "--drafter", drafter,
                   "--k", "8", "--max-tokens", "120", "--check-identical", "--baseline-every", "0")
    assert out["finish"] == "eos", out["text"]
    value = json.loads(out["text"])
    assert set(value) == {"name", "age", "role", "skills", "address"} and value["role"] in ("engineer", "manager", "designer")
    assert out["text"] == json.dumps(value, ensure_ascii=False)  # json.dumps's layout
    assert out["constraint"] == {"label": "JSON · person.schema.json", "checked": True, "valid": True, "error": None}
    s = out["stats"]
    assert s["identical"] is True
    forced = "".join(sp["text"] for sp in out["spans"] if sp["kind"] == "accepted" and "grammar" in sp["drafter"])
    if drafter == "grammar":
        # Every key, its quotes and its colon were drafted by the grammar and accepted.
        for key in ("name", "age", "role", "skills", "address", "city", "country"):
            assert f'"{key}":' in forced
        assert s["alpha"] > 1.5
    else:
        # Forced tokens first (their own colour), then the draft model (here
        # the target itself) continues: long drafts, nearly all accepted.
        assert {sp["drafter"] for sp in out["spans"] if sp["kind"] == "accepted"} == {"hybrid:grammar", "hybrid:draft"}
        assert '"name": "' in forced and s["alpha"] > 4


@pytest.mark.real
def test_run_grammar_file_forces_the_sentence(tiny_pair):
    target, _ = map(str, tiny_pair)
    out = run_json("Is water wet? Answer and count.", "--target", target, "--grammar", str(GBNF), "--drafter", "grammar",
                   "--k", "16", "--max-tokens", "40", "--check-identical")
    import re

    assert re.fullmatch(r"The answer is (yes|no|maybe), counted [0-9][0-9]? times\.", out["text"]), out["text"]
    # The first round drafts the sentence's start; the target may take its
    # last space with the next word (" yes"), so that space can be rejected.
    first = out["spans"][0]
    assert first["text"].startswith("The answer is") and first["kind"] == "accepted" and first["drafter"] == "grammar"
    forced = "".join(sp["text"] for sp in out["spans"] if sp["kind"] == "accepted" and sp["drafter"] == "grammar")
    assert forced.startswith("The answer is") and forced.endswith(" times.")
    assert out["stats"]["alpha"] > 1.5
    assert out["stats"]["identical"] is True
    assert out["constraint"]["label"] == "grammar · answer.gbnf" and out["constraint"]["valid"] is True


@pytest.mark.real
def test_run_on_a_terminal_names_the_constraint_under_the_stats(tiny_pair):
    target, _ = map(str, tiny_pair)
    env = {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "COLORTERM": "truecolor", "COLUMNS": "300"}
    r = specchat("run", PERSON, "--target", target, "--json-schema", str(SCHEMA), "--drafter", "grammar",
                 "--max-tokens", "120", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].endswith("JSON · person.schema.json · the reply matches it\x1b[0m")
    # Forced tokens in the grammar's colour (spec-grammar, #c58af9), keys among them.
    grammar = "\x1b[38;2;197;138;249m"
    assert grammar in r.stdout
    forced = "".join(chunk.split("\x1b[0m")[0] for chunk in r.stdout.split(grammar)[1:])
    assert '"name": "' in forced and '"country": "' in forced


# --- bad input: one line and a hint, before or right after loading --------------------------


@pytest.mark.parametrize(
    "args, message, hint",
    [
        (["--json-schema", "/nonexistent/x.json"], "error: no JSON schema file at /nonexistent/x.json",
         "hint: check the path of the JSON schema file"),
        (["--grammar", "/nonexistent/x.gbnf"], "error: no grammar file at /nonexistent/x.gbnf", "hint: check the path"),
        (["--drafter", "grammar"], "error: the grammar drafter drafts only while the reply is constrained",
         "hint: add --json-schema FILE or --grammar FILE.gbnf"),
        (["--json-schema", str(SCHEMA), "--grammar", str(GBNF)], "error: --json-schema and --grammar both constrain the reply",
         "hint: pass one of them"),
    ],
)
def test_run_refuses_a_missing_file_or_a_grammar_drafter_without_constraint(args, message, hint, tmp_path):
    r = specchat("run", "hi", "--target", str(tmp_path / "none.gguf"), *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert lines[0] == message and lines[1].startswith(hint) and "Traceback" not in r.stderr


def test_a_file_that_is_not_a_schema_is_one_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "object",\n')
    with pytest.raises(SpecchatError, match=r"bad.json is not valid JSON \(line 2, column 1: Expecting property name"):
        load_schema(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(SpecchatError, match=r"bad.json is not a JSON schema \(it holds a list, not an object\)"):
        load_schema(bad)
    (tmp_path / "g.gbnf").write_text('item ::= "a"\n')
    with pytest.raises(SpecchatError, match="g.gbnf has no root rule"):
        load_gbnf(tmp_path / "g.gbnf")


@pytest.mark.real
@pytest.mark.parametrize(
    "text, reason",
    [('root ::= "a" | (\n', "expecting ')'"), ("root ::= thing\n", "Undefined rule identifier 'thing'")],
)
def test_a_grammar_llama_cpp_cannot_parse_is_one_line_with_its_reason(tiny_pair, tmp_path, text, reason):
    path = tmp_path / "bad.gbnf"
    path.write_text(text)
    r = specchat("run", "hi", "--target", str(tiny_pair[0]), "--grammar", str(path), "--max-tokens", "4")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"error: bad.gbnf is not a grammar llama.cpp can read: {reason}",
        "hint: see llama.cpp's grammars/README.md for the GBNF syntax",
    ]


def test_check_reply_says_why_a_reply_does_not_match():
    spec = load_schema(SCHEMA)
    good = {"name": "A", "age": 3, "role": "manager", "skills": [], "address": {"city": "B", "country": "C"}}
    assert check_reply(spec, json.dumps(good)) is None
    assert check_reply(spec, json.dumps({**good, "role": "chef"})) == "does not match person.schema.json: 'chef' is not one of ['engineer', 'manager', 'designer']"
    assert check_reply(spec, '{"name": ').startswith("not JSON: Expecting value")


@pytest.mark.real
def test_default_pair_grammar_drafter_is_identical_to_constrained_off(default_pair):
    target, draft = map(str, default_pair)
    out = run_json(PERSON, "--target", target, "--draft", draft, "--json-schema", str(SCHEMA), "--drafter", "grammar",
                   "--max-tokens", "120", "--check-identical")
    assert out["finish"] == "eos" and out["constraint"]["valid"] is True, out["text"]
    value = json.loads(out["text"])
    assert value["name"] == "Maria Lopez" and value["age"] == 34 and value["role"] == "engineer"
    assert value["address"] == {"city": "Porto", "country": "Portugal"}
    s = out["stats"]
    assert s["identical"] is True and s["first_divergence"] is None
    assert s["alpha"] >= 1.5 and s["acceptance_rate"] > 0.8
