"""Hostile and clumsy input (issue 13): no crash, no injection, no false
"verified". One block per item of the issue; each test failed before the fix.

Real parts throughout: the Textual app under Pilot, real SQLite, the real
store and pull against the loopback Hub, the real `specchat` process. Where a
folder must be read-only and the tests run as root, the folder is made
immutable (chattr +i); where neither works the test is skipped.
"""

from __future__ import annotations

import hashlib
import io
import os
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from specchat import store
from specchat.catalog import ModelFile, load_catalog
from specchat.cli import app as cli_app
from specchat.config import Settings, read_settings, save_settings
from specchat.errors import SpecchatError
from specchat.history import Conversation, History, Message, to_markdown
from specchat.pull import pull_pair
from specchat.stats import Round
from specchat.themes import load_user_themes
from specchat.tui.widgets import ReplyBody, UserMessage

ESCAPES = "\x1b]0;PWNED\x07\x1b[2J"  # retitle the terminal, clear the screen
SHOWN = "␛]0;PWNED␇␛[2J"  # the same, made visible


def specchat(*args, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """The real command, in its own process. Arguments may be bytes (not UTF-8)."""
    return subprocess.run([sys.executable, "-m", "specchat.cli", *args], capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def err_lines(done: subprocess.CompletedProcess) -> list[str]:
    text = done.stderr.decode("utf-8")
    assert "Traceback" not in text, text
    return text.splitlines()


def cli(*args: str):
    return CliRunner().invoke(cli_app, list(args))


@contextmanager
def read_only(folder: Path):
    """Make `folder` unwritable, even for root (chattr +i), or skip."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    else:
        folder.chmod(0o555)
        made = True
    try:
        probe = folder / ".probe"
        try:
            probe.touch()
            probe.unlink()
            made = False
        except OSError:
            pass
        if not made:
            pytest.skip("cannot make a read-only folder here")
        yield folder
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        else:
            folder.chmod(0o755)


def no_controls(text: str) -> bool:
    return not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in text)


# --- 1. markup is never parsed -------------------------------------------------------------

TITLES = ["What is in [/usr/bin] ?", "arr[i] and arr[j]", "[@click=app.quit]press[/]", "[b]not bold"]


async def test_history_titles_show_as_text_in_f3(tmp_path):
    from tests.support.tui import make_app, ready, segments

    app = make_app(tmp_path)
    for title in TITLES + [ESCAPES]:
        app.conversation.history.add_message(app.conversation.history.new_conversation(title, "fake-pair"), Message("user", title))
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "HistoryScreen"
        ol = app.screen.query_one("#conversations")
        prompts = [ol.get_option_at_index(i).prompt for i in range(ol.option_count)]
        shown = [p.plain.split("  ·  ")[0] for p in prompts]
        assert shown == [SHOWN] + TITLES[::-1]  # newest first, each exactly as typed
        assert all(p.spans == [] for p in prompts)  # no style, no link: text
        runs = segments(ol)
        drawn = "".join(t for t, _ in runs)
        assert SHOWN in drawn and "[b]not bold" in drawn and "\x1b" not in drawn
        assert not any(style.italic or style.meta.get("@click") for _, style in runs if style)


async def test_notifications_and_theme_names_are_plain_text(tmp_path):
    from tests.support.tui import make_app, ready

    path = tmp_path / "settings.toml"
    path.write_text('"[/]" = 1\n')  # a settings key that is markup
    loaded = read_settings(path)
    app = make_app(tmp_path, settings=Settings(theme="[/]"), config_errors=loaded.errors)  # as --theme '[/]' does
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        messages = [n.message for n in app._notifications]
        assert f"{path}, line 1: unknown setting '[/]'; ignored" in messages
        assert "unknown theme '[/]'; using specchat-dark" in messages
        assert app.theme == "specchat-dark"
        assert all(not n.markup for n in app._notifications)


async def test_user_text_in_a_message_is_not_markup(tmp_path):
    from tests.support.tui import make_app, ready, segments, send

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "[@click=app.quit]arr[i][/]")
        user = app.query(UserMessage).last()
        runs = segments(user)
        assert "[@click=app.quit]arr[i][/]" in "".join(t for t, _ in runs)
        assert not any(s.italic or s.meta.get("@click") for _, s in runs)


def chat_headless(patch: str, home) -> subprocess.CompletedProcess:
    """`specchat chat` in a real process with a headless driver, SpecchatApp
    patched first by `patch` (code that may use the name SpecchatApp)."""
    code = f"from specchat.tui.app import SpecchatApp\n{patch}from specchat.cli import main\nmain()\n"
    env = {**os.environ, "SPECCHAT_HOME": str(home), "TEXTUAL_DRIVER": "textual.drivers.headless_driver:HeadlessDriver"}
    return subprocess.run([sys.executable, "-c", code, "chat"], capture_output=True, env=env, timeout=120)


def test_a_crash_inside_the_chat_exits_non_zero(tmp_path):
    """The app is real and headless; its mount is made to fail the way a bug would."""
    done = chat_headless("def boom(self): raise RuntimeError('a bug')\nSpecchatApp.on_mount = boom\n", tmp_path)
    assert done.returncode == 1, done.stderr.decode()[-2000:]


# --- 2. control characters are made visible on every path to the screen ------------------


async def test_a_stored_reply_with_escapes_shows_them_visibly(tmp_path):
    from tests.support.tui import make_app, ready

    app = make_app(tmp_path)
    conv = app.conversation.history.new_conversation("hi", "fake-pair")
    app.conversation.history.add_message(conv, Message("user", "say " + ESCAPES))
    app.conversation.history.add_message(conv, Message("assistant", "ok " + ESCAPES + "\x9b2J done", "eos", {"drafters": ["off"]},
                                          [{"text": "ok " + ESCAPES + "\x9b2J done", "kind": "target", "drafter": "target"}]))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.load_conversation(conv)
        await pilot.pause()
        from tests.support.tui import segments

        reply = "".join(t for t, _ in segments(app.query_one(ReplyBody)))
        user = "".join(t for t, _ in segments(app.query(UserMessage).last()))
        assert SHOWN in reply and "<U+009B>2J done" in reply and no_controls(reply)
        assert SHOWN in user and no_controls(user)
        assert app.session.messages[-1]["content"] == "ok " + ESCAPES + "\x9b2J done"  # the data is untouched


def test_run_prints_model_text_with_escapes_made_visible():
    from specchat.run import round_text

    r = Round(accepted=[1], rejected=[2], target=3, drafter="ngram", plain=False,
              accepted_text="a\x1b[2J", rejected_text="\x1b]0;x\x07", target_text="b\x9bc\ud800")
    out = io.StringIO()
    Console(file=out, color_system=None, width=200).print(round_text(r), end="")
    assert out.getvalue() == "a␛[2J␛]0;x␇b<U+009B>c\ufffd"


def test_run_json_keeps_the_text_exact_but_escaped():
    import json

    from specchat.textsafe import safe_json

    text = safe_json({"text": "a\x1b[2J\x9bz\ud800é"})
    assert no_controls(text) and "é" in text
    assert json.loads(text)["text"] == "a\x1b[2J\x9bz\ufffdé"


def test_error_lines_show_escapes_visibly(tmp_path):
    done = specchat("run", "hi", "--target", str(tmp_path / f"x{ESCAPES}.gguf"))
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines[0] == f"error: no model file at {tmp_path}/x{SHOWN}.gguf"
    assert b"\x1b]" not in done.stderr


def test_export_shows_escapes_visibly(tmp_path):
    conv = Conversation(1, "t" + ESCAPES, "p", messages=[Message("user", "u" + ESCAPES), Message("assistant", "a\x9b")])
    md = to_markdown(conv)
    assert md.startswith(f"# t{SHOWN}\n") and f"u{SHOWN}" in md and "a<U+009B>" in md
    assert no_controls(md)


# --- 3. "verified" means the bytes were hashed -----------------------------------------

PAIRS = """
[pairs.one]
target = { repo = "org/big-GGUF", filename = "big.gguf" }
draft = { repo = "org/small-GGUF", filename = "small.gguf" }

[pairs.twin-a]
target = { repo = "org/twin-GGUF", filename = "t.gguf" }
draft = { repo = "org/twin-GGUF", filename = "d.gguf" }

[pairs.twin-b]
target = { repo = "org/twin-GGUF", filename = "t.gguf" }
draft = { repo = "org/twin-GGUF", filename = "d.gguf" }

[pairs.v2]
target = { repo = "org/big-GGUF", filename = "big.gguf", revision = "v2" }
draft = { repo = "org/small-GGUF", filename = "small.gguf" }
"""


def put(f: ModelFile, data: bytes) -> Path:
    """Place a verified file in the store the way pull does."""
    path = store.file_path(f)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = store.partial_path(path)
    partial.write_bytes(data)
    store.install(partial, f, sha256=hashlib.sha256(data).hexdigest(), size=len(data), source="hub")
    return path


def flip_a_byte(path: Path, keep_mtime: bool = False) -> None:
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.seek(7)
        b = fh.read(1)
        fh.seek(7)
        fh.write(bytes([b[0] ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.fixture
def pairs(write_pairs):
    write_pairs(PAIRS)
    catalog = load_catalog()
    for _, f in catalog.get("one").roles():
        put(f, os.urandom(5000))
    return catalog


def test_a_flipped_byte_is_not_verified(pairs):
    f = pairs.get("one").target
    path = store.file_path(f)
    assert store.check(f) == "verified"
    flip_a_byte(path)
    assert store.check(f) == "damaged" and not store.is_ready(f)
    with pytest.raises(SpecchatError) as err:
        store.resolve_pair("one")
    assert err.value.message == f"{path} does not match the sha256 it was pulled with: the file changed on disk"
    assert err.value.hint == "run `specchat pull one` to download it again"
    lines = cli("models").stdout.splitlines()
    assert "  one (custom): partly pulled" in lines
    assert "    target     5.0 kB  DAMAGED: changed on disk, its sha256 no longer matches; fix: specchat pull one" in lines


@pytest.mark.parametrize("command", [["run", "hi"], ["bench", "--drafters", "ngram", "--suites", "chat"]])
def test_run_and_bench_refuse_a_damaged_file_naming_it_and_the_fix(pairs, specchat_home, command):
    path = store.file_path(pairs.get("one").target)
    flip_a_byte(path)
    done = specchat(*command, "--pair", "one", env={"SPECCHAT_HOME": str(specchat_home)})
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines[0] == f"error: {path} does not match the sha256 it was pulled with: the file changed on disk"
    assert lines[1] == "hint: run `specchat pull one` to download it again"


def test_models_verify_rehashes_even_when_the_mtime_hides_a_change(pairs):
    path = store.file_path(pairs.get("one").draft)
    flip_a_byte(path, keep_mtime=True)
    assert store.check(pairs.get("one").draft) == "verified"  # size and mtime say nothing changed
    done = cli("models", "--verify")
    assert done.exit_code == 1
    lines = done.stdout.splitlines()
    assert f"ok       {store.file_path(pairs.get('one').target)}" in lines
    assert f"FAILED   {path}: changed on disk: its sha256 no longer matches; fix: specchat pull one" in lines
    assert "1 of 2 files verified" in lines
    assert store.check(pairs.get("one").draft) == "damaged"  # remembered without hashing again


def test_pull_fetches_a_damaged_file_again(hub_server, write_pairs):
    data = os.urandom(200_000)
    write_pairs('[pairs.h]\ntarget = { repo = "test/h-GGUF", filename = "h.gguf" }\n'
                'draft = { repo = "test/h-GGUF", filename = "h.gguf" }\n')
    hub_server.add("test/h-GGUF", "h.gguf", data)
    out = io.StringIO()
    pull_pair("h", source="hub", progress=False, console=Console(file=out, width=300))
    path = store.file_path(load_catalog().get("h").target)
    flip_a_byte(path)
    out = io.StringIO()
    result = pull_pair("h", source="hub", progress=False, console=Console(file=out, width=300))
    assert result["already"] is False and "already pulled" not in out.getvalue()
    assert path.read_bytes() == data


def test_the_store_keeps_each_revision_apart(hub_server, write_pairs):
    main, v2 = os.urandom(100_000), os.urandom(100_001)
    write_pairs('[pairs.m]\ntarget = { repo = "test/r-GGUF", filename = "r.gguf" }\n'
                'draft = { repo = "test/r-GGUF", filename = "r.gguf" }\n'
                '[pairs.n]\ntarget = { repo = "test/r-GGUF", filename = "r.gguf", revision = "v2" }\n'
                'draft = { repo = "test/r-GGUF", filename = "r.gguf", revision = "v2" }\n')
    hub_server.add("test/r-GGUF", "r.gguf", main)
    hub_server.add("test/r-GGUF", "r.gguf", v2, revision="v2")
    quiet = Console(file=io.StringIO(), width=300)
    pull_pair("m", source="hub", progress=False, console=quiet)
    result = pull_pair("n", source="hub", progress=False, console=quiet)
    assert result["already"] is False
    m, n = (store.file_path(load_catalog().get(p).target) for p in ("m", "n"))
    assert m != n and m.read_bytes() == main and n.read_bytes() == v2
    assert n.parent.name == "test--r-GGUF@v2"


# --- 4. a broken history or data folder never stops the app -----------------------------


def start_chat(home: Path, tmp_path: Path) -> tuple[int, list[list[str]]]:
    """`specchat chat` as a user starts it (settings, history, the real app), on
    Textual's headless driver; it quits a moment after start and reports its
    notifications."""
    out = tmp_path / "notes.json"
    done = chat_headless(
        "import json\n"
        "mount = SpecchatApp.on_mount\n"
        "def on_mount(self):\n"
        "    mount(self)\n"
        "    def done():\n"
        f"        open({str(out)!r}, 'w').write(json.dumps([[n.title, n.message] for n in self._notifications]))\n"
        "        self.exit()\n"
        "    self.set_timer(1.0, done)\n"
        "SpecchatApp.on_mount = on_mount\n",
        home,
    )
    assert b"Traceback" not in done.stderr, done.stderr.decode()[-3000:]
    import json

    return done.returncode, json.loads(out.read_text()) if out.exists() else []


def test_chat_starts_on_a_garbage_history_and_says_so(tmp_path):
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "history.sqlite3").write_bytes(b"garbage " * 1000)
    code, notes = start_chat(home, tmp_path)
    assert code == 0
    (aside,) = (home / "data").glob("history.sqlite3.damaged-*")
    assert aside.read_bytes() == b"garbage " * 1000
    assert ["history", f"{home / 'data' / 'history.sqlite3'} is not a readable history (file is not a database); "
            f"kept it as {aside.name} and started a fresh one"] in notes


def test_chat_starts_in_a_read_only_data_folder_without_saving(tmp_path):
    home = tmp_path / "home"
    with read_only(home / "data"):
        code, notes = start_chat(home, tmp_path)
    assert code == 0
    history = [m for t, m in notes if t == "history"]
    assert len(history) == 1 and history[0].endswith("; chatting without saving")


def test_a_garbage_history_is_kept_aside_and_a_fresh_one_started(tmp_path):
    from specchat.history import open_history

    path = tmp_path / "history.sqlite3"
    garbage = b"this is not a database at all " * 100
    path.write_bytes(garbage)
    history, note = open_history(path)
    assert history is not None
    asides = list(tmp_path.glob("history.sqlite3.damaged-*"))
    assert len(asides) == 1 and asides[0].read_bytes() == garbage
    assert note == f"{path} is not a readable history (file is not a database); kept it as {asides[0].name} and started a fresh one"
    conv = history.new_conversation("new")
    history.add_message(conv, Message("user", "hi"))
    assert [c.title for c in history.list()] == ["new"]
    history.close()


def test_a_foreign_database_is_kept_aside_too(tmp_path):
    path = tmp_path / "history.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE conversations (x)")
    db.commit()
    db.close()
    from specchat.history import open_history

    history, note = open_history(path)
    assert history is not None and "not a specchat history" in note
    history.close()


def test_a_read_only_data_folder_means_chatting_without_saving(tmp_path):
    from specchat.history import open_history

    folder = tmp_path / "data"
    with read_only(folder):
        history, note = open_history(folder / "history.sqlite3")
        assert history is None
        assert note.startswith(f"cannot open the history at {folder / 'history.sqlite3'} (") and note.endswith(
            "); chatting without saving")


async def test_the_app_chats_without_a_history_and_says_so_once(tmp_path):
    from tests.support.tui import FakeModels, ready, send

    from specchat.tui.app import SpecchatApp

    app = SpecchatApp(FakeModels(), Settings(), history=None, history_note="cannot open the history at X (y); chatting without saving",
                      save_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        reply = await send(pilot, "hello")
        assert reply.text and reply.stats is not None
        notes = [n.message for n in app._notifications if n.title == "history"]
        assert notes == ["cannot open the history at X (y); chatting without saving"]
        await pilot.press("f3")
        await pilot.pause()
        assert app.screen.__class__.__name__ != "HistoryScreen"


async def test_a_history_that_fails_mid_chat_turns_saving_off(tmp_path):
    from tests.support.tui import make_app, ready, send

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.conversation.history.db.close()  # what a vanished disk looks like to sqlite
        reply = await send(pilot, "hello")
        assert reply.stats is not None and app.conversation.history is None
        assert any(n.title == "history" and "chatting without saving" in n.message for n in app._notifications)


def test_rm_on_a_read_only_store_is_one_line(pairs, specchat_home):
    folder = store.file_path(pairs.get("one").target).parent
    with read_only(folder):
        done = specchat("rm", "one", env={"SPECCHAT_HOME": str(specchat_home)})
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines[0].startswith(f"error: cannot delete {folder}/big.gguf: the model store is read-only")
    assert lines[1].startswith("hint: fix the permissions of")


# --- 5. settings and themes never stop the app -----------------------------------------------


def test_a_theme_with_variables_not_a_table_is_refused_by_name(tmp_path):
    (tmp_path / "odd.toml").write_text('primary = "#123456"\nvariables = "x"\n')
    themes, errors = load_user_themes(tmp_path)
    assert themes == []
    assert errors == [f"theme {tmp_path / 'odd.toml'}: variables should be a table, not 'x'; not loaded"]


async def test_a_theme_with_a_bad_colour_falls_back_to_the_default(tmp_path, monkeypatch):
    from tests.support.tui import make_app, ready

    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path))
    folder = tmp_path / "config" / "themes"
    folder.mkdir(parents=True)
    (folder / "bad.toml").write_text('primary = "#0088cc"\nbackground = "not-a-colour"\n')
    (folder / "worse.toml").write_text('primary = "#0088cc"\n[variables]\nspec-accepted = "greenish"\n')
    app = make_app(tmp_path, settings=Settings(theme="bad"))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.theme == "specchat-dark"
        messages = [n.message for n in app._notifications]
        assert f"theme {folder / 'bad.toml'}: background = 'not-a-colour' is not a colour (try \"#268bd2\"); not loaded" in messages
        assert any("worse.toml: variables.spec-accepted = 'greenish' is not a colour" in m for m in messages)
        assert "unknown theme 'bad'; using specchat-dark" in messages


def test_settings_that_are_not_utf8_give_the_defaults_and_a_line(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_bytes(b'k = 4\ntheme = "caf\xe9"\n')
    loaded = read_settings(path)
    assert loaded.settings == Settings()
    assert loaded.errors == [f"{path}: line 2 is not valid UTF-8 (byte 0xe9); using the defaults"]
    save_settings({"theme": "specchat-light"}, path)  # the user's bytes are left alone
    assert path.read_bytes() == b'k = 4\ntheme = "caf\xe9"\n'


async def test_a_read_only_config_folder_keeps_choices_for_the_session(tmp_path, monkeypatch):
    from tests.support.tui import make_app, ready

    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    with read_only(tmp_path / "home" / "config"):
        app = make_app(tmp_path, save_settings=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            app.theme = "specchat-light"
            await pilot.pause()
            assert app.theme == "specchat-light" and app.settings.theme == "specchat-light"
            notes = [n.message for n in app._notifications if n.title == "settings"]
            assert len(notes) == 1 and notes[0].startswith("cannot save settings (")


def test_models_and_rm_show_a_custom_pair_s_text_safely(write_pairs):
    write_pairs('[pairs.esc]\ndescription = "mine \\u001b]0;PWNED\\u0007"\n'
                'target = { repo = "org/e-GGUF", filename = "e\\u001b[2J.gguf" }\n'
                'draft = { repo = "org/e-GGUF", filename = "e\\u001b[2J.gguf" }\n')
    put(load_catalog().get("esc").target, b"x" * 10)
    listing = cli("models").stdout
    assert "mine ␛]0;PWNED␇" in listing and "e␛[2J.gguf" in listing and no_controls(listing)
    assert no_controls(cli("models", "--json").stdout)
    removed = cli("rm", "esc").stdout
    assert removed.startswith("deleted ") and "e␛[2J.gguf" in removed and no_controls(removed)


def test_nan_temperature_and_negative_threads_are_refused(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("temperature = nan\nthreads = -4\nctx = 1\nk = 4\n")
    loaded = read_settings(path)
    assert loaded.settings == Settings(k=4)
    assert loaded.errors == [
        f"{path}, line 1: temperature nan is out of range: it must be a finite number ≥ 0; using 0.0",
        f"{path}, line 2: threads -4 is out of range: it must be ≥ 1 (or 0 for the physical cores); using 0",
        f"{path}, line 3: ctx 1 is out of range: the context must hold at least 256 tokens; using 0",
    ]


# --- 6. arguments are checked at the edge -------------------------------------------------


@pytest.mark.parametrize("args,first", [
    (["--temp", "nan"], "error: --temp nan is out of range: it must be a finite number ≥ 0"),
    (["--temp", "inf"], "error: --temp inf is out of range: it must be a finite number ≥ 0"),
    (["--temp", "-1"], "error: --temp -1.0 is out of range: it must be a finite number ≥ 0"),
    (["--top-p", "2"], "error: --top-p 2.0 is out of range: it must be more than 0 and at most 1"),
    (["--top-k", "-3"], "error: --top-k -3 is out of range: it must be ≥ 0"),
    (["--k", "0"], "error: --k 0 is out of range: it must be between 1 and 32"),
    (["--k", "-5"], "error: --k -5 is out of range: it must be between 1 and 32"),
    (["--k", "1000"], "error: --k 1000 is out of range: it must be between 1 and 32"),
    (["--max-tokens", "0"], "error: --max-tokens 0 is out of range: a reply needs at least 1 token"),
    (["--max-tokens", "-5"], "error: --max-tokens -5 is out of range: a reply needs at least 1 token"),
    (["--ctx", "1"], "error: --ctx 1 is out of range: the context must hold at least 256 tokens"),
])
def test_run_checks_its_numbers_first(args, first, tmp_path):
    done = specchat("run", "hi", *args, env={"SPECCHAT_HOME": str(tmp_path)})
    lines = err_lines(done)
    assert done.returncode == 2
    assert lines[0] == first and lines[1].startswith("hint: ") and len(lines) == 2


def test_run_chat_and_bench_share_the_k_limit(tmp_path):
    from specchat.drafters import K_MAX

    env = {"SPECCHAT_HOME": str(tmp_path)}
    run = err_lines(specchat("run", "hi", "--k", str(K_MAX + 1), env=env))[0]
    chat = err_lines(specchat("chat", "--k", str(K_MAX + 1), env=env))[0]
    bench = err_lines(specchat("bench", "--k", str(K_MAX + 1), env=env))[0]
    assert run == chat == f"error: --k {K_MAX + 1} is out of range: it must be between 1 and {K_MAX}"
    assert f"1..{K_MAX}" in bench or f"1 and {K_MAX}" in bench
    assert "out of range" not in err_lines(specchat("run", "hi", "--k", str(K_MAX), env=env))[0]


def test_a_prompt_that_is_not_utf8_is_one_line(tmp_path):
    done = specchat("run", b"caf\xe9 ok", env={"SPECCHAT_HOME": str(tmp_path)})
    lines = err_lines(done)
    assert done.returncode == 2
    assert lines[0] == "error: the prompt is not valid UTF-8 (a stray byte at character 4)"
    assert lines[1].startswith("hint: ")


def hostile_gguf(path: Path) -> Path:
    """132 bytes: a GGUF header whose first key claims to be 2^62 bytes long."""
    data = b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 62)
    path.write_bytes(data + b"A" * (132 - len(data)))
    return path


def test_a_gguf_with_a_huge_key_length_is_refused_quickly(tmp_path):
    from specchat.compat import read_vocab

    path = hostile_gguf(tmp_path / "evil.gguf")
    assert path.stat().st_size == 132
    t0 = time.perf_counter()
    with pytest.raises(SpecchatError) as err:
        read_vocab(path)
    assert time.perf_counter() - t0 < 1.0
    assert err.value.message == f"{path} is not a readable GGUF file (its header declares a value of {1 << 62} bytes)"


@pytest.mark.real
def test_run_refuses_a_hostile_draft(tiny_pair, tmp_path):
    evil = hostile_gguf(tmp_path / "evil.gguf")
    done = specchat("run", "hi", "--target", str(tiny_pair[0]), "--draft", str(evil), "--max-tokens", "4")
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines[0] == f"error: {evil} is not a readable GGUF file (its header declares a value of {1 << 62} bytes)"


# --- 7. rm and pull take turns; pairs that share files go together -----------------------


def test_rm_waits_for_no_pull_it_refuses_while_one_holds_the_file(pairs, specchat_home):
    f = pairs.get("one").target
    path = store.file_path(f)
    partial = store.partial_path(path)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom specchat import store\nfrom specchat.catalog import load_catalog\n"
         "f = load_catalog().get('one').target\n"
         "with store.lock(f):\n"
         "    store.partial_path(store.file_path(f)).write_bytes(b'unpacking')\n"
         "    print('held', flush=True)\n"
         "    sys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "SPECCHAT_HOME": str(specchat_home)},
    )
    try:
        assert holder.stdout.readline() == b"held\n"
        done = specchat("rm", "one", env={"SPECCHAT_HOME": str(specchat_home)})
        lines = err_lines(done)
        assert done.returncode == 1
        assert lines[0] == "error: big.gguf is being pulled by another specchat"
        assert partial.read_bytes() == b"unpacking" and path.is_file()
    finally:
        holder.communicate(b"\n", timeout=30)
    assert cli("rm", "one").exit_code == 0
    assert not path.exists() and not partial.exists()


def test_a_lock_file_deleted_by_rm_is_not_a_lock(pairs):
    """rm deletes the lock file while holding it. A pull that was waiting on
    that file must take the lock anew, or it and a later pull would both
    "hold" the lock (flock locks are per open file, so threads show it)."""
    f = pairs.get("one").target
    lock_path = store.file_path(f).with_name("big.gguf.lock")
    holding, done = threading.Event(), threading.Event()

    def waiter():
        with store.lock(f):
            holding.set()
            done.wait(10)

    with store.lock(f):
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.2)  # the waiter has opened the old lock file and waits on it
        lock_path.unlink()
    assert holding.wait(10)
    try:
        with pytest.raises(store.Busy):
            with store.lock(f, wait=False):
                pass
    finally:
        done.set()
        thread.join()


def test_two_pairs_sharing_every_file_are_removed_together(write_pairs):
    write_pairs(PAIRS)
    catalog = load_catalog()
    paths = [put(f, os.urandom(100)) for _, f in catalog.get("twin-a").roles()]
    alone = cli("rm", "twin-a")
    assert alone.exit_code == 0
    assert alone.stdout.splitlines() == [*(f"kept {p} (used by twin-b)" for p in paths),
                                         "to delete it too: specchat rm twin-a twin-b"]
    both = cli("rm", "twin-a", "twin-b")
    assert both.exit_code == 0
    assert both.stdout.splitlines() == [f"deleted {p}" for p in paths]
    assert not any(p.exists() for p in paths)


async def test_the_chat_refuses_a_damaged_pair_naming_the_file_and_the_fix(pairs, tmp_path):
    from tests.support.tui import wait_until

    from specchat.tui.app import SpecchatApp
    from specchat.tui.models import Models

    path = store.file_path(pairs.get("one").draft)
    flip_a_byte(path)
    app = SpecchatApp(Models(), Settings(pair="one"), history=History(tmp_path / "h.sqlite3"), save_settings=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: any(n.title == "loading failed" for n in app._notifications))
        (note,) = [n.message for n in app._notifications if n.title == "loading failed"]
        assert note == (f"{path} does not match the sha256 it was pulled with: the file changed on disk "
                        "(run `specchat pull one` to download it again)")
        assert app.session is None


async def test_an_unknown_pair_in_the_settings_falls_back_to_the_default(specchat_home):
    from tests.support.tui import wait_until

    from specchat.tui.app import SpecchatApp
    from specchat.tui.models import Models

    app = SpecchatApp(Models(), Settings(pair="nope"), history=None, save_settings=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "PullScreen")
        (note,) = [n.message for n in app._notifications if n.title == "model pairs"]
        assert note.startswith("unknown pair 'nope' (known pairs: qwen2.5-coder-1.5b, ")
        assert app.screen.pair_name == load_catalog().default  # offered instead


async def test_a_broken_pairs_file_never_stops_the_chat(write_pairs, specchat_home):
    from tests.support.tui import wait_until

    from specchat.tui.app import SpecchatApp
    from specchat.tui.models import Models

    path = write_pairs("[pairs.x\n")
    app = SpecchatApp(Models(), Settings(), history=None, save_settings=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: any(n.title == "model pairs" for n in app._notifications))
        await pilot.press("f4")
        await pilot.pause()
        notes = [n.message for n in app._notifications if n.title == "model pairs"]
        assert len(notes) == 2 and all(m.startswith(f"{path} is not valid TOML") for m in notes)
        assert app.is_running and app.session is None


def test_chat_with_an_unknown_pair_is_one_line(tmp_path):
    done = specchat("chat", "--pair", "nope", env={"SPECCHAT_HOME": str(tmp_path)})
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines == ["error: unknown pair 'nope'", lines[1]] and lines[1].startswith("hint: known pairs: ")
