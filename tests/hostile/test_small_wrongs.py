"""Small wrongs a new user meets: an empty pair name or model path taken for
the default pair, [keymap] entries dropped without a word, a linked or
read-only settings.toml replaced, `rm` deleting a file a local pair opens,
and a system prompt too long for the context not named as the cause."""

from __future__ import annotations

import os
import stat

import gguf
import numpy as np
import pytest

from specchat.config import Settings, load_settings, read_settings, save_settings
from specchat.errors import SpecchatError
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from specchat.store import local
from specchat.store.catalog import load_catalog
from tests.support.gguf import TOKENS
from tests.support.hostile import cli, put, specchat
from tests.support.tui import long_model, make_app, ready, send, wait_until

# --- an empty name is a mistake, never the default pair ---------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["models", "check", ""],
        ["run", "--pair", "", "hello"],
        ["chat", "--pair", ""],
        ["bench", "--pair", ""],
        ["run", "--pair", "  ", "hello"],
    ],
)
def test_an_empty_pair_name_is_one_error_line_as_pull_says_it(specchat_home, args):
    pulled = cli("pull", "")
    result = cli(*args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.splitlines() == pulled.stderr.splitlines()
    assert result.stderr.splitlines()[0] == "error: the pair name is empty"
    assert result.stderr.splitlines()[1].startswith("hint: name a pair (known pairs: qwen2.5-coder-1.5b, ")


@pytest.mark.parametrize(
    "args, flag",
    [
        (["run", "--target", "", "hello"], "--target"),
        (["run", "--draft", "", "hello"], "--draft"),
        (["chat", "--target", ""], "--target"),
        (["bench", "--target", " "], "--target"),
        (["models", "check", "--target", ""], "--target"),
    ],
)
def test_an_empty_model_path_is_one_error_line(specchat_home, args, flag):
    result = cli(*args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {flag} is empty",
        f"hint: pass the path of a .gguf file, or leave {flag} out",
    ]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("threads = 1\noops\n", "settings.toml: Expected '=' after a key in a key/value pair (at line 2, column 5); using the defaults"),
        ('threads = "abc"\n', "settings.toml, line 1: threads should be a whole number, not 'abc'; using 0"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", [["run", "hi", "--pair"], ["bench", "--pair"], ["models", "check"]])
def test_a_command_warns_of_a_settings_file_it_cannot_use_as_the_chat_does(specchat_home, text, problem, command):
    """The chat shows these as notices; a command ran on the defaults without a word."""
    path = specchat_home / "config" / "settings.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    result = cli(*command, "no-such-pair")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: {path.parent}/") and problem in warnings[0], result.stderr
    assert result.stderr.splitlines()[-2].startswith("error: ")  # and the command's own error after it


def test_the_real_command_refuses_an_empty_pair_too(specchat_home):
    done = specchat("models", "check", "", env={"SPECCHAT_HOME": str(specchat_home)})
    assert done.returncode == 1
    assert done.stderr.decode().splitlines()[0] == "error: the pair name is empty"


# --- [keymap]: each entry it cannot bind is named, the rest kept ------------------------

KEYMAP = """\
theme = "specchat-dark"
memory = true

[keymap]
cycle_drafter = "f11"
new_chat = ""
markdown = "ctrl+"
histroy = "f3"
memory = "ctrl+shift+z, notakey"
legend = 5
regenerate = "e"
stats_panel = "ctrl+o, enter"
"""


async def test_keymap_entries_it_cannot_bind_are_each_named_with_their_line(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text(KEYMAP)
    loaded = read_settings(path)
    assert loaded.errors == [f'{path}, line 10: keymap.legend should be a key string like "ctrl+d", not 5; ignored']
    app = make_app(tmp_path, settings=loaded.settings, config_errors=loaded.errors, drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        said = [n.message for n in app._notifications if n.title == "settings"]
        keys_look = 'keys look like "ctrl+d", "f9" or "alt+left"'
        assert sorted(said) == sorted(
            [
                f"{path}, line 6: keymap.new_chat is empty; new_chat keeps ctrl+n",
                f"{path}, line 7: keymap.markdown: 'ctrl+' is not a key ({keys_look}); markdown keeps f5",
                f"{path}, line 8: keymap.histroy is not the id of any key; ignored (did you mean history?)",
                f"{path}, line 9: keymap.memory: 'notakey' is not a key ({keys_look}); memory keeps f10",
                f"{path}, line 11: keymap.regenerate: 'e' is a key the prompt types or sends with ({keys_look}); "
                "regenerate keeps ctrl+r",
                f"{path}, line 12: keymap.stats_panel: 'enter' is a key the prompt types or sends with ({keys_look}); "
                "stats_panel keeps f2",
                loaded.errors[0],
            ]
        )
        await pilot.press("f11")  # the good entry is kept
        assert app.chat.drafter != "off"
        keys = {active.binding.id: key for key, active in app.active_bindings.items() if active.binding.id}
        assert keys["new_chat"] == "ctrl+n" and keys["markdown"] == "f5" and keys["memory"] == "f10"
        assert keys["cycle_drafter"] == "f11"


async def test_a_keymap_given_without_a_file_is_named_without_a_line(tmp_path):
    app = make_app(tmp_path, settings=Settings(keymap={"nope": "f2"}))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        said = [n.message for n in app._notifications if n.title == "settings"]
        assert len(said) == 1 and said[0].startswith("keymap.nope is not the id of any key; ignored (the ids: ")


# --- settings.toml: a link is written through, a read-only file left alone -------------


def test_a_linked_settings_file_is_written_at_its_target_and_stays_a_link(tmp_path):
    dotfiles, config = tmp_path / "dotfiles", tmp_path / "config"
    dotfiles.mkdir(), config.mkdir()
    target = dotfiles / "settings.toml"
    target.write_text('# kept with my dotfiles\nk = 4\n')
    link = config / "settings.toml"
    link.symlink_to(os.path.relpath(target, config))
    save_settings({"theme": "specchat-light"}, link)
    assert link.is_symlink() and os.readlink(link) == os.path.relpath(target, config)
    assert "# kept with my dotfiles" in target.read_text()
    assert load_settings(target).theme == "specchat-light" and load_settings(link).k == 4
    assert sorted(p.name for p in dotfiles.iterdir()) == ["settings.toml"]  # no temp file left
    assert sorted(p.name for p in config.iterdir()) == ["settings.toml"]


def test_a_link_to_a_link_writes_the_last_file(tmp_path):
    (tmp_path / "real.toml").write_text("k = 4\n")
    (tmp_path / "middle.toml").symlink_to(tmp_path / "real.toml")
    (tmp_path / "settings.toml").symlink_to(tmp_path / "middle.toml")
    save_settings({"theme": "specchat-light"}, tmp_path / "settings.toml")
    assert (tmp_path / "settings.toml").is_symlink() and (tmp_path / "middle.toml").is_symlink()
    assert load_settings(tmp_path / "real.toml").theme == "specchat-light"


def test_a_read_only_settings_file_is_left_alone(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("k = 4\n")
    path.chmod(0o444)
    with pytest.raises(OSError, match="settings.toml is read-only"):
        save_settings({"theme": "specchat-light"}, path)
    assert path.read_text() == "k = 4\n" and stat.S_IMODE(path.stat().st_mode) == 0o444


async def test_a_read_only_settings_file_keeps_choices_for_the_session(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    path = tmp_path / "home" / "config" / "settings.toml"
    path.parent.mkdir(parents=True)
    path.write_text('theme = "specchat-dark"\n')
    path.chmod(0o444)
    app = make_app(tmp_path, save_settings=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.theme = "specchat-light"
        await pilot.pause()
        app.theme = "specchat-colorblind"
        await pilot.pause()
        assert app.settings.theme == "specchat-colorblind"
        notes = [n.message for n in app._notifications if n.title == "settings"]
        assert notes == [f"cannot save settings ({path} is read-only); your choices last until you quit"]
    assert path.read_text() == 'theme = "specchat-dark"\n' and stat.S_IMODE(path.stat().st_mode) == 0o444


# --- rm: a file a local pair opens is not deleted unless the user says so ---------------

SMALL = (
    '[pairs.small]\ndescription = "x"\ntarget = { repo = "t/small-GGUF", filename = "small.gguf" }\n'
    'draft = { repo = "t/small-GGUF", filename = "small.gguf" }\n'
)


def small_model(folder) -> bytes:
    """A GGUF file `models add` takes: a tokenizer and one tensor."""
    path = folder / "small.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(TOKENS)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


@pytest.fixture
def shared(write_pairs, tmp_path):
    """A pulled pair whose file a local pair `mine` registered by its path in the store."""
    write_pairs(SMALL)
    stored = put(load_catalog().get("small").target, small_model(tmp_path))
    added = cli("models", "add", "mine", "--target", str(stored))
    assert added.exit_code == 0, added.output
    return stored


def test_rm_refuses_to_delete_a_file_a_local_pair_opens(shared):
    result = cli("rm", "small")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: nothing deleted: local pair mine opens {shared}, which this would delete",
        "hint: --force deletes it anyway (that pair then cannot open); `specchat rm small mine` forgets it too",
    ]
    assert shared.is_file() and local.get("mine") is not None


def test_rm_force_deletes_it_and_says_which_pair_used_it(shared):
    result = cli("rm", "small", "--force")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"deleted {shared}",
        f"warning: local pair mine used {shared}; it cannot open now (specchat rm mine forgets it)",
    ]
    assert not shared.exists()


def test_rm_naming_the_local_pair_too_forgets_it_and_deletes_the_file(shared):
    result = cli("rm", "small", "mine")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == f"deleted {shared}"
    assert not shared.exists() and local.get("mine") is None


def test_rm_refuses_where_a_local_pair_opens_the_file_through_a_link(write_pairs, tmp_path):
    write_pairs(SMALL)
    stored = put(load_catalog().get("small").target, small_model(tmp_path))
    (tmp_path / "mine.gguf").symlink_to(stored)
    assert cli("models", "add", "mine", "--target", str(tmp_path / "mine.gguf")).exit_code == 0
    result = cli("rm", "small")
    assert result.exit_code == 1 and f"local pair mine opens {stored}" in result.stderr
    assert stored.is_file()
    forced = cli("rm", "small", "--force")
    assert forced.stdout.splitlines()[-1] == (
        f"warning: local pair mine used {stored}; it cannot open now (specchat rm mine forgets it)"
    )


# --- a system prompt too long for the context is named --------------------------------

BIG = "Answer as a pirate would. " * 40_000  # about 1 MB


def test_a_system_prompt_past_the_context_is_named_as_the_cause():
    session = ChatSession(long_model(), decode=DecodeOptions(drafter="ngram", k=4, system=BIG))
    with pytest.raises(SpecchatError) as caught:
        session.reply("hello")
    assert caught.value.message == f"the system prompt alone is {len(BIG)} tokens of the context's 4096"
    assert "/system" in caught.value.hint and "--ctx" in caught.value.hint
    assert session.messages == []  # the failed turn left nothing behind


def test_a_long_message_under_a_short_system_prompt_still_names_the_prompt():
    session = ChatSession(long_model(), decode=DecodeOptions(drafter="ngram", k=4, system="Be brief."))
    with pytest.raises(SpecchatError, match=r"^the prompt is \d+ tokens; the context holds 4096$"):
        session.reply("x" * 5000)


async def test_the_chat_says_the_system_prompt_is_too_long(tmp_path):
    app = make_app(tmp_path, settings=Settings(system_prompt=BIG))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await wait_until(pilot, lambda: any(n.title == "generation failed" for n in app._notifications))
        failed = [n.message for n in app._notifications if n.title == "generation failed"]
        assert failed == [f"the system prompt alone is {len(BIG)} tokens of the context's 4096 (shorten it "
                          "(/system in the chat, --system for run) or raise the context (ctx in settings.toml, --ctx for run)); "
                          "your message is back in the prompt"]  # fmt: skip
