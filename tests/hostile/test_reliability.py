"""Hostile and clumsy input: no crash, no injection, no false "verified".
One block per kind of input; each test failed before its fix.

Real parts throughout: the Textual app under Pilot, real SQLite, the real
store and pull against the loopback Hub, the real `specchat` process. Where a
folder must be read-only and the tests run as root, the folder is made
immutable (chattr +i); where neither works the test is skipped.
"""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

from rich.console import Console

from specchat.config import Settings, read_settings, save_settings
from specchat.decoding.stats import Round
from specchat.history.database import Conversation, Message, to_markdown
from specchat.store.catalog import load_catalog
from specchat.themes import load_user_themes
from specchat.tui.chat.widgets import AssistantMessage, PromptInput, ReplyBody, StatsLine, UserMessage
from tests.support.hostile import ESCAPES, SHOWN, chat_headless, cli, err_lines, no_controls, put, read_only, specchat

# --- markup is never parsed -------------------------------------------------------------

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


async def test_a_failed_reply_shows_the_error_as_text(tmp_path):
    """A server's error text (or any error's) under the failed reply: shown, not parsed as markup."""
    from specchat.errors import SpecchatError
    from tests.support.tui import make_app, ready, segments, wait_until

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)

        def fail(*args, **kwargs):
            raise SpecchatError("the server stopped with an error: bad [/x] token " + ESCAPES)

        app.chat.session.reply = fail
        app.query_one(PromptInput).text = "hello"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.chat.generating)
        await pilot.pause()
        line = "".join(t for t, _ in segments(app.query(AssistantMessage).last().query_one(StatsLine)))
        assert "failed: the server stopped with an error: bad [/x] token " + SHOWN in line
        assert no_controls(line)


def test_a_crash_inside_the_chat_exits_non_zero(tmp_path):
    """The app is real and headless; its mount is made to fail the way a bug would."""
    done = chat_headless("def boom(self): raise RuntimeError('a bug')\nSpecchatApp.on_mount = boom\n", tmp_path)
    assert done.returncode == 1, done.stderr.decode()[-2000:]


# --- control characters are made visible on every path to the screen ------------------


async def test_a_stored_reply_with_escapes_shows_them_visibly(tmp_path):
    from tests.support.tui import make_app, ready

    app = make_app(tmp_path)
    conv = app.conversation.history.new_conversation("hi", "fake-pair")
    app.conversation.history.add_message(conv, Message("user", "say " + ESCAPES))
    app.conversation.history.add_message(conv, Message("assistant", "ok " + ESCAPES + "\x9b2J done", "eos", {"drafters": ["off"]},
                                          [{"text": "ok " + ESCAPES + "\x9b2J done", "kind": "target", "drafter": "target"}]))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.chat_screen.load_conversation(conv)
        await pilot.pause()
        from tests.support.tui import segments

        reply = "".join(t for t, _ in segments(app.query_one(ReplyBody)))
        user = "".join(t for t, _ in segments(app.query(UserMessage).last()))
        assert SHOWN in reply and "<U+009B>2J done" in reply and no_controls(reply)
        assert SHOWN in user and no_controls(user)
        assert app.chat.session.messages[-1]["content"] == "ok " + ESCAPES + "\x9b2J done"  # the data is untouched


def test_run_prints_model_text_with_escapes_made_visible():
    from specchat.cli.run import round_text

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


# --- a broken history or data folder never stops the app -----------------------------


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
    from specchat.history.database import open_history

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
    from specchat.history.database import open_history

    history, note = open_history(path)
    assert history is not None and "not a specchat history" in note
    history.close()


def test_a_read_only_data_folder_means_chatting_without_saving(tmp_path):
    from specchat.history.database import open_history

    folder = tmp_path / "data"
    with read_only(folder):
        history, note = open_history(folder / "history.sqlite3")
        assert history is None
        assert note.startswith(f"cannot open the history at {folder / 'history.sqlite3'} (") and note.endswith(
            "); chatting without saving")


async def test_the_app_chats_without_a_history_and_says_so_once(tmp_path):
    from specchat.tui.app import SpecchatApp
    from tests.support.tui import FakeModels, ready, send

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


async def test_a_history_that_fails_mid_chat_costs_that_message_and_saving_goes_on(tmp_path):
    from tests.support.tui import make_app, ready, send

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        history = app.conversation.history
        history.db.close()  # what a vanished disk looks like to sqlite
        reply = await send(pilot, "hello")
        assert reply.stats is not None and app.conversation.history is history
        lost = [n.message for n in app._notifications if n.title == "history"]
        assert lost == ["cannot save to the history (Cannot operate on a closed database.); this message is not saved"] * 2
        history.db = sqlite3.connect(history.path, check_same_thread=False)  # the disk is back
        await send(pilot, "again")
        (conv,) = history.list()
        assert [m.content for m in history.load(conv.id).messages][0] == "again"
        assert len([n for n in app._notifications if n.title == "history"]) == 2  # nothing more went wrong


async def test_a_conversation_deleted_while_its_list_is_open_opens_nothing(tmp_path):
    from tests.support.tui import make_app, ready

    app = make_app(tmp_path)
    app.conversation.history.add_message(app.conversation.history.new_conversation("old", "fake-pair"), Message("user", "hi"))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "HistoryScreen"
        other = sqlite3.connect(tmp_path / "history.sqlite3")  # another specchat deletes it meanwhile
        with other:
            other.execute("DELETE FROM conversations")
        other.close()
        await pilot.press("enter")  # open the conversation under the cursor
        await pilot.pause()
        assert app.is_running and app.screen.__class__.__name__ != "HistoryScreen"
        assert [n.message for n in app._notifications] == ["that conversation was deleted meanwhile: nothing to open"]


# --- settings and themes never stop the app -----------------------------------------------


def test_a_theme_with_variables_not_a_table_is_refused_by_name(tmp_path):
    (tmp_path / "odd.toml").write_text('primary = "#123456"\nvariables = "x"\n')
    themes, errors = load_user_themes(tmp_path)
    assert themes == []
    assert errors == [f"theme {tmp_path / 'odd.toml'}: variables should be a table, not 'x'; not loaded"]


async def test_a_theme_with_a_bad_colour_falls_back_to_the_default(tmp_path, monkeypatch):
    from tests.support.tui import make_app, ready, user_themes

    user_themes(tmp_path, monkeypatch, bad='primary = "#0088cc"\nbackground = "not-a-colour"\n',
                worse='primary = "#0088cc"\n[variables]\nspec-accepted = "greenish"\n')  # fmt: skip
    app = make_app(tmp_path, settings=Settings(theme="bad"))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.theme == "specchat-dark"
        messages = [n.message for n in app._notifications]
        assert f"theme {tmp_path / 'config' / 'themes' / 'bad.toml'}: background = 'not-a-colour' is not a colour (try \"#268bd2\"); not loaded" in messages
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
