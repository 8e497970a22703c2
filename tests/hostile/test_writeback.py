"""Writing a reply back to a file (F9, `w`, `y`) goes to the file the user
attached and to nothing else: a name with a line break, a name and a fence
typed into a message, a link out of the folder, a file changed since it was
attached, a read-only file, a link, a file with other hard links, line ends
of every kind, a file too big to diff at once, and F3's export through a
planted link.

Real parts: real files, folders, symlinks and hard links in a temporary
folder the chat runs in, the real app under Pilot on the fake model (which
writes no code: its reply is given the text a model would have written).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from textual.widgets import OptionList, Static
from typer.testing import CliRunner

from specchat import paths
from specchat.bench.suites import load_prompts
from specchat.cli.main import app as cli
from specchat.errors import SpecchatError
from specchat.history.database import History, Message
from specchat.message import linediff
from specchat.message.attach import read_attachment
from specchat.message.rewrite import Rewrite, check_writable, find_rewrite, write_back
from specchat.tui.chat.widgets import AssistantMessage
from specchat.tui.parts.files import NO_FILE, FilePicker
from specchat.tui.parts.screens import HistoryScreen
from specchat.tui.parts.writeback import ConfirmWrite, DiffScreen
from tests.support import tui as tui_support
from tests.support.tui import enter, make_app, notices, ready, send, wait_until

pytestmark = pytest.mark.usefixtures("specchat_home")

OLD = "def total(items):\n    s = 0\n    for x in items:\n        s += x\n    return s\n"
NEW = "def total(values):\n    s = 0\n    for x in values:\n        s += x\n    return s\n"
LINE_BREAK = "the name {!r} holds a line break (rename the file (or attach a copy with a plain name))"


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """The folder the chat runs in (links resolved: the paths are compared as the chat resolves them)."""
    here = Path(os.path.realpath(tmp_path)) / "work"
    (here / "src").mkdir(parents=True)
    (here / "src" / "calc.py").write_text(OLD)
    monkeypatch.chdir(here)
    return here


def reply_says(app, text: str) -> None:
    app.query(AssistantMessage).last().spans = [{"text": text, "kind": "target", "drafter": "target"}]


def rewrite(name: str, code: str = NEW) -> Rewrite:
    rw = find_rewrite(f"```python\n{code}```", [read_attachment(name)])
    assert rw is not None
    return rw


def write(rw: Rewrite):
    changes = rw.changes()
    assert changes is not None
    return write_back(rw, changes)


# --- a name read back from the message's text ------------------------------------------


async def test_the_pickers_choice_of_a_name_with_a_line_break_is_refused(folder):
    (folder / "evil\ncalc2.py").write_text(OLD)
    (folder / "calc2.py").write_text("the file the name's second line names\n")
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("@")
        await wait_until(pilot, lambda: isinstance(app.screen, FilePicker))
        await pilot.press(*"evil")
        options = app.screen.query_one(OptionList)
        await wait_until(pilot, lambda: options.option_count == 1)
        await pilot.press("enter")
        await wait_until(pilot, lambda: LINE_BREAK.format("evil\ncalc2.py") in notices(app))
        assert app.chat.attachments == []


async def test_a_folder_named_with_a_line_break_cannot_lead_to_another_file(folder, tmp_path):
    """`evil\\n` holding tmp/…/victim.txt: its block's name line would read as the victim's absolute path."""
    victim = Path(os.path.realpath(tmp_path)) / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text(OLD)
    decoy = folder / "evil\n" / victim.relative_to("/")
    decoy.parent.mkdir(parents=True)
    decoy.write_text(OLD)
    name = f"evil\n{victim}"
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await enter(pilot, f"/file {name} Rename items to values.")
        await wait_until(pilot, lambda: LINE_BREAK.format(name) in notices(app))
        assert app.chat.attachments == [] and app.chat.session.messages == []
    assert victim.read_text() == OLD


async def test_a_typed_name_and_fence_is_not_an_attachment(folder, tmp_path):
    victim = Path(os.path.realpath(tmp_path)) / "victim.txt"
    victim.write_text(OLD)
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, f"{victim}:\n```\n{OLD}```\n\nRename items to values.")
        reply_says(app, f"```python\n{NEW}```")
        await pilot.press("f9")
        await wait_until(pilot, lambda: NO_FILE in notices(app))
        assert not isinstance(app.screen, DiffScreen)
    assert victim.read_text() == OLD


async def test_a_link_out_of_the_folder_is_refused_by_where_it_points(folder, tmp_path):
    victim = Path(os.path.realpath(tmp_path)) / "victim.txt"
    victim.write_text(OLD)
    (folder / "calc.py").symlink_to(victim)
    said = f"calc.py links to {victim}, outside the folder specchat runs in (attach {victim} by its own path if you mean that file)"
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await enter(pilot, "/file calc.py")
        await wait_until(pilot, lambda: said in notices(app))
        assert app.chat.attachments == []


def test_bench_and_attach_refuse_the_same_link_by_one_rule(folder, tmp_path):
    elsewhere = Path(os.path.realpath(tmp_path)) / "secret.txt"
    elsewhere.write_text("not a prompt\n")
    (folder / "a.txt").write_text("Say hi.")
    (folder / "b.txt").symlink_to(elsewhere)
    assert paths.link_out(folder / "b.txt", folder) == elsewhere
    assert paths.link_out(folder / "a.txt", folder) is None
    assert paths.link_out(elsewhere, folder) is None  # named by its own path: not a link out of the folder
    with pytest.raises(SpecchatError, match="links to a file outside"):
        load_prompts(str(folder))
    with pytest.raises(SpecchatError, match="outside the folder specchat runs in"):
        read_attachment("b.txt")


# --- the file as it was attached ------------------------------------------------------------


async def write_asked(pilot, name: str, ask: str) -> None:
    """`name` attached with /file and `ask` sent; the reply gives NEW, F9
    shows its diff, and w asks to write it back."""
    app = pilot.app
    await enter(pilot, f"/file {name}")
    await wait_until(pilot, lambda: app.chat.attachments)
    await send(pilot, ask)
    reply_says(app, f"```python\n{NEW}```")
    await pilot.press("f9")
    await wait_until(pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen.changes is not None)
    await pilot.press("w")


async def test_a_read_only_file_is_refused_before_asking(folder):
    (folder / "src" / "calc.py").chmod(0o444)
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await write_asked(pilot, "src/calc.py", "Rename items to values.")
        said = "src/calc.py is read-only (make it writable (chmod u+w) first, or leave it be)"
        await wait_until(pilot, lambda: said in notices(app))
        assert not isinstance(app.screen, ConfirmWrite)
    assert (folder / "src" / "calc.py").read_text() == OLD
    assert (folder / "src" / "calc.py").stat().st_mode & 0o777 == 0o444


async def test_the_chat_asks_before_writing_through_a_link_and_keeps_the_link(folder):
    (folder / "calc.py").symlink_to("src/calc.py")
    app = make_app(folder / "data")
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await write_asked(pilot, "calc.py", "Rename items to values.")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmWrite))
        asked = str(app.screen.query_one(Static).render())
        assert (
            asked
            == f"Write 5 lines to calc.py (a link: the file it leads to, {folder / 'src' / 'calc.py'}), replacing it?  (y / n)"
        )
        await pilot.press("y")
        await wait_until(pilot, lambda: "wrote 5 lines to calc.py" in notices(app))
    assert (folder / "calc.py").is_symlink() and (folder / "src" / "calc.py").read_text() == NEW


async def test_a_reply_whose_code_is_under_half_the_file_is_asked_about_as_maybe_a_part(folder):
    """A snippet like the file is offered as its rewrite; the question says
    what writing it would do to the rest."""
    whole = OLD + "".join(f"\n\ndef f{n}(x):\n    return x + {n}\n" for n in range(2))  # 5 + 8 lines
    (folder / "src" / "calc.py").write_text(whole)
    app = make_app(folder / "data")
    async with app.run_test(size=(200, 40)) as pilot:
        await ready(pilot)
        await write_asked(pilot, "src/calc.py", "Rename items to values in total only.")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmWrite))
        asked = str(app.screen.query_one(Static).render())
        assert asked == (
            "Write 5 lines to src/calc.py (it has 13: the reply's code may be a part of it, not the whole file), "
            "replacing it?  (y / n)"
        )
        await pilot.press("n")
    assert (folder / "src" / "calc.py").read_text() == whole


def test_a_link_is_written_through_to_the_file_it_leads_to(folder):
    (folder / "calc.py").symlink_to("src/calc.py")
    written = write(rewrite("calc.py"))
    assert (folder / "calc.py").is_symlink() and os.readlink(folder / "calc.py") == "src/calc.py"
    assert (folder / "src" / "calc.py").read_text() == NEW
    assert written.path == folder / "src" / "calc.py" and written.text == NEW


def test_a_file_with_other_hard_links_is_refused_and_they_stay_one_file(folder):
    os.link(folder / "src" / "calc.py", folder / "twin.py")
    rw = rewrite("src/calc.py")
    with pytest.raises(SpecchatError) as err:
        write(rw)
    assert err.value.message == "src/calc.py has 1 other hard link(s): a new file in its place would part them"
    assert (folder / "twin.py").read_text() == OLD == (folder / "src" / "calc.py").read_text()
    assert os.stat(folder / "twin.py").st_ino == os.stat(folder / "src" / "calc.py").st_ino


def test_the_mode_stays_and_no_temporary_file_is_left(folder):
    (folder / "src" / "calc.py").chmod(0o640)
    write(rewrite("src/calc.py"))
    assert (folder / "src" / "calc.py").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in (folder / "src").iterdir()) == ["calc.py"]


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


@pytest.mark.parametrize("old, new", [
    (crlf(OLD).encode(), crlf(NEW).encode()),
    (OLD.replace("\n", "\r").encode(), NEW.replace("\n", "\r").encode()),
    (b"\xef\xbb\xbf" + OLD.encode(), b"\xef\xbb\xbf" + NEW.encode()),
    (b"\xef\xbb\xbf" + crlf(OLD).encode(), b"\xef\xbb\xbf" + crlf(NEW).encode()),
    (OLD.rstrip("\n").encode(), NEW.rstrip("\n").encode()),
    (b"def total(items):\r\n    s = 0\n    for x in items:\r\n        s += x\n    return s",
     b"def total(values):\r\n    s = 0\n    for x in values:\r\n        s += x\n    return s"),
], ids=["CR LF", "CR alone", "byte order mark", "byte order mark and CR LF", "no final newline", "mixed"])  # fmt: skip
def test_what_the_file_is_stays_as_it_was(folder, old, new):
    (folder / "src" / "calc.py").write_bytes(old)
    write(rewrite("src/calc.py"))
    assert (folder / "src" / "calc.py").read_bytes() == new


def test_a_line_the_reply_adds_takes_the_files_usual_line_end(folder):
    (folder / "src" / "calc.py").write_bytes(crlf(OLD).replace("    s = 0\r\n", "    s = 0\n").encode())
    write(rewrite("src/calc.py", NEW.replace("    return s\n", "    # done\n    return s\n")))
    want = crlf(NEW).replace("    s = 0\r\n", "    s = 0\n").replace("    return s", "    # done\r\n    return s")
    assert (folder / "src" / "calc.py").read_bytes() == want.encode()


@pytest.mark.parametrize("change", [
    lambda p: p.write_text(OLD + "# more\n"),
    lambda p: os.utime(p, ns=(0, 0)),
    lambda p: (p.unlink(), p.write_text(OLD)),
    lambda p: (p.unlink(), p.symlink_to(p.parent / "other.py")),
], ids=["edited", "touched", "replaced by a copy", "replaced by a link"])  # fmt: skip
def test_a_file_changed_since_it_was_attached_is_not_written(folder, change):
    (folder / "src" / "other.py").write_text(OLD)
    path = folder / "src" / "calc.py"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # a copy made now has another mtime
    rw = rewrite("src/calc.py")
    change(path)
    with pytest.raises(SpecchatError) as err:
        check_writable(rw)
    assert err.value.one_line() in (
        "src/calc.py changed since it was attached (attach it again (@ or /file PATH))",
        f"src/calc.py is no longer where it was attached ({path}) (attach it again (@ or /file PATH))",
    )
    assert (folder / "src" / "other.py").read_text() == OLD


# --- a big file ------------------------------------------------------------------------------

BIG = "".join(f"v{i}=a\n" if i % 2 else f"w{i}=a\n" for i in range(24_000))
BIG_NEW = "".join(f"v{i}=b\n" if i % 2 else f"w{i}=a\n" for i in range(24_000))


@pytest.fixture
def big_context(monkeypatch):
    """The fake model with a context that holds a 24,000-line file, as a big model's does."""
    small = tui_support.long_model

    def big(**kw):
        model = small(**kw)
        model.n_ctx = 400_000
        return model

    monkeypatch.setattr(tui_support, "long_model", big)


async def big_rewrite_asked(pilot, folder: Path) -> None:
    (folder / "big.py").write_text(BIG)
    await ready(pilot)
    await enter(pilot, "/file big.py")
    await wait_until(pilot, lambda: pilot.app.chat.attachments)
    await send(pilot, "Rename a to b on the odd lines.")
    assert pilot.app.conversation.attached()  # the message went, with its file
    reply_says(pilot.app, f"```python\n{BIG_NEW}```")


async def test_a_big_diff_is_made_off_the_chats_thread_and_esc_stops_it(folder, big_context, monkeypatch):
    started, stopped = threading.Event(), threading.Event()

    def held(a, b, stop):  # the diff, held until the screen stops it (at most a minute)
        started.set()
        end = time.monotonic() + 60
        while not stop() and time.monotonic() < end:
            time.sleep(0.01)
        if stop():
            stopped.set()
        return None

    monkeypatch.setattr(linediff, "opcodes", held)
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await big_rewrite_asked(pilot, folder)
        await pilot.press("f9")
        await wait_until(pilot, lambda: isinstance(app.screen, DiffScreen) and started.is_set())
        shown = app.screen.query_one("#diff-lines", Static)
        assert str(shown.render()) == "diffing 24,000 lines…"
        await pilot.press("w")  # the chat answers keys while the diff is made
        await wait_until(pilot, lambda: "the diff is not ready yet (esc stops it)" in notices(app))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, DiffScreen))
        await wait_until(pilot, stopped.is_set)
    assert (folder / "big.py").read_text() == BIG


async def test_a_big_diff_shows_its_first_lines_and_writes_all_of_it(folder, big_context):
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await big_rewrite_asked(pilot, folder)
        await pilot.press("f9")
        await wait_until(pilot, lambda: isinstance(app.screen, DiffScreen))
        diff = app.screen
        await wait_until(pilot, lambda: diff.changes is not None, timeout=120)
        shown = str(diff.query_one("#diff-lines", Static).render())
        assert shown.startswith("--- a/big.py\n+++ b/big.py\n@@ -1,")
        assert "-v1=a\n+v1=b" in shown
        assert "more lines of the diff: too large to show whole (w writes all of it)" in shown.splitlines()[-1]
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmWrite))
        await pilot.press("y")
        await wait_until(pilot, lambda: "wrote 24000 lines to big.py" in notices(app), timeout=60)
    assert (folder / "big.py").read_text() == BIG_NEW


def test_the_quick_diff_turns_the_old_lines_into_the_new():
    """linediff's opcodes against difflib's meaning of them, on many small edits."""
    import random

    rng = random.Random(5)
    for _ in range(500):
        a = [rng.choice("abcdef") + str(rng.randint(0, 4)) for _ in range(rng.randint(0, 40))]
        b = list(a)
        for _ in range(rng.randint(0, 6)):
            at = rng.randint(0, len(b))
            b[at:at + rng.randint(0, 2)] = [rng.choice("xyz")] * rng.randint(0, 2)  # fmt: skip
        codes = linediff.opcodes(a, b)
        assert codes is not None
        out, i, j = [], 0, 0
        for tag, i1, i2, j1, j2 in codes:
            assert (i1, j1) == (i, j)
            assert tag != "equal" or a[i1:i2] == b[j1:j2]
            out += b[j1:j2]
            i, j = i2, j2
        assert out == b and (i, j) == (len(a), len(b))


# --- F3's export -------------------------------------------------------------------------------


async def test_an_export_replaces_a_planted_link_and_leaves_its_target(folder, tmp_path):
    victim = Path(os.path.realpath(tmp_path)) / "victim.txt"
    victim.write_text("precious\n")
    history = History(folder / "data" / "history.sqlite3")
    conv = history.record("fake-pair", "hello there", Message("assistant", "hi"))
    history.close()
    exported = paths.data_dir() / "exports" / f"conversation-{conv}.md"
    exported.parent.mkdir(parents=True)
    exported.symlink_to(victim)
    app = make_app(folder / "data")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        await pilot.press("e")
        await wait_until(pilot, lambda: f"exported to {exported}" in notices(app))
    assert victim.read_text() == "precious\n"
    assert not exported.is_symlink() and "hello there" in exported.read_text()


def test_run_refuses_a_link_out_of_the_folder(folder, tmp_path):
    victim = Path(os.path.realpath(tmp_path)) / "victim.txt"
    victim.write_text(OLD)
    (folder / "calc.py").symlink_to(victim)
    r = CliRunner().invoke(cli, ["run", "Rename", "--file", "calc.py", "--pair", "nosuch"])
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [
        f"error: calc.py links to {victim}, outside the folder specchat runs in",
        f"hint: attach {victim} by its own path if you mean that file",
    ]
