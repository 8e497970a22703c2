"""Files attached to a message: `run --file PATH` and `/file PATH` in the
chat put each file's text before the message, fenced, under its name; a
file that cannot be used is one line, and nothing is sent."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from specchat.attach import MAX_BYTES, Attachment, file_prefix, read_attachment, with_files
from specchat.cli import app
from specchat.errors import SpecchatError
from tests.support.tui import enter, make_app, ready, send, wait_until

CODE = "def area(w, h):\n    return w * h\n"


def test_a_file_goes_before_the_message_fenced_under_its_name(tmp_path):
    path = tmp_path / "area.py"
    path.write_text(CODE)
    file = read_attachment(str(path))
    assert file.lines == 2
    assert with_files("Rename w to width.", [file]) == f"{path}:\n```\n{CODE}```\n\nRename w to width."
    assert with_files("just this", []) == "just this"


def test_a_fence_is_longer_than_any_run_of_backticks_inside():
    doc = Attachment("notes.md", "Run:\n```sh\nmake\n```\n")
    assert doc.block() == "notes.md:\n````\nRun:\n```sh\nmake\n```\n````"


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
