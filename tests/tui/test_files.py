"""Files in the chat, under Pilot on the fake model: `@` opens the file
picker (fuzzy, from the folder specchat runs in) and attaches the pick; F9
shows the last reply's code against the attached file it rewrites (one the
user attached in this chat), and writes it back only after `w` and then
`y`, whole, and never over a file changed since it was attached."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from textual.widgets import Input, OptionList, Static

from specchat.history.database import History, Message
from specchat.tui.chat.panels import StatusBar
from specchat.tui.chat.widgets import AssistantMessage, PromptInput
from specchat.tui.parts import files
from specchat.tui.parts.files import MAX_FILES, REOPENED, SNIFF, FilePicker, files_under, is_binary, size_label
from specchat.tui.parts.writeback import ConfirmWrite, DiffScreen
from specchat.walk import walk
from tests.support.deep import nested_folders
from tests.support.tui import enter, make_app, notices, ready, send, wait_until

pytestmark = pytest.mark.usefixtures("specchat_home")

CHANGED = "src/calc.py changed since it was attached (attach it again (@ or /file PATH))"
NOTHING = "the reply's code is the file as it is: nothing to write"
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
    assert list(files_under(folder)) == [["notes.txt"], ["src/calc.py"]]  # folder by folder


def test_the_picker_sizes_each_file_from_its_entry_never_opening_a_fifo_or_following_a_link(folder):
    os.mkfifo(folder / "pipe")
    (folder / "big.log").write_bytes(b"x" * 3_500_000)
    (folder / "to-big").symlink_to(folder / "big.log")
    (folder / "dangling").symlink_to(folder / "nowhere")
    labels = {name: size_label(folder / name) for name in ("notes.txt", "big.log", "pipe", "to-big", "dangling", "gone")}
    assert labels == {"notes.txt": "7 B", "big.log": "3.3 MB", "pipe": "not a file", "to-big": "link",
                      "dangling": "link", "gone": "gone"}


async def test_the_picker_leaves_binary_files_out_and_says_how_many(folder):
    (folder / "model.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(64))
    (folder / "late.bin").write_bytes(b"x" * (SNIFF - 1) + b"\0")  # a NUL in the bytes read: binary
    (folder / "later.log").write_bytes(b"x" * SNIFF + b"\0")  # past them: listed (attaching will say)
    (folder / "empty.txt").touch()
    os.mkfifo(folder / "pipe")  # never opened: the walk goes on
    (folder / "to-model").symlink_to(folder / "model.gguf")  # never followed
    assert [is_binary(folder / n) for n in ("model.gguf", "late.bin", "later.log", "empty.txt", "pipe", "to-model")] == [
        True, True, False, False, False, False]  # fmt: skip
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        picker = await open_picker(pilot)
        await wait_until(pilot, lambda: "not listed" in picker_count(picker), timeout=30)
        binary = [p for names in files_under(folder) for p in names if is_binary(folder / p)]  # the data folder's too
        assert {"model.gguf", "late.bin"} <= set(binary) and not set(binary) & set(picker.files)
        assert picker_count(picker) == f"{len(picker.files)} files · {len(binary)} binary not listed"
        assert {"later.log", "empty.txt", "pipe", "to-model", "notes.txt"} <= set(picker.files)
        await pilot.press("escape")


async def test_the_picker_in_a_folder_nested_1100_deep_lists_its_files_and_the_chat_goes_on(folder):
    """Python 3.11's os.walk recurses once per level: 1,100 of them ended the chat, the prompt's text with it."""
    app = make_app(folder / "data")
    with nested_folders(folder / "src", 1100) as bottom:
        (bottom / "deep.txt").write_text("at the bottom\n")
        (bottom / "up").symlink_to(folder, target_is_directory=True)  # a loop, were links followed
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            prompt = app.query_one(PromptInput)
            await pilot.press(*"look at", "space", "@")
            await wait_until(pilot, lambda: isinstance(app.screen, FilePicker))
            picker = app.screen
            await wait_until(pilot, lambda: "listing" not in picker_count(picker), timeout=30)  # the walk's end
            await pilot.press(*"deep")
            options = picker.query_one(OptionList)
            await wait_until(pilot, lambda: options.option_count == 1)
            assert str(options.get_option_at_index(0).prompt) == f"{(bottom / 'deep.txt').relative_to(folder)}  14 B"
            await pilot.press("escape")
            await wait_until(pilot, lambda: prompt.text == "look at @deep")  # what was typed in the picker too


async def open_picker(pilot) -> FilePicker:
    """`@` in an empty prompt: the picker, open."""
    await pilot.press("@")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, FilePicker))
    return pilot.app.screen


def picker_count(picker: FilePicker) -> str:
    """What the picker says under its list: how many files, or why it lists fewer."""
    return str(picker.query_one("#file-count", Static).render())


async def test_a_folder_with_more_files_than_the_picker_lists_says_so(folder):
    many = folder / "many"
    many.mkdir()
    for i in range(MAX_FILES + 1):
        (many / f"f{i:05}.txt").touch()
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        picker = await open_picker(pilot)
        await wait_until(pilot, lambda: picker_count(picker).startswith("first 5,000 files shown"), timeout=30)
        assert len(picker.files) == MAX_FILES == 5000


async def test_esc_closes_the_picker_while_it_walks_and_stops_the_walk(folder, monkeypatch):
    """A walk that takes long (100,000 folders): the list fills as it goes,
    Esc closes the picker at once, and the walk goes no further."""
    for i in range(20):
        (folder / "tree" / f"{i:02}").mkdir(parents=True)
        (folder / "tree" / f"{i:02}" / "file.txt").touch()
    walked: list[Path] = []
    slow = threading.Event()  # set: the walk goes on again

    def slow_walk(root, **kw):
        for item in walk(root, **kw):
            walked.append(item[0])
            if len(walked) > 4:  # the first folders come at once, then each waits
                slow.wait(10)
            yield item

    monkeypatch.setattr(files, "walk", slow_walk)
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        prompt = app.query_one(PromptInput)
        picker = await open_picker(pilot)
        await wait_until(pilot, lambda: "listing the files…" in picker_count(picker) and picker.files)
        assert picker.query_one(OptionList).option_count == len(picker.files) < 20
        await pilot.press("escape")
        await wait_until(pilot, lambda: prompt.text == "@")  # closed while the walk waits
        slow.set()
        await wait_until(pilot, lambda: not any(w.is_running for w in app.workers if w.group == "file-picker"))
        assert len(walked) == 5  # up to the folder it waited in, and none after it


async def test_at_opens_the_picker_and_attaches_the_file_picked(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("@")
        await wait_until(pilot, lambda: isinstance(app.screen, FilePicker))
        await pilot.press(*"calc")
        options = app.screen.query_one(OptionList)
        await wait_until(pilot, lambda: options.option_count == 1)
        assert str(options.get_option_at_index(0).prompt) == f"src/calc.py  {len(OLD)} B"  # with its size
        await pilot.press("enter")
        await wait_until(pilot, lambda: not isinstance(app.screen, FilePicker))
        assert "attached src/calc.py (5 lines): it goes with your next message" in notices(app)
        assert "+ src/calc.py · 5 lines" in str(app.query_one(StatusBar).render())
        assert app.query_one(PromptInput).text == ""


async def test_an_at_inside_a_word_or_left_with_esc_is_typed_with_what_follows_it(folder):
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
        await pilot.press("space", "@")  # a word after the @ goes back to the prompt, whole
        await wait_until(pilot, lambda: isinstance(app.screen, FilePicker))
        await pilot.press(*"property", "escape")
        await wait_until(pilot, lambda: prompt.text == "me@x @ @property")
        await pilot.press("space", "@")  # and where no file is named so, Enter gives it back too, unsent
        await wait_until(pilot, lambda: isinstance(app.screen, FilePicker))
        await pilot.press(*"zzqq", "enter")
        await wait_until(pilot, lambda: prompt.text == "me@x @ @property @zzqq")
        assert not app.chat.attachments and not app.query(AssistantMessage)


def reply_says(app, text: str) -> None:
    """The fake model writes no code: its last reply is given the text a
    model would have written (F9 reads the reply as the screen holds it)."""
    app.query(AssistantMessage).last().spans = [{"text": text, "kind": "target", "drafter": "target"}]


async def rewrite_asked(pilot, name: str = "src/calc.py") -> None:
    """`name` attached with /file and a rename asked; the reply gives the whole file renamed."""
    await ready(pilot)
    await enter(pilot, f"/file {name}")
    await wait_until(pilot, lambda: pilot.app.chat.attachments)
    await send(pilot, "Rename items to values.")
    reply_says(pilot.app, f"Here it is:\n\n```python\n{NEW}```\n\nOnly the name changed.")


async def open_diff(pilot) -> DiffScreen:
    """F9, and the diff once its worker has made it."""
    app = pilot.app
    await pilot.press("f9")
    await wait_until(pilot, lambda: isinstance(app.screen, DiffScreen))
    diff = app.screen
    await wait_until(pilot, lambda: diff.changes is not None)
    return diff


async def test_f9_shows_the_diff_and_writes_only_after_w_and_y(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await rewrite_asked(pilot)
        diff = await open_diff(pilot)
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
        diff = await open_diff(pilot)  # the file attached is now the file as written: nothing left to change
        assert str(diff.query_one("#diff-lines", Static).render()) == NOTHING


async def test_a_file_changed_since_the_diff_is_not_overwritten(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await rewrite_asked(pilot)
        await open_diff(pilot)
        (folder / "src" / "calc.py").write_text(OLD + "# edited meanwhile\n")
        await pilot.press("w")
        await wait_until(pilot, lambda: CHANGED in notices(app))
        assert not isinstance(app.screen, ConfirmWrite)  # refused before asking
        assert (folder / "src" / "calc.py").read_text() == OLD + "# edited meanwhile\n"


async def test_a_file_changed_between_w_and_y_is_not_overwritten(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await rewrite_asked(pilot)
        await open_diff(pilot)
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmWrite))
        (folder / "src" / "calc.py").write_text(OLD + "# edited meanwhile\n")
        await pilot.press("y")
        await wait_until(pilot, lambda: CHANGED in notices(app))
        assert (folder / "src" / "calc.py").read_text() == OLD + "# edited meanwhile\n"


async def test_a_file_changed_since_it_was_attached_is_refused_at_f9(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await rewrite_asked(pilot)
        (folder / "src" / "calc.py").write_text(OLD.replace("s = 0", "s = 1"))
        await pilot.press("f9")
        await wait_until(pilot, lambda: CHANGED in notices(app))
        assert not isinstance(app.screen, DiffScreen)
        await enter(pilot, "/file src/calc.py")  # attached again: the diff is against the file as it is now
        await send(pilot, "Once more.")
        reply_says(app, f"```python\n{NEW}```")
        diff = await open_diff(pilot)
        assert "-    s = 1" in str(diff.query_one("#diff-lines", Static).render())


async def test_f9_without_an_attached_file_says_so(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f9")
        await pilot.pause()
        assert "no file attached in this chat to write back to (@ or /file PATH attaches one)" in notices(app)
        assert not isinstance(app.screen, (DiffScreen, Input))


async def test_a_reopened_conversation_keeps_no_file_to_write_back_to(folder):
    """The history keeps messages, not what was attached: a stored message's
    file block is text, and F9 says the file must be attached again."""
    history = History(folder / "data" / "history.sqlite3")
    asked = f"src/calc.py:\n```\n{OLD}```\n\nRename items to values."
    conv = history.record("fake-pair", asked, Message("assistant", f"```python\n{NEW}```"))
    assert history.load(conv).title == "[+ src/calc.py] Rename items to values."  # the words, not the file's name line
    history.close()
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.screen.load_conversation(conv)
        await pilot.press("f9")
        await wait_until(pilot, lambda: REOPENED in notices(app))
        assert not isinstance(app.screen, DiffScreen)
        assert (folder / "src" / "calc.py").read_text() == OLD


async def test_an_edited_message_keeps_the_file_whose_text_it_still_holds(folder):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await rewrite_asked(pilot)
        await pilot.press("ctrl+l")
        prompt = app.query_one(PromptInput)
        await wait_until(pilot, lambda: prompt.text.endswith("Rename items to values."))
        await send(pilot, prompt.text.replace("Rename items", "Please rename items"))
        assert [f.name for f in app.conversation.attached()] == ["src/calc.py"]
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: prompt.text.endswith("to values."))
        await send(pilot, prompt.text.replace("s = 0", "s = 10"))  # the file's text edited: no longer the file
        assert app.conversation.attached() == []
