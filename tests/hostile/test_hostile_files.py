"""Files specchat reads back: a stored history row and a user theme are data
that may be damaged or hostile. A row that is not what specchat writes is
marked in its place and the rest of the conversation shown; a theme with a
bad key is refused by file with one line and the app starts on the default.

Real parts: rows written with sqlite3 into the real history database, real
theme files in the config folder, the real app under Pilot.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from specchat.config import Settings
from specchat.history.database import History, Message, to_markdown
from specchat.themes import load_user_themes
from specchat.tui.chat.widgets import AssistantMessage, ReplyBody, UserMessage
from tests.support.tui import make_app, ready, segments, send, wait_until

MARK = "this message could not be read: "
GOOD_SPANS = [{"text": "fine reply", "kind": "target", "drafter": "target"}]
GOOD_STATS = {"drafters": ["ngram"], "alpha": 2.5, "drafted": 4, "accepted": 3, "acceptance_rate": 0.75,
              "tok_s": 40.0, "baseline_tok_s": 20.0, "speedup": 2.0}
REPLY = {"role": "assistant", "content": "bad reply", "finish": "eos", "stats_json": None,
         "spans_json": '[{"text": "bad reply", "kind": "target", "drafter": "target"}]'}



def _decoded(row: dict) -> dict:
    """A case's columns as sqlite3 gets them: {"bytes": HEX} is a blob, {"repeat": S, "times": N} is S * N."""
    def value(v):
        if isinstance(v, dict):
            return bytes.fromhex(v["bytes"]) if "bytes" in v else v["repeat"] * v["times"]
        return v
    return {column: value(v) for column, v in row.items()}


# Each case: what the stored row holds instead of what specchat writes, and the marker's reason.
ROWS_FILE = Path(__file__).parents[1] / "data" / "hostile_rows.json"
BAD_ROWS = {name: (_decoded(case["row"]), case["reason"]) for name, case in json.loads(ROWS_FILE.read_text()).items()}


def _store(path, bad: dict) -> int:
    """A conversation of three exchanges, its middle reply written with sqlite3 as `bad` says."""
    history = History(path)
    conv = history.new_conversation("hostile rows", "fake-pair")
    history.add_message(conv, Message("user", "first question"))
    history.add_message(conv, Message("assistant", "fine reply", "eos", GOOD_STATS, GOOD_SPANS))
    history.add_message(conv, Message("user", "second question"))
    history.close()
    row = {**REPLY, **bad}
    db = sqlite3.connect(path)
    with db:
        db.execute("INSERT INTO messages (conversation_id, seq, role, content, created, finish, stats_json, spans_json) "
                   "VALUES (?, 3, ?, ?, 0, ?, ?, ?)",
                   (conv, row["role"], row["content"], row["finish"], row["stats_json"], row["spans_json"]))
        db.execute("INSERT INTO messages (conversation_id, seq, role, content, created, finish, stats_json, spans_json) "
                   "VALUES (?, 4, 'user', 'third question', 0, NULL, NULL, NULL)", (conv,))
        db.execute("UPDATE conversations SET updated = 4e9 WHERE id = ?", (conv,))  # the newest: first in F3
    db.close()
    return conv


def _shown(app) -> list[str]:
    """Each message in the chat as the user reads it: one line of text per message."""
    out = []
    for widget in app.query_one("#chat").children:
        body = widget.query_one(ReplyBody) if isinstance(widget, AssistantMessage) else widget
        out.append("".join(text for text, _ in segments(body)).strip("█▌▐▎▕▏ "))
    return out


async def _open_with_f3(pilot) -> None:
    await ready(pilot)
    await pilot.press("f3")
    await wait_until(pilot, lambda: pilot.app.screen.__class__.__name__ == "HistoryScreen")
    await pilot.press("enter")
    await wait_until(pilot, lambda: pilot.app.query(UserMessage))
    await pilot.pause()


@pytest.mark.parametrize("case", list(BAD_ROWS))
async def test_a_damaged_row_is_marked_and_the_rest_shown(tmp_path, case):
    bad, reason = BAD_ROWS[case]
    _store(tmp_path / "history.sqlite3", bad)
    app = make_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await _open_with_f3(pilot)
        assert _shown(app) == ["first question", "fine reply", "second question", MARK + reason, "third question"]
        assert app.is_running and app.return_code is None
        # the prompt holds what could be read, user and assistant alternating (a question whose
        # reply is unreadable, and the last one, never answered, are left out); the stats panel the readable reply
        assert [m["content"] for m in app.chat.session.messages] == ["first question", "fine reply"]
        assert app.conversation.turns == [GOOD_STATS]
        await pilot.press("f2")  # the stats panel reads every turn's stats
        await pilot.pause()
        assert "totals: 4 drafted · 3 accepted (75%)" in "".join(t for t, _ in segments(app.query_one("#panel-numbers")))
        reply = await send(pilot, "and now?")  # the chat goes on
        assert reply.stats is not None and app.is_running


def test_a_damaged_row_is_marked_in_the_export_too(tmp_path):
    conv = _store(tmp_path / "history.sqlite3", BAD_ROWS["span text a number"][0])
    text = to_markdown(History(tmp_path / "history.sqlite3").load(conv))
    assert "## Unreadable message\n\nthis message could not be read: spans_json[0].text is 5, not text\n" in text
    assert "fine reply" in text and "third question" in text


async def test_stray_bytes_and_odd_times_in_a_conversation_row_are_shown_plainly(tmp_path):
    path = tmp_path / "history.sqlite3"
    _store(path, {"content": "caf\u00e9", "spans_json": None})
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE messages SET content = CAST(X'6361668e' AS TEXT) WHERE seq = 0")  # not UTF-8
        db.execute("INSERT INTO conversations (title, pair, created, updated) VALUES (?, 'p', 0, 'soon')", (b"\xff",))
        db.execute("INSERT INTO conversations (title, pair, created, updated) VALUES ('far future', 'p', 0, 1e300)")
    db.close()
    app = make_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "HistoryScreen")
        ol = app.screen.query_one("#conversations")
        rows = [ol.get_option_at_index(i).prompt.plain for i in range(ol.option_count)]
        assert sorted(rows) == ["(unreadable title)  ·  0 messages · p · " + _epoch(),
                                "far future  ·  0 messages · p · " + _epoch(),
                                "hostile rows  ·  5 messages · fake-pair · " + _epoch(4e9)]
        ol.highlighted = rows.index("hostile rows  ·  5 messages · fake-pair · " + _epoch(4e9))
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.query(UserMessage))
        await pilot.pause()
        assert _shown(app)[:4] == ["caf\ufffd", "fine reply", "second question", "café"]
        assert app.is_running


def _epoch(seconds: float = 0) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))


# --- themes ------------------------------------------------------------------------------

# (the theme file, the line that refuses it, after "theme PATH: ")
BAD_THEMES = {
    "css in a variable": ('primary = "#0088cc"\n[variables]\nprimary-background = "red; } Screen { display: none"\n',
                          "variables.primary-background = 'red; } Screen { display: none' is not a colour (try \"#268bd2\")"),
    "a variable naming another": ('primary = "#0088cc"\n[variables]\nborder = "$other"\n',
                                  "variables.border = '$other' is not a colour (try \"#268bd2\")"),
    "a url": ('primary = "#0088cc"\n[variables]\nsurface-darken-1 = "url(https://example.com/x.png)"\n',
              "variables.surface-darken-1 = 'url(https://example.com/x.png)' is not a colour (try \"#268bd2\")"),
    "a number for a colour": ('primary = "#0088cc"\n[variables]\nfooter-background = 5\n',
                              "variables.footer-background = 5 is not a colour (try \"#268bd2\")"),
    "a colour for a text style": ('primary = "#0088cc"\n[variables]\nlink-style = "#ff0000"\n',
                                  "variables.link-style = '#ff0000' is not a text style (try \"bold underline\")"),
    "a table for a variable": ('primary = "#0088cc"\n[variables.spec-good]\nx = 1\n',
                               "variables.spec-good = {'x': 1} is not a colour (try \"#268bd2\")"),
    "an unknown variable": ('primary = "#0088cc"\n[variables]\n"x; } Screen {" = "red"\n',
                            "unknown variable 'x; } Screen {'"),
    "a markup name": ('name = "[bold red]x[/]"\nprimary = "#0088cc"\n',
                      "name = '[bold red]x[/]' is not a theme name (letters, digits, spaces and - _ . +)"),
    "a closing tag for a name": ('name = "[/x]"\nprimary = "#0088cc"\n',
                                 "name = '[/x]' is not a theme name (letters, digits, spaces and - _ . +)"),
    "a name with a control character": ('name = "x\\u001b[2J"\nprimary = "#0088cc"\n',
                                        "name = 'x\\x1b[2J' is not a theme name (letters, digits, spaces and - _ . +)"),
    "a list for a variable": ('primary = "#0088cc"\n[variables]\ntext = ["#ffffff"]\n',
                              "variables.text = ['#ffffff'] is not a colour (try \"#268bd2\")"),
    "a NaN spread": ('primary = "#0088cc"\nluminosity_spread = nan\n',
                     "luminosity_spread = nan is not a number from 0 to 1"),
    "an infinite alpha": ('primary = "#0088cc"\ntext_alpha = inf\n', "text_alpha = inf is not a number from 0 to 1"),
    "a huge spread": ('primary = "#0088cc"\nluminosity_spread = 1e300\n',
                      "luminosity_spread = 1e+300 is not a number from 0 to 1"),
    "a huge whole number": ('primary = "#0088cc"\ntext_alpha = 99999999999999999999999\n',
                            "text_alpha = 99999999999999999999999 is not a number from 0 to 1"),
}


def _theme_file(specchat_home, name: str, text: str):
    folder = specchat_home / "config" / "themes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", list(BAD_THEMES))
async def test_a_bad_theme_is_refused_by_name_and_the_app_starts_on_the_default(specchat_home, tmp_path, case):
    text, why = BAD_THEMES[case]
    path = _theme_file(specchat_home, "mine.toml", text)
    app = make_app(tmp_path, settings=Settings(theme="mine"))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.theme == "specchat-dark" and app.is_running
        messages = [n.message for n in app._notifications]
        assert f"theme {path}: {why}; not loaded" in messages
        assert "unknown theme 'mine'; using specchat-dark" in messages
        await send(pilot, "hello")
        assert app.is_running


def test_a_file_name_that_is_markup_or_an_escape_is_not_a_theme_name(specchat_home):
    markup = _theme_file(specchat_home, "[b]x[i].toml", 'primary = "#0088cc"\n')
    _theme_file(specchat_home, "\x1b[2J.toml", 'primary = "#0088cc"\n')
    _theme_file(specchat_home, "my theme (v2).toml", 'name = "my theme v2"\nprimary = "#0088cc"\n')
    themes, errors = load_user_themes(markup.parent)
    assert [t.name for t in themes] == ["my theme v2"]  # a name in the file stands for its file's
    hint = 'is not a theme name: add name = "…" to the file; not loaded'
    assert errors == [f"theme {markup.parent}/␛[2J.toml: the file name '\\x1b[2J' {hint}",
                      f"theme {markup}: the file name '[b]x[i]' {hint}"]


async def test_the_change_theme_list_opens_with_user_themes(specchat_home, tmp_path):
    _theme_file(specchat_home, "bad.toml", 'name = "[/x]"\nprimary = "#0088cc"\n')
    _theme_file(specchat_home, "ocean.toml", 'name = "Deep ocean 2"\nprimary = "#0088cc"\n'
                '[variables]\nspec-accepted = "#00aaff"\nlink-style = "bold not underline"\ntext-muted = "auto 50%"\n')
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.action_change_theme()
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "CommandPalette")
        await pilot.pause(0.5)
        options = app.screen.query_one("CommandList")
        names = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert any("Deep ocean 2" in n for n in names) and not any("[/x]" in n for n in names)
        assert app.is_running
        app.theme = "Deep ocean 2"
        await pilot.pause()
        assert app.theme_variables["spec-accepted"] == "#00aaff"
        assert app.theme_variables["link-style"] == "bold not underline"
