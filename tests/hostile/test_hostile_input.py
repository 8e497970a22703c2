"""Hostile input that reaches llama.cpp's grammar sampler or the chat's
prompt: a grammar too big to bind, one whose alternatives multiply, schema
keywords the converter reads past, text typed faster than the screen, and
messages with nothing visible in them.

A test that would hang on a regression runs its part in a thread or a child
process and fails when that takes far longer than it should (`bounded`):
llama.cpp cannot be interrupted from the test's own thread.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual import events

from specchat.config import Settings
from specchat.decoding.schema import load_schema, schema_spec
from specchat.errors import SpecchatError
from specchat.tui.chat.widgets import AssistantMessage, PromptInput, UserMessage
from tests.support.cli import specchat
from tests.support.tui import TinyPair, enter, make_app, notices, ready, wait_until

pytestmark = pytest.mark.usefixtures("specchat_home")  # settings and history under tmp_path


def bounded(scenario, seconds: float):
    """Run the async scenario (the chat under Pilot) on a thread of its own;
    its result, or a failure when it has not ended within `seconds`."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = asyncio.run(scenario())
        except BaseException as err:  # noqa: BLE001  handed to the test's thread
            box["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["result"]


def big_enum(tmp_path) -> Path:
    """A 5.2 MB schema: an enum of 110,000 strings."""
    path = tmp_path / "big.schema.json"
    path.write_text(json.dumps({"enum": [f"value-{i:06d}-" + "x" * 30 for i in range(110_000)]}))
    return path


BIG_ENUM_ERROR = ("big.schema.json is too big to bind as a grammar: 110,001 alternatives (at most 2,000) and "
                  "5.5 MB of GBNF (at most 128 KB); llama.cpp's grammar sampler slows with alternatives × size")
BIG_ENUM_HINT = 'use fewer enum values or anyOf branches (a long list of values can be {"type": "string"} instead)'


def multiplying_gbnf(tmp_path, levels: int = 20) -> Path:
    """600 bytes whose alternatives double at each level: llama.cpp would
    build 2^levels parse stacks (each compared with the others) to bind it."""
    rules = ["root ::= r0"] + [f'r{i} ::= r{i + 1} "a" | r{i + 1} "b"' for i in range(levels)] + [f'r{levels} ::= "x"']
    path = tmp_path / "multiply.gbnf"
    path.write_text("\n".join(rules) + "\n")
    return path


# --- grammars too big to bind ----------------------------------------------------------


@pytest.mark.real
def test_run_refuses_a_5mb_enum_schema_in_one_line_within_seconds_and_binds_one_within_the_limits(tmp_path, tiny_pair):
    r = specchat("run", "Pick one.", "--target", str(tiny_pair[0]), "--json-schema", str(big_enum(tmp_path)),
                 "--max-tokens", "8", timeout=20)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"error: {BIG_ENUM_ERROR}", f"hint: {BIG_ENUM_HINT}"]
    assert r.stdout == ""
    # 1,500 values are within the limits: bound, and the reply is one of them.
    values = [f"code-{i:04d}" for i in range(1500)]
    path = tmp_path / "codes.schema.json"
    path.write_text(json.dumps({"enum": values}))
    r = specchat("run", "Pick a code.", "--target", str(tiny_pair[0]), "--json-schema", str(path),
                 "--drafter", "grammar", "--max-tokens", "16", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(json.loads(r.stdout)["text"]) in values


def test_a_gbnf_file_with_too_many_alternatives_is_refused_naming_the_limit(tmp_path):
    path = tmp_path / "many.gbnf"
    path.write_text("root ::= " + " | ".join(f'"v{i}"' for i in range(3000)) + "\n")
    r = specchat("run", "Pick one.", "--grammar", str(path), timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "error: many.gbnf is too big to bind as a grammar: 3,000 alternatives (at most 2,000); "
        "llama.cpp's grammar sampler slows with alternatives × size",
        "hint: use fewer alternatives, or a shorter grammar",
    ]


def test_repeat_counts_the_converter_would_write_out_are_refused():
    with pytest.raises(SpecchatError) as err:
        schema_spec({"type": "string", "maxLength": 1_000_000}, "long.json")
    assert err.value.message == "long.json asks for maxLength 1,000,000: too many repeats to bind as a grammar (at most 10,000)"
    assert err.value.hint == "lower maxLength, or leave it out"
    # An enum value is data, not a schema: its keys are not counted.
    assert schema_spec({"enum": [{"maxLength": 1_000_000}]}, "data.json").ignored == ()


def test_a_pattern_with_a_closer_that_opens_nothing_is_one_line_not_a_hang():
    """llama.cpp's converter loops forever on a ']' or '}' that opens nothing
    (a regex reads `^a]$` as itself): refused, naming the character."""
    with pytest.raises(SpecchatError) as err:
        schema_spec({"type": "object", "properties": {"t": {"type": "string", "pattern": "^]0;T$"}}}, "s.json")
    assert err.value.message == (
        "s.json has the pattern '^]0;T$', whose ']' at character 2 closes nothing: the grammar converter cannot read it"
    )
    assert err.value.hint == "escape it as \\], or put it in a class: []]"
    for fine in ("^[a]$", "^\\]$", "^a{2}$", "^[\\]x]$"):
        schema_spec({"type": "string", "pattern": fine}, "fine.json")


@pytest.mark.parametrize("key, schema", [
    ("enum", {"enum": []}),
    ("anyOf", {"anyOf": []}),
    ("oneOf", {"type": "object", "properties": {"a": {"oneOf": []}}}),
    ("type", {"type": []}),
])  # fmt: skip
def test_an_empty_choice_list_is_one_line_before_llama_cpp_sees_it(key, schema):
    """The converter wrote a rule with nothing in it, which llama.cpp refused with its own log on stderr."""
    with pytest.raises(SpecchatError) as err:
        schema_spec(schema, "s.json")
    assert err.value.message == f"s.json has an empty {key}: no value can match it"
    assert err.value.hint == f"give {key} at least one choice, or leave it out"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab^$.|()[]{}*+?\\,2", max_size=10))
def test_any_pattern_converts_or_is_refused_in_one_line_and_never_hangs(pattern):
    box: dict = {}

    def convert() -> None:
        try:
            box["spec"] = schema_spec({"type": "string", "pattern": f"^{pattern}$"}, "p.json")  # as the converter asks
        except SpecchatError as err:
            box["error"] = err

    worker = threading.Thread(target=convert, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), f"the converter hangs on ^{pattern}$"
    assert box, "neither a grammar nor one error line"


def test_schema_files_too_big_or_too_deep_to_read_are_one_error(tmp_path):
    huge = tmp_path / "huge.schema.json"
    huge.write_text(" " * (17 * 1024 * 1024) + "{}")
    with pytest.raises(SpecchatError) as err:
        load_schema(huge)
    assert err.value.one_line() == ("huge.schema.json is 17.0 MB: too big for a JSON schema "
                                    "(specchat reads JSON schema files up to 16.0 MB)")
    deep = tmp_path / "deep.schema.json"
    deep.write_text('{"items": ' * 100_000 + "{}" + "}" * 100_000)
    with pytest.raises(SpecchatError) as err:
        load_schema(deep)
    assert err.value.one_line() == "deep.schema.json nests too deeply to read (a JSON schema nests a few levels, not thousands)"


@pytest.mark.real
def test_run_refuses_a_grammar_whose_alternatives_multiply_once_the_bind_time_is_up(tmp_path, tiny_pair):
    r = specchat("run", "Say it.", "--target", str(tiny_pair[0]), "--grammar", str(multiplying_gbnf(tmp_path)),
                 "--max-tokens", "8", timeout=90)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "error: multiply.gbnf: llama.cpp did not bind the grammar within 5 s (its alternatives multiply into too "
        "many parse stacks)",
        "hint: simplify it: alternatives that start alike and go on differently multiply",
    ]


@pytest.mark.real
def test_ctrl_c_ends_a_bind_in_progress(tmp_path, tiny_pair):
    """A ctrl-c while llama.cpp binds reaches Python at once (not when the
    bind ends, hours later for this grammar). The child starts as a shell
    starts it, SIGINT caught and not blocked, whatever it inherited from the
    test run (what it inherited is in the failure message)."""
    script = textwrap.dedent(f"""
        import os, signal, sys, threading, time
        print("inherited", signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_UNBLOCK, {{signal.SIGINT}}),
              file=sys.stderr)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import specchat
        from specchat.llamacpp.grammar import Grammar
        from specchat.llamacpp.llama import Model
        from specchat.decoding.schema import load_gbnf

        model = Model({str(tiny_pair[0])!r}, n_ctx=256)
        spec = load_gbnf({str(multiplying_gbnf(tmp_path))!r})
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        try:
            Grammar(spec, model)
        except KeyboardInterrupt:
            print(f"interrupted after {{time.monotonic() - start:.1f}} s")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    seconds = float(r.stdout.split()[2])
    assert r.stdout.startswith("interrupted after ") and seconds < 5  # the ctrl-c, not the bind's time limit


# --- keywords the grammar ignores --------------------------------------------------------


@pytest.mark.parametrize("schema, ignored", [
    ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "multipleOf": 2}},
      "patternProperties": {"^x-": {}}, "if": {"properties": {"n": {"const": 1}}}, "then": {"required": ["m"]},
      "else": {}}, ("if", "then", "else", "patternProperties", "multipleOf", "minimum")),
    ({"type": "array", "items": {"type": "string", "format": "email", "not": {"const": ""}}, "uniqueItems": True,
      "contains": {"const": "a"}}, ("contains", "uniqueItems", "not", "format")),
    ({"type": "object", "required": ["a"], "minProperties": 1}, ("minProperties", "required")),
    ({"type": "object", "properties": {"a": {}}, "dependentSchemas": {"a": {"required": ["b"]}},
      "propertyNames": {"maxLength": 3}}, ("dependentSchemas", "propertyNames")),
    ({"type": ["string", "null"], "maxLength": 3}, ("maxLength",)),
    ({"$defs": {"x": {"type": "string", "minLength": 2, "not": {"const": "zz"}}}, "type": "object",
      "properties": {"p": {"$ref": "#/$defs/x"}}}, ("not",)),
    ({"allOf": [{"properties": {"a": {"type": "integer", "maximum": 3}}, "required": ["a"]}]}, ("required", "maximum")),
    # What the converter honours is not named.
    ({"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 40},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 3},
      "when": {"type": "string", "format": "date"}, "id": {"type": "string", "pattern": "^[a-z]+$"}},
      "required": ["name"], "additionalProperties": False, "title": "T", "description": "d"}, ()),
])
def test_ignored_keywords_are_the_ones_the_converter_reads_past(schema, ignored):
    from specchat.decoding.converter import ignored_keywords

    assert ignored_keywords(schema) == ignored


def test_the_packaged_schemas_use_nothing_the_grammar_ignores():
    schemas = sorted((Path(__file__).parents[2] / "app" / "bench" / "suites" / "json").glob("*.json"))
    assert schemas, "the bench's packaged schemas moved: point this test at them"
    assert {p.name: load_schema(p).ignored for p in schemas} == {p.name: () for p in schemas}


KEYWORDS_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
                   "required": ["n"], "patternProperties": {"^x": {}}, "if": {"required": ["n"]}, "then": {}}
KEYWORDS_WARNING = ("keywords.schema.json: the grammar does not enforce if, then, patternProperties, minimum "
                    "(llama.cpp's schema converter ignores them); each finished reply is still checked against the "
                    "whole schema")


@pytest.mark.real
def test_run_warns_in_one_line_naming_the_keywords_the_grammar_ignores(tmp_path, tiny_pair):
    path = tmp_path / "keywords.schema.json"
    path.write_text(json.dumps(KEYWORDS_SCHEMA))
    r = specchat("run", "Give n.", "--target", str(tiny_pair[0]), "--json-schema", str(path), "--max-tokens", "12",
                 "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stderr.splitlines() if line.startswith("warning:")] == [f"warning: {KEYWORDS_WARNING}"]
    assert json.loads(r.stdout)["text"].startswith('{"n": ')


def test_a_bench_suite_whose_schema_has_ignored_keywords_warns_in_one_line(tmp_path, capsys):
    from specchat.bench.suites import load_suite

    (tmp_path / "keywords.schema.json").write_text(json.dumps(KEYWORDS_SCHEMA))
    suite = tmp_path / "mine.toml"
    suite.write_text('[[prompt]]\nid = "n"\ntext = "Give n."\nschema = "keywords.schema.json"\n')
    assert load_suite(str(suite)).prompts[0].constraint.ignored == ("if", "then", "patternProperties", "minimum")
    assert capsys.readouterr().err.splitlines() == [f"warning: {KEYWORDS_WARNING}"]


# --- the chat: binding off the screen's thread ---------------------------------------------


@pytest.mark.real
def test_the_chat_binds_on_a_worker_and_notices_the_keywords_a_schema_binds_without(tmp_path, tiny_pair):
    path = tmp_path / "keywords.schema.json"
    path.write_text(json.dumps(KEYWORDS_SCHEMA))

    async def scenario():
        app = make_app(tmp_path, models=TinyPair(tiny_pair[0]), settings=Settings(), drafter="off")
        async with app.run_test(size=(200, 40)) as pilot:
            await wait_until(pilot, lambda: app.chat.session is not None, timeout=120)
            bound_on, set_constraint = [], app.chat.session.set_constraint

            def spy(spec):
                bound_on.append(threading.current_thread())
                set_constraint(spec)

            app.chat.session.set_constraint = spy
            await enter(pilot, f"/schema {path}")
            await wait_until(pilot, lambda: not app.chat.binding and "replies must match JSON · keywords.schema.json"
                             in notices(app), timeout=30)
            screen_thread = threading.current_thread()
            app.chat.session.close()
            return notices(app), bound_on, screen_thread

    said, bound_on, screen_thread = bounded(scenario, 240)
    assert KEYWORDS_WARNING in said
    assert len(bound_on) == 1 and bound_on[0] is not screen_thread


@pytest.mark.real
def test_the_chat_refuses_a_5mb_enum_schema_with_a_notice_and_keeps_the_message(tmp_path, tiny_pair):
    path = big_enum(tmp_path)

    async def scenario():
        app = make_app(tmp_path, models=TinyPair(tiny_pair[0]), settings=Settings(), drafter="off")
        async with app.run_test(size=(200, 40)) as pilot:
            await wait_until(pilot, lambda: app.chat.session is not None, timeout=120)
            prompt = await enter(pilot, f"/schema {path} Pick one.")
            await wait_until(pilot, lambda: not app.chat.binding, timeout=30)
            await pilot.pause()
            result = notices(app), prompt.text, len(app.query(UserMessage)), app.chat.session.status().constraint
            app.chat.session.close()
            return result

    said, left_in_prompt, sent, constraint = bounded(scenario, 240)
    assert f"{BIG_ENUM_ERROR} ({BIG_ENUM_HINT})" in said
    assert left_in_prompt == f"/schema {path} Pick one." and sent == 0 and constraint == ""


# --- the prompt: text typed faster than the screen, messages with nothing in them ---------


def test_text_typed_faster_than_the_screen_goes_in_and_stops_at_the_prompts_cap(tmp_path):
    """100,000 characters arriving as keystrokes (a paste without bracketed
    paste): the prompt takes the first 65,536 and says the rest was left out."""
    text = ("The quick brown fox jumps over the lazy dog. " * 2300)[:100_000]

    async def scenario():
        app = make_app(tmp_path, drafter="off")
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            prompt = app.query_one(PromptInput)
            for ch in text:
                app.post_message(events.Key("space" if ch == " " else ch, ch))
            await wait_until(pilot, lambda: notices(app) and not prompt._typed, timeout=240)
            await pilot.pause(0.2)
            return prompt.text, notices(app)

    typed, said = bounded(scenario, 300)
    assert typed == text[:65_536]
    assert said == ["the prompt holds at most 65,536 characters: what was typed past that is left out"]


async def test_a_bracketed_paste_longer_than_the_prompt_holds_is_refused_and_a_shorter_one_goes_in(tmp_path):
    app = make_app(tmp_path, drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        prompt = app.query_one(PromptInput)
        app.post_message(events.Paste("x" * 200_000))
        await pilot.pause()
        assert prompt.text == ""
        assert notices(app) == ["the paste (200,000 characters) would make the prompt longer than the 65,536 "
                                "characters it holds: nothing was pasted"]
        app.post_message(events.Paste("y" * 10_000))
        await pilot.pause()
        assert prompt.text == "y" * 10_000


@pytest.mark.parametrize("text", ["   ", "\u200b\u2060", "\ufeff \u3164\u2800", "\u00a0\u180e\u200d"])
async def test_a_message_with_nothing_visible_is_not_sent_or_stored(tmp_path, text):
    app = make_app(tmp_path, drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await enter(pilot, text)
        await pilot.pause(0.3)
        assert notices(app) == ["nothing to send: the message has no visible text"]
        assert not app.query(UserMessage) and not app.query(AssistantMessage) and not app.chat.generating
        assert app.chat.session.messages == [] and app.conversation.history.list() == []


async def test_a_schema_prefix_followed_by_nothing_visible_sends_nothing(tmp_path):
    app = make_app(tmp_path, drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        prompt = await enter(pilot, "/schema off \u200b\u2060")
        await wait_until(pilot, lambda: "replies are free text again" in notices(app))
        await pilot.pause(0.3)
        assert not app.query(UserMessage) and not app.chat.generating and prompt.text == ""
        assert app.chat.session.messages == [] and app.conversation.history.list() == []
