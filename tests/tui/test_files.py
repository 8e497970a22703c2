"""Files in the chat, under Pilot on the fake model: `@` opens the file
picker (fuzzy, from the folder specchat runs in) and attaches the pick; F9
shows the last reply's code against the attached file it rewrites, and
writes it back only after `w` and then `y`, whole, and never over a file
changed since the diff."""

from __future__ import annotations

import pytest
from textual.widgets import Input, OptionList, Static

from specchat.attach import Attachment, with_files
from specchat.history import History, Message
from specchat.tui.files import ConfirmWrite, DiffScreen, FilePicker, files_under
from specchat.tui.panels import StatusBar
from specchat.tui.widgets import PromptInput
from tests.support.tui import make_app, notices, ready, wait_until

pytestmark = pytest.mark.usefixtures("specchat_home")

OLD = "def total(items):\n    s = 0\n    for x in items:\n        s += x\n    return s\n"
NEW = "def total(values):\n    s = 0\n    for x in values:\n        s += x\n    return s\n"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "calc.py").write_text(OLD)
    (tmp_path / "notes.txt").write_text("a note\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("hidden\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_picker_lists_files_but_not_hidden_folders(folder):
    assert files_under(folder) == ["notes.txt", "src/calc.py"]
    assert files_under(folder, limit=1) == ["notes.txt"]


async def test_at_opens_the_picker_and_attaches_the_file_picked(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("@")
        await wait_until(pilot, lambda: isinstance(app.screen, FilePicker))
        await pilot.press(*"calc")
        options = app.screen.query_one(OptionList)
        await wait_until(pilot, lambda: options.option_count == 1)
        assert str(options.get_option_at_index(0).prompt) == "src/calc.py"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not isinstance(app.screen, FilePicker))
        assert "attached src/calc.py (5 lines): it goes with your next message" in notices(app)
        assert "+ src/calc.py · 5 lines" in str(app.query_one(StatusBar).render())
        assert app.query_one(PromptInput).text == ""


async def test_an_at_inside_a_word_or_left_with_esc_is_typed(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        prompt = app.query_one(PromptInput)
        await pilot.press(*"me@x")
        await wait_until(pilot, lambda: prompt.text == "me@x")
        await pilot.press("space", "@")
        await wait_until(pilot, lambda: isinstance(app.screen, FilePicker))
        await pilot.press("escape")
        await wait_until(pilot, lambda: prompt.text == "me@x @")
        assert not app.chat.attachments


def rewrite_conversation(folder) -> int:
    """A stored exchange: calc.py attached with a rename asked, and a reply that gives the whole file."""
    history = History(folder / "data" / "history.sqlite3")
    asked = with_files("Rename items to values.", [Attachment("src/calc.py", OLD)])
    reply = f"Here it is:\n\n```python\n{NEW}```\n\nOnly the name changed."
    conv = history.record("fake-pair", asked, Message("assistant", reply))
    assert history.load(conv).title == "[+ src/calc.py] Rename items to values."  # the words, not the file's name line
    history.close()
    return conv


async def open_diff(pilot, conv: int) -> DiffScreen:
    app = pilot.app
    await ready(pilot)
    app.screen.load_conversation(conv)
    await pilot.press("f9")
    await wait_until(pilot, lambda: isinstance(app.screen, DiffScreen))
    return app.screen


async def test_f9_shows_the_diff_and_writes_only_after_w_and_y(folder):
    conv = rewrite_conversation(folder)
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        diff = await open_diff(pilot, conv)
        shown = str(diff.query_one("#diff-lines", Static).render())
        assert "-def total(items):" in shown and "+def total(values):" in shown and "--- a/src/calc.py" in shown
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmWrite))
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, DiffScreen))
        assert (folder / "src" / "calc.py").read_text() == OLD and "nothing written" in notices(app)
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmWrite))
        await pilot.press("y")
        await wait_until(pilot, lambda: not isinstance(app.screen, (ConfirmWrite, DiffScreen)))
        assert (folder / "src" / "calc.py").read_text() == NEW
        assert "wrote 5 lines to src/calc.py" in notices(app)
        assert not list((folder / "src").glob(".*.tmp"))  # no temporary file left beside it


async def test_a_file_changed_since_the_diff_is_not_overwritten(folder):
    conv = rewrite_conversation(folder)
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await open_diff(pilot, conv)
        (folder / "src" / "calc.py").write_text(OLD + "# edited meanwhile\n")
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmWrite))
        await pilot.press("y")
        await wait_until(pilot, lambda: any("src/calc.py changed on disk since the diff" in n for n in notices(app)))
        assert (folder / "src" / "calc.py").read_text() == OLD + "# edited meanwhile\n"


async def test_f9_without_an_attached_file_says_so(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f9")
        await pilot.pause()
        assert "no file attached in this chat to write back to (@ or /file PATH attaches one)" in notices(app)
        assert not isinstance(app.screen, (DiffScreen, Input))
