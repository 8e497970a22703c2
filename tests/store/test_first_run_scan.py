"""The chat on the user's own files: `specchat --target PATH` opens them,
marked "local" in F4, and where nothing is pulled the first-run dialog
offers the pairs a scan finds beside the catalog download; choosing one
registers it as a local pair and opens it."""

from __future__ import annotations

import os

import pytest
from textual.widgets import OptionList
from typer.testing import CliRunner

from specchat.cli.main import app as cli_app
from specchat.config import Settings
from specchat.store import local
from specchat.tui.app import SpecchatApp
from specchat.tui.chat.panels import StatusBar
from specchat.tui.state.models import Models
from tests.support.tui import wait_until


def options(screen) -> dict[str, str]:
    ol = screen.query_one(OptionList)
    return {ol.get_option_at_index(i).id: str(ol.get_option_at_index(i).prompt) for i in range(ol.option_count)}


def test_chat_target_with_no_file_is_one_line(specchat_home, tmp_path):
    result = CliRunner().invoke(cli_app, ["--target", str(tmp_path / "none.gguf")])
    assert result.exit_code == 1
    assert result.output.splitlines() == [f"error: no model file at {tmp_path / 'none.gguf'}",
                                          "hint: pass the path of a .gguf file"]  # fmt: skip
    result = CliRunner().invoke(cli_app, ["chat", "--draft", str(tmp_path / "d.gguf")])
    assert result.output.splitlines() == ["error: --draft needs --target", "hint: or use --pair NAME"]


@pytest.mark.real
async def test_chat_target_opens_the_file_and_f4_marks_it_local(specchat_home, tmp_path, tiny_pair):
    target = tmp_path / "My Model.gguf"
    os.link(tiny_pair[0], target)
    app = SpecchatApp(Models(str(target)), Settings(), drafter="ngram", k=4, history=None, save_settings=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=120)
        assert str(app.query_one(StatusBar).render()).startswith("My Model · drafter ngram · k 4")
        await pilot.press("f4")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "PairPicker")
        assert options(app.screen)["My Model"] == f"● My Model  ·  local\n   files: {target}"
        assert options(app.screen)["smollm2-135m"].startswith("  smollm2-135m  ·  not pulled")
        app.chat.session.close()
    assert not (specchat_home / "config" / "settings.toml").exists()  # a path is never kept as the pair


@pytest.mark.real
async def test_first_run_offers_the_pair_a_scan_finds_and_opens_it(specchat_home, tmp_path, monkeypatch, default_pair):
    home = tmp_path / "user"  # no tool's folders: only SPECCHAT_MODELS holds files
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    mine = tmp_path / "gguf"
    (mine / "qwen").mkdir(parents=True)
    for f in default_pair:
        os.link(f, mine / "qwen" / f.name)
    monkeypatch.setenv("SPECCHAT_MODELS", str(mine))
    name = "qwen2.5-coder-1.5b-instruct-q4_k_m"
    app = SpecchatApp(Models(), Settings(), drafter="ngram", k=4, history=None, save_settings=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "PullScreen" and app.screen.query("#pull-yes"))
        found = app.screen.query_one("#found-list", OptionList)
        await wait_until(pilot, lambda: found.option_count > 0 and found.display)
        assert options(app.screen)[name] == (
            f"{name}  ·  {default_pair[0].name} drafted by {default_pair[1].name} (SPECCHAT_MODELS)"
        )
        assert app.screen.query_one("#pull-yes").display  # beside the catalog download
        found.focus()
        found.highlighted = 0
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=180)
        assert str(app.query_one(StatusBar).render()).startswith(f"{name} · drafter ngram · k 4")
        app.chat.session.close()
    pair = local.get(name)
    assert pair is not None and pair.target.path == mine / "qwen" / default_pair[0].name
    assert pair.draft is not None and pair.draft.path == mine / "qwen" / default_pair[1].name
