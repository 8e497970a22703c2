"""Coming back to a conversation: `specchat history list` prints every
stored one with its id, `history show ID` prints one, and the chat reopens
the last one (`--continue`) or any (`--conversation ID`) once the pair has
loaded; an id that is not there, or nothing to continue, is one line before
the app starts."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from specchat import paths
from specchat.cli.main import app
from specchat.errors import SpecchatError
from specchat.history.database import History, Message
from specchat.tui import reopened
from tests.support.tui import make_app, ready, wait_until


def stored() -> tuple[int, int]:
    history = History(paths.history_db())
    first = history.record("p", "Tell me about cats", Message("assistant", "Cats sleep all day."))
    last = history.record("p", "Rename x to y", Message("assistant", "def f(y):\n    return y"))
    history.close()
    return first, last


def test_history_list_prints_each_conversation_with_its_id_latest_first(specchat_home):
    first, last = stored()
    r = CliRunner().invoke(app, ["history", "list"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split()[0] == str(last) and "Rename x to y · 2 messages · p" in lines[0]
    assert lines[1].split()[0] == str(first) and "Tell me about cats" in lines[1]
    assert "specchat --conversation ID" in r.stderr
    listed = json.loads(CliRunner().invoke(app, ["history", "list", "--json", "--limit", "1"]).stdout)
    assert [c["id"] for c in listed] == [last] and listed[0]["n_messages"] == 2


def test_history_list_with_nothing_stored_says_so(specchat_home):
    r = CliRunner().invoke(app, ["history", "list"])
    assert r.exit_code == 0 and "no stored conversation yet" in r.stdout


def test_history_show_prints_the_conversation_and_an_unknown_id_is_one_line(specchat_home):
    first, _ = stored()
    r = CliRunner().invoke(app, ["history", "show", str(first)])
    assert r.exit_code == 0 and "# Tell me about cats" in r.stdout and "Cats sleep all day." in r.stdout
    for unknown in ("999", str(2**63), "99999999999999999999999"):  # past SQLite's 64-bit ids too
        r = CliRunner().invoke(app, ["history", "show", unknown])
        assert r.exit_code != 0 and f"no stored conversation has id {unknown}" in r.output, r.output
        assert "history list" in r.output and "Traceback" not in r.output
        assert r.exception is None or isinstance(r.exception, SystemExit)


@pytest.mark.parametrize("command", [["history", "list"], ["history", "search", "cats"], ["history", "show", "1"]])
def test_a_home_that_is_a_file_is_one_line_for_the_history_commands(tmp_path, monkeypatch, command):
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("SPECCHAT_HOME", str(home))
    r = CliRunner().invoke(app, command)
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.stderr.splitlines()[0].startswith(f"error: cannot open the history at {home / 'data' / 'history.sqlite3'} (")
    assert "chatting" not in r.stderr and r.stderr.count("cannot open the history") == 1
    assert r.stderr.splitlines()[1] == "hint: check that the data folder (SPECCHAT_HOME=DIR moves it) is a folder this user can write"


def test_continue_takes_the_last_conversation_and_an_unknown_id_is_refused(specchat_home):
    first, last = stored()
    history = History(paths.history_db())
    assert reopened(history, "", None, False) is None  # a new chat
    assert reopened(history, "", None, True) == last
    assert reopened(history, "", first, False) == first
    with pytest.raises(SpecchatError, match="no stored conversation has id 999"):
        reopened(history, "", 999, False)
    history.delete(first)
    history.delete(last)
    with pytest.raises(SpecchatError, match="no conversation to continue yet"):
        reopened(history, "", None, True)
    with pytest.raises(SpecchatError, match="cannot reopen a conversation: read-only"):
        reopened(None, "read-only", None, True)
    history.close()


def test_the_chat_given_an_unknown_conversation_says_so_before_it_starts(specchat_home):
    for unknown in ("42", "99999999999999999999999"):
        r = CliRunner().invoke(app, ["--conversation", unknown])
        assert r.exit_code != 0 and f"no stored conversation has id {unknown}" in r.output and "Traceback" not in r.output
        assert r.exception is None or isinstance(r.exception, SystemExit)


async def test_the_chat_reopens_the_conversation_once_the_pair_has_loaded(tmp_path):
    history = History(tmp_path / "history.sqlite3")
    conv = history.record("fake-pair", "Tell me about cats", Message("assistant", "Cats sleep all day."))
    history.close()
    app = make_app(tmp_path, reopen=conv)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.chat.session.messages)
        assert [m["content"] for m in app.chat.session.messages] == ["Tell me about cats", "Cats sleep all day."]
        assert app.conversation.record.id == conv  # the next turn goes on in the same stored conversation
        assert "Tell me about cats" in str(app.query_one("UserMessage").render())
        assert len(app.query("AssistantMessage")) == 1
