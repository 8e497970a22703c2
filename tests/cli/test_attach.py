"""Files attached to a message: `run --file PATH` and `/file PATH` in the
chat put each file's text before the message, fenced, under its name; a
file that cannot be used is one line, and nothing is sent."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specchat.cli.main import app
from specchat.errors import SpecchatError
from specchat.message.attach import MAX_BYTES, file_prefix, read_attachment, with_files
from tests.support.tui import enter, make_app, ready, send, wait_until

CODE = "def area(w, h):\n    return w * h\n"


def test_a_file_goes_before_the_message_fenced_under_its_name(tmp_path):
    path = tmp_path / "area.py"
    path.write_text(CODE)
    file = read_attachment(str(path))
    assert file.lines == 2
    assert with_files("Rename w to width.", [file]) == f"{path}:\n```\n{CODE}```\n\nRename w to width."
    assert with_files("just this", []) == "just this"


def test_a_fence_is_longer_than_any_run_of_backticks_inside(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.md").write_text("Run:\n```sh\nmake\n```\n")
    assert read_attachment("notes.md").block() == "notes.md:\n````\nRun:\n```sh\nmake\n```\n````"


def test_an_attachment_records_the_file_it_read(tmp_path, monkeypatch):
    """What write-back checks later: the file's real path (links resolved),
    size, mtime and the hash of its bytes; the text as the message holds it."""
    tmp_path = Path(os.path.realpath(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    data = b"\xef\xbb\xbfdef f():\r\n    return 1\r\n"
    (tmp_path / "src" / "f.py").write_bytes(data)
    (tmp_path / "f.py").symlink_to("src/f.py")
    file = read_attachment("f.py")
    st = os.stat(tmp_path / "src" / "f.py")
    assert (file.name, file.path, file.size, file.mtime_ns) == (
        "f.py",
        tmp_path / "src" / "f.py",
        len(data),
        st.st_mtime_ns,
    )
    assert file.digest == hashlib.sha256(data).hexdigest()
    assert file.text == "def f():\n    return 1\n"  # no byte order mark, every line end a newline


@pytest.mark.parametrize("name, said", [
    ("evil\ncalc2.py", "a line break"),
    ("evil\r.py", "a line break"),
    ("ok\u2028.py", "a line break"),
    ("tab\there.py", "a control character"),
    ("\x1b[31mred.py", "a control character"),
], ids=["newline", "carriage return", "line separator", "tab", "escape"])  # fmt: skip
def test_a_name_with_a_line_break_or_a_control_character_is_refused(tmp_path, monkeypatch, name, said):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(CODE)
    with pytest.raises(SpecchatError) as err:
        read_attachment(name)
    assert err.value.message == f"the name {name!r} holds {said}"
    assert err.value.hint == "rename the file (or attach a copy with a plain name)"


@pytest.mark.parametrize("make, said", [
    (lambda p: None, "no file {p}"),
    (lambda p: p.mkdir(), "{p} is a folder, not a file"),
    (lambda p: p.write_bytes(b"\x7fELF\x00\x01"), "{p} is not text (it holds NUL bytes)"),
    (lambda p: p.write_bytes(b"caf\xe9\n"), "{p} is not UTF-8 text"),
    (lambda p: p.write_bytes(b"x" * (MAX_BYTES + 1)), "{p} is over 256 KiB"),
    (lambda p: os.mkfifo(p), "{p} is not a regular file"),
], ids=["missing", "a folder", "binary", "latin-1", "too big", "a named pipe"])  # fmt: skip
def test_a_file_that_cannot_be_attached_is_one_line(tmp_path, make, said):
    path = tmp_path / "f"
    make(path)
    with pytest.raises(SpecchatError) as err:
        read_attachment(str(path))
    assert err.value.message == said.format(p=path)


def test_the_file_prefix():
    assert file_prefix("/file a.py Rename x") == ("a.py", "Rename x")
    assert file_prefix("/file a.py") == ("a.py", "")
    assert file_prefix("no prefix /file a.py") == (None, "no prefix /file a.py")
    with pytest.raises(SpecchatError, match="/file needs a path"):
        file_prefix("/file ")


def test_run_refuses_a_bad_file_before_loading_anything(specchat_home, tmp_path):
    r = CliRunner().invoke(app, ["run", "Rename x", "--file", str(tmp_path / "nope.py"), "--pair", "nosuch"])
    assert r.exit_code == 2 and r.stderr.splitlines()[0] == f"error: no file {tmp_path / 'nope.py'}"


async def test_file_in_the_chat_goes_with_the_next_message(tmp_path):
    path = tmp_path / "area.py"
    path.write_text(CODE)
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await enter(pilot, f"/file {path}")  # attached: nothing sent yet
        await pilot.pause()
        assert app.chat.session.messages == []
        bar = str(app.screen.query_one("StatusBar").render())
        assert f"+ {path} · 2 lines" in bar
        await send(pilot, "Rename w to width.")
        sent = app.chat.session.messages[0]["content"]
        assert sent == f"{path}:\n```\n{CODE}```\n\nRename w to width."
        assert "+ " not in str(app.screen.query_one("StatusBar").render())  # the next message takes none
        await enter(pilot, f"/file {tmp_path / 'gone.py'} and this")
        await wait_until(pilot, lambda: any("no file" in n.message for n in app._notifications))
        assert len(app.chat.session.messages) == 2  # nothing sent, and the prompt keeps the line to fix
        assert app.screen.query_one("PromptInput").text.startswith("/file ")


def test_run_refuses_a_name_with_a_line_break_in_one_line(specchat_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil\ncalc2.py").write_text(CODE)
    r = CliRunner().invoke(app, ["run", "Rename x", "--file", "evil\ncalc2.py", "--pair", "nosuch"])
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [
        "error: the name 'evil\\ncalc2.py' holds a line break",
        "hint: rename the file (or attach a copy with a plain name)",
    ]


def test_a_link_out_of_the_folder_says_where_it_points(specchat_home, tmp_path, monkeypatch):
    """The rule bench's --prompts follows (paths.link_out): a link in the
    folder specchat runs in that leads out of it is refused, by where it
    leads; the file given by its own path, or a link within, is attached."""
    tmp_path = Path(os.path.realpath(tmp_path))
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("not yours\n")
    (here / "area.py").write_text(CODE)
    (here / "notes.txt").symlink_to(elsewhere / "secret.txt")
    (here / "same.py").symlink_to("area.py")
    (here / "lib").symlink_to(elsewhere)  # a folder that leads out
    monkeypatch.chdir(here)
    for name, target in [("notes.txt", elsewhere / "secret.txt"), ("lib/secret.txt", elsewhere / "secret.txt")]:
        with pytest.raises(SpecchatError) as err:
            read_attachment(name)
        assert err.value.message == f"{name} links to {target}, outside the folder specchat runs in"
        assert err.value.hint == f"attach {target} by its own path if you mean that file"
    assert read_attachment(str(elsewhere / "secret.txt")).text == "not yours\n"
    assert read_attachment("same.py").path == here / "area.py"
    r = CliRunner().invoke(app, ["run", "Summarize", "--file", "notes.txt", "--pair", "nosuch"])
    assert r.exit_code == 2
    assert (
        r.stderr.splitlines()[0]
        == f"error: notes.txt links to {elsewhere / 'secret.txt'}, outside the folder specchat runs in"
    )
