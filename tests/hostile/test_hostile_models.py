"""Model files are untrusted: a FIFO, a header that claims more than the file
holds, arrays nested without end, and chat templates that are huge, broken,
runaway or greedy each end in a value or one line naming the file, quickly,
never a hang, a traceback or gigabytes of memory."""

from __future__ import annotations

import io
import json
import os
import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from specchat.cli.main import app
from specchat.errors import SpecchatError
from specchat.store.compat import read_architecture_kinds, read_vocab
from tools.synth_gguf import write

MAGIC = struct.pack("<II", 0x46554747, 3)


def header(*kv: bytes, tensors: int = 0) -> bytes:
    return MAGIC + struct.pack("<QQ", tensors, len(kv)) + b"".join(kv)


def key(name: str) -> bytes:
    return struct.pack("<Q", len(name)) + name.encode()


def cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})


def test_a_fifo_named_gguf_is_skipped_by_scan_at_once(tmp_path):
    os.mkfifo(tmp_path / "x.gguf")
    t0 = time.monotonic()
    r = cli("models", "scan", str(tmp_path), "--json")
    assert r.exit_code == 0 and time.monotonic() - t0 < 30
    assert json.loads(r.stdout)["skipped"] == [f"{tmp_path / 'x.gguf'} is not a readable GGUF file "
                                               "(it is not a regular file); skipped"]


def test_a_header_claiming_2_63_strings_in_a_sparse_file_is_refused_at_once(tmp_path, specchat_home):
    path = tmp_path / "huge.gguf"
    with open(path, "wb") as f:
        f.write(header(key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2**63)))
        f.truncate(2 * 1024**3)  # sparse: 2 GB of zeros on disk for nothing
    t0 = time.monotonic()
    r = cli("models", "add", "huge", "--target", str(path))
    assert r.exit_code == 1 and time.monotonic() - t0 < 10
    assert r.stderr.splitlines()[0] == (f"error: {path} is not a readable GGUF file (its header declares an array "
                                        "of 9223372036854775808 entries, more than the file holds)")


def test_arrays_nested_5000_deep_are_one_line_everywhere(tmp_path, specchat_home):
    nested = key("a") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 5000 + struct.pack("<IQ", 4, 1) + b"\0" * 4
    path = tmp_path / "deep.gguf"
    path.write_bytes(header(nested))
    r = cli("models", "add", "deep", "--target", str(path))
    assert r.stderr.splitlines()[0] == f"error: {path} is not a readable GGUF file (its header nests arrays more than 4 deep)"
    assert read_architecture_kinds(path) is None
    r = cli("models", "scan", str(tmp_path), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["skipped"] == [
        f"{path} is not a readable GGUF file (its header nests arrays more than 4 deep); skipped"]


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=400))
def test_any_header_bytes_end_in_a_vocab_or_one_error(body, cut):
    """Random and truncated headers: a value or a SpecchatError, fast, whatever the bytes."""
    data = (MAGIC + body)[: len(MAGIC) + cut]
    t0 = time.monotonic()
    try:
        read_vocab(io.BytesIO(data), "random")
    except SpecchatError as err:
        assert err.message.startswith("random is not a readable GGUF file (")
    assert time.monotonic() - t0 < 1.0


@pytest.fixture(scope="module")
def with_template(tiny_pair, tmp_path_factory):
    """A synthetic llama whose chat template is `source`."""
    folder = tmp_path_factory.mktemp("templates")

    def make(name: str, source: str):
        return write("llama", folder / f"{name}.gguf", tiny_pair[0], template=source)

    return make


def run_on(path) -> tuple[int, list[str]]:
    r = cli("run", "hello", "--target", str(path), "--max-tokens", "2", "--no-history", "--drafter", "off")
    return r.exit_code, r.stderr.splitlines()


@pytest.mark.real
def test_a_70kb_template_is_read_whole(with_template):
    filler = "{# " + "x" * 70_000 + " #}"
    path = with_template("long", filler + "{% for m in messages %}[{{ m.content }}]{% endfor %}"
                         "{% if add_generation_prompt %}<reply>{% endif %}")
    from specchat.llamacpp.llama import Model

    m = Model(path, n_ctx=256, n_threads=1, n_gpu_layers=0)
    try:
        assert len(m.meta("tokenizer.chat_template")) > 70_000
        assert m.apply_template([{"role": "user", "content": "hi"}]) == "[hi]<reply>"
    finally:
        m.close()


@pytest.mark.real
@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("{% for %}", "'s chat template does not parse (line 1: "),
        ("{{ messages[0].nope.deeper }}", "'s chat template failed (UndefinedError: "),
        ("{{ 'a' * 10**13 }}", "'s chat template failed (SecurityError: the template builds a value of "
                               "10000000000000 items)"),
        ("{% set n = messages|length %}{{ (n + 9) ** 100000 }}", "'s chat template failed (SecurityError: the "
                                                                  "template raises a number to the power 100000)"),
        ("{{ 'a' * 10000000000000 }}", "'s chat template failed (SecurityError: the template builds a value of "
                                       "10000000000000 items)"),
    ],
    ids=["syntax", "undefined", "string times a power", "huge power", "huge string"],
)
def test_a_broken_template_is_one_line_naming_the_file(with_template, source, said):
    path = with_template(f"broken{abs(hash(source))}", source)
    code, err = run_on(path)
    assert code == 1 and err[0].startswith(f"error: {path.name}{said}") and err[1].startswith("hint: ")
    assert len(err) == 2


@pytest.mark.real
def test_a_runaway_template_ends_within_its_budget(with_template, monkeypatch):
    from specchat.llamacpp import template

    monkeypatch.setattr(template, "RENDER_SECONDS", 1.0)
    path = with_template("runaway", "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}")
    t0 = time.monotonic()
    code, err = run_on(path)
    assert code == 1 and time.monotonic() - t0 < 20
    assert err[0] == f"error: {path.name}'s chat template did not finish in 1 s (a runaway loop?)"


# --- config and data files: decoded with one line, nested or not --------------------------------

DEEP_TOML = "x = " + "[" * 20_000 + "]" * 20_000 + "\n"
DEEP_JSON = "[" * 20_000 + "]" * 20_000


def test_files_nested_20000_deep_are_one_line_each(specchat_home, tmp_path):
    from specchat.config import read_settings
    from specchat.store import local, verdicts
    from specchat.themes import load_user_themes

    config = specchat_home / "config"
    (config / "themes").mkdir(parents=True)
    (config / "settings.toml").write_text(DEEP_TOML)
    assert read_settings().errors == [f"{config / 'settings.toml'}: nested too deep to be settings; using the defaults"]
    (config / "themes" / "deep.toml").write_text(DEEP_TOML)
    assert load_user_themes(config / "themes") == ([], [f"theme {config / 'themes' / 'deep.toml'}: nested too deep "
                                                          "to be a theme; not loaded"])
    (config / "pairs.toml").write_text(DEEP_TOML)
    r = cli("models")
    assert r.exit_code == 1 and r.stderr.splitlines()[0] == f"error: {config / 'pairs.toml'} is not valid TOML (nested too deep)"
    (config / "pairs.toml").unlink()
    (config / "local-pairs.json").write_text(DEEP_JSON)
    with pytest.raises(SpecchatError) as err:
        local.load()
    assert err.value.message == f"{config / 'local-pairs.json'} is not a local-pairs file specchat can read"
    (specchat_home / "data").mkdir()
    (specchat_home / "data" / "verdicts.json").write_text(DEEP_JSON)
    assert verdicts.load() == {}
    suite = tmp_path / "deep.toml"
    suite.write_text(DEEP_TOML)
    r = cli("bench", "--prompts", str(suite))
    assert r.exit_code == 2 and r.stderr.splitlines()[:2] == [
        f"warning: {config / 'settings.toml'}: nested too deep to be settings; using the defaults",  # still there
        f"error: {suite} is not valid TOML: nested too deep",
    ]


def test_a_pairs_file_that_is_not_utf8_is_one_line(specchat_home):
    (specchat_home / "config").mkdir(parents=True)
    (specchat_home / "config" / "pairs.toml").write_bytes(b'a = "\xff"\n')
    r = cli("models")
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [f"error: {specchat_home / 'config' / 'pairs.toml'} is not valid TOML "
                                     "(byte 5 is not UTF-8)", "hint: fix or delete that file"]


@pytest.mark.real
def test_models_add_checks_where_it_writes_before_hashing(specchat_home, tiny_pair):
    specchat_home.mkdir(parents=True)
    (specchat_home / "config").write_text("")  # a file where the config folder belongs
    r = cli("models", "add", "mine", "--target", str(tiny_pair[0]))
    assert r.exit_code == 1 and "hashing" not in r.stderr
    assert r.stderr.splitlines() == [f"error: cannot keep local pairs in {specchat_home / 'config'} (a file is where "
                                     "that folder should be)", "hint: check that folder (SPECCHAT_HOME moves it)"]


def test_models_add_refuses_a_file_that_is_no_model(specchat_home, tmp_path):
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(header())  # 24 bytes: a valid header with nothing in it
    r = cli("models", "add", "mine", "--target", str(empty))
    assert r.exit_code == 1 and r.stderr.splitlines()[0] == f"error: {empty} holds no tokenizer: not a model to chat with"
    vocab_only = tmp_path / "vocab.gguf"
    model = key("tokenizer.ggml.model") + struct.pack("<I", 8) + key("gpt2")  # a string: its type, then the string
    tokens = key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 1) + key("a")  # an array of one string
    vocab_only.write_bytes(header(model, tokens))  # a tokenizer and no tensor, like llama.cpp's vocab files
    r = cli("models", "add", "mine", "--target", str(vocab_only))
    assert r.exit_code == 1 and r.stderr.splitlines()[0] == (f"error: {vocab_only} is not a readable GGUF file "
                                                             "(it holds no tensors)")


# --- every output path is checked before the work starts ---------------------------------------


SUITE = '[[prompt]]\nid = "one"\ntext = "Say hi."\n'


@pytest.mark.parametrize("where", ["the suite itself", "a folder", "/proc/version", "no such folder"])
def test_bench_json_is_checked_before_any_model_loads(tmp_path, specchat_home, where):
    suite = tmp_path / "s.toml"
    suite.write_text(SUITE)
    target = {"the suite itself": str(suite), "a folder": str(tmp_path), "/proc/version": "/proc/version",
              "no such folder": str(tmp_path / "nope" / "r.json")}[where]
    t0 = time.monotonic()
    r = cli("bench", "--prompts", str(suite), "--json", target, "--pair", "no-such-pair")
    assert r.exit_code == 2 and time.monotonic() - t0 < 10
    why = {"the suite itself": "it is also an input of this command", "a folder": "it is a folder",
           "/proc/version": "a file cannot be made in /proc (", "no such folder": "no such folder"}[where]
    assert r.stderr.splitlines()[0].startswith(f"error: cannot write --json {Path(target).absolute()}: {why}")
    assert suite.read_text() == SUITE  # the input is untouched


def test_a_report_inside_the_prompts_folder_is_refused(tmp_path, specchat_home):
    (tmp_path / "a.txt").write_text("Say hi.")
    r = cli("bench", "--prompts", str(tmp_path), "--json", str(tmp_path / "r.json"))
    assert r.exit_code == 2 and "it is inside the prompts folder" in r.stderr


def test_settings_are_saved_without_following_a_planted_link(specchat_home, tmp_path):
    from specchat.config import load_settings, save_settings

    victim = tmp_path / "victim"
    victim.write_text("keep me")
    config = specchat_home / "config"
    config.mkdir(parents=True)
    (config / "settings.toml.tmp").symlink_to(victim)
    save_settings({"theme": "light"})
    assert victim.read_text() == "keep me" and load_settings().theme == "light"
    assert not (config / "settings.toml").is_symlink()


NESTED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                 NESTED.map(lambda v: json.dumps(v).encode()), st.integers(1, 30_000).map(lambda d: b"x = " + b"[" * d)))
def test_any_settings_pairs_theme_or_suite_bytes_end_in_a_value_or_one_line(specchat_home, tmp_path, raw):
    """Random, truncated and deeply nested TOML: the defaults and a warning, or one error line, fast."""
    from specchat.bench.suites import load_suite
    from specchat.config import read_settings
    from specchat.store.catalog import load_catalog
    from specchat.themes import theme_from_toml

    config = specchat_home / "config"
    config.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    (config / "settings.toml").write_bytes(raw)
    loaded = read_settings()
    assert loaded.settings is not None and all(isinstance(e, str) for e in loaded.errors)
    (config / "pairs.toml").write_bytes(raw)
    try:
        load_catalog()
    except SpecchatError:
        pass
    try:
        theme_from_toml(raw.decode("utf-8", "replace"), "t")
    except ValueError:
        pass
    (tmp_path / "s.toml").write_bytes(raw)
    try:
        load_suite(str(tmp_path / "s.toml"))
    except SpecchatError:
        pass
    assert time.monotonic() - t0 < 2.0


@settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=300), NESTED.map(lambda v: json.dumps(v).encode()),
                 st.integers(1, 30_000).map(lambda d: b"[" * d + b"]" * d)))
def test_any_json_specchat_keeps_reads_as_a_value_or_nothing(specchat_home, raw):
    """local-pairs.json, verdicts.json, cost curves, kernels: a value, None, or one SpecchatError."""
    from specchat.decoding.keptcurve import saved_curve
    from specchat.llamacpp import kernels
    from specchat.store import local, verdicts
    from specchat.store.files import read_json

    for folder in ("config", "data"):
        (specchat_home / folder).mkdir(parents=True, exist_ok=True)
    for name in ("data/verdicts.json", "data/cost-curves.json", "data/kernels.json", "config/local-pairs.json"):
        (specchat_home / name).write_bytes(raw)
    assert read_json(specchat_home / "data" / "verdicts.json") is None or isinstance(
        read_json(specchat_home / "data" / "verdicts.json"), dict)
    assert isinstance(verdicts.load(), dict)
    assert saved_curve("k") is None or isinstance(saved_curve("k"), dict)
    assert isinstance(kernels._load(), dict)
    try:
        local.load()
    except SpecchatError:
        pass
