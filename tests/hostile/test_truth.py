"""Say the truth: a reply the context ended says so, a suite's name is text,
a server's password is never shown, a prompts folder gives only its own
files, and a keymap that binds one key twice is named."""

from __future__ import annotations

import io
import os

from rich.console import Console
from typer.testing import CliRunner

from specchat.bench import report
from specchat.cli.main import app
from specchat.server.client import ServerClient, shown_url
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from specchat.tui.chat.keys import keymap_conflicts
from tests.support.tui import long_model, make_app, ready


def test_a_reply_the_context_ended_finishes_as_context_not_length():
    model = long_model()
    model.n_ctx = 120
    session = ChatSession(model, decode=DecodeOptions(drafter="ngram", k=4, max_tokens=1000))
    turn = session.reply("hello")
    assert turn.finish == "context" and 0 < len(turn.tokens) < 120
    short = ChatSession(long_model(), decode=DecodeOptions(drafter="ngram", k=4, max_tokens=10)).reply("hello")
    assert short.finish == "length" and len(short.tokens) == 10  # --max-tokens ended it: that is "length"


async def test_the_chat_marks_a_reply_the_context_ended(tmp_path):
    from tests.support.tui import FakeModels, send

    class SmallContext(FakeModels):
        def open(self, pair, drafter, k, settings):
            session = super().open(pair, drafter, k, settings)
            session.target.n_ctx = session.n_ctx = 150
            return session

    app_ = make_app(tmp_path, models=SmallContext(max_tokens=1000))
    async with app_.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        reply = await send(pilot, "hello")
        assert reply.finish == "context"
        line = str(reply.query_one("StatsLine").render())
        assert line.startswith("context full")


def test_a_suite_name_with_escapes_and_markup_is_shown_as_text():
    rows = [{"suite": "\x1b[31mred[bold]x[/bold]", "drafter": "off", "k": 0, "alpha": 1.0, "acceptance_rate": 0,
             "tok_s": 10.0, "off_tok_s": 10.0, "speedup": 1.0, "identical_rate": 1.0, "reply_tokens": 12.0,
             "shares": {"draft": 0, "verify": 0, "plain": 1, "other": 0}, "per_position_acceptance": []}]
    console = Console(width=200, record=True, color_system=None)
    console.print(report.table(rows, title="bench on [bold]pair[/bold]\x1b[2J"))
    text = console.export_text()
    assert "␛[31mred[bold]x[/bold]" in text and "bench on [bold]pair[/bold]␛[2J" in text
    assert "\x1b" not in text


def test_a_servers_password_is_masked_wherever_it_shows():
    assert shown_url("http://me:s3cret@127.0.0.1:8080") == "http://me:***@127.0.0.1:8080"
    assert shown_url("https://tok3n@host/v1") == "https://***@host/v1"
    client = ServerClient("http://me:s3cret@127.0.0.1:9")  # nothing listens on port 9
    try:
        assert client.url == "http://me:***@127.0.0.1:9"
    finally:
        client.close()
    r = CliRunner().invoke(app, ["run", "hi", "--server", "http://me:s3cret@127.0.0.1:9"])
    assert r.exit_code != 0 and "s3cret" not in r.output and "me:***@127.0.0.1:9" in r.stderr


def test_a_prompts_folder_refuses_a_link_to_a_file_outside_it(tmp_path, specchat_home):
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "a.txt").write_text("Say hi.")
    (folder / "b.txt").symlink_to("/etc/hostname")
    r = CliRunner().invoke(app, ["bench", "--prompts", str(folder)])
    assert r.exit_code == 2
    assert r.stderr.splitlines()[0] == f"error: --prompts: {folder / 'b.txt'} links to a file outside {folder}"
    (folder / "b.txt").unlink()
    (folder / "c.txt").symlink_to(folder / "a.txt")  # a link within the folder is the folder's own
    from specchat.bench.suites import load_prompts

    assert [p.id for p in load_prompts(str(folder)).prompts] == ["a", "c"]


async def test_a_key_bound_twice_is_named_at_start(tmp_path):
    from specchat.config import Settings

    assert keymap_conflicts({}) == []
    app_ = make_app(tmp_path, settings=Settings(keymap={"history": "f5"}))
    async with app_.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        said = [n.message for n in app_._notifications if n.title == "settings"]
        assert said == ["keymap: f5 is bound to history and markdown; only one of them runs, so remap the others"]


def synthetic_llama(tiny_pair, folder):
    from tools.synth_gguf import write

    return write("llama", folder / "mine.gguf", tiny_pair[0])


def test_models_verify_hashes_local_pairs_too(tiny_pair, tmp_path, specchat_home):
    path = synthetic_llama(tiny_pair, tmp_path)
    assert CliRunner().invoke(app, ["models", "add", "mine", "--target", str(path)]).exit_code == 0
    r = CliRunner().invoke(app, ["models", "--verify"], env={"COLUMNS": "300"})
    assert r.exit_code == 0 and f"ok       {path} (local pair mine)" in r.stdout and "1 of 1 files verified" in r.stdout
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one byte flipped, same size
    mtime = path.stat().st_mtime_ns
    path.write_bytes(bytes(data))
    os.utime(path, ns=(mtime, mtime))  # and the mtime put back: only a hash can tell
    r = CliRunner().invoke(app, ["models", "--verify"], env={"COLUMNS": "300"})
    assert r.exit_code == 1
    assert f"FAILED   {path}: missing or changed since local pair mine was added; fix: specchat models add mine" in r.stdout


def test_rm_says_which_local_pair_used_a_deleted_file(tiny_pair, tmp_path, hub_server, write_pairs):
    from specchat.store import files as store
    from specchat.store.catalog import load_catalog
    from specchat.store.pull import pull_pair

    content = synthetic_llama(tiny_pair, tmp_path).read_bytes()
    write_pairs('[pairs.small]\ndescription = "x"\ntarget = { repo = "t/small-GGUF", filename = "small.gguf" }\n'
                'draft = { repo = "t/small-GGUF", filename = "small.gguf" }\n')
    hub_server.add("t/small-GGUF", "small.gguf", content)
    pull_pair("small", source="hub", progress=False, console=Console(file=io.StringIO()))
    stored = store.file_path(load_catalog().get("small").target)
    assert CliRunner().invoke(app, ["models", "add", "mine", "--target", str(stored)]).exit_code == 0
    r = CliRunner().invoke(app, ["rm", "small", "--force"], env={"COLUMNS": "300"})  # a local pair opens it
    assert r.exit_code == 0 and r.stdout.splitlines() == [
        f"deleted {stored}",
        f"warning: local pair mine used {stored}; it cannot open now (specchat rm mine forgets it)",
    ]


def test_a_progress_bar_shows_a_file_name_as_text():
    from specchat.store.pull import UI

    console = Console(file=io.StringIO(), width=200, force_terminal=True, color_system=None)
    with UI(True, console).bar("hashing [bold]x[/bold]\x1b[2J.gguf", 10) as bar:
        bar.advance(10)
    shown = console.file.getvalue()
    assert "hashing [bold]x[/bold]␛[2J.gguf" in shown and "\x1b[2J" not in shown
