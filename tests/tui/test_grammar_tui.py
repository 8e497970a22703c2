"""Constrained replies in the chat: /schema, the palette's "Reply as JSON
matching…", the status bar's mark and the grammar's colour, on the real app
(Pilot) and, where a reply is decoded, the real tiny pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.config import Settings
from specchat.themes import DARK as DARK_THEME
from specchat.tui.chat.panels import StatusBar
from specchat.tui.chat.widgets import AssistantMessage, ReplyBody
from tests.support.tui import TinyPair, enter, make_app, notices, ready, rendered_by_colour, spans_text, wait_until

SCHEMA = Path(__file__).parents[1] / "data" / "person.schema.json"
GRAMMAR_COLOUR = DARK_THEME.variables["spec-grammar"]
pytestmark = pytest.mark.usefixtures("specchat_home")  # settings and history under tmp_path


def status(app) -> str:
    return str(app.query_one(StatusBar).render())


@pytest.mark.real
async def test_schema_prefix_constrains_the_reply_marks_it_and_colours_the_forced_tokens(tmp_path, tiny_pair):
    app = make_app(tmp_path, models=TinyPair(tiny_pair[0], max_tokens=160), settings=Settings(), drafter="grammar", k=16)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=120)
        assert "⟨" not in status(app)
        await enter(pilot, f"/schema {SCHEMA} Extract the person as JSON: Maria Lopez, 34, engineer in Porto, Portugal.")
        await wait_until(pilot, lambda: "replies must match JSON · person.schema.json" in notices(app), timeout=30)
        assert "· k 16 · ⟨JSON · person.schema.json⟩ ·" in status(app)
        await wait_until(pilot, lambda: app.query(AssistantMessage) and not app.chat.generating, timeout=300)
        await pilot.pause()
        # The user's message went without its prefix; the reply is JSON of the schema.
        assert app.chat.session.messages[0]["content"] == "Extract the person as JSON: Maria Lopez, 34, engineer in Porto, Portugal."
        reply = app.query_one(AssistantMessage)
        value = json.loads(reply.text)
        assert set(value) == {"name", "age", "role", "skills", "address"}
        # Keys and punctuation were forced: drafted by the grammar, drawn in its colour.
        forced = spans_text(reply, "accepted", "grammar")
        assert '"name":"' in forced and '"country":"' in forced
        assert rendered_by_colour(reply.query_one(ReplyBody))[(GRAMMAR_COLOUR, False)] == forced
        # /schema off frees the replies again and the mark goes.
        await enter(pilot, "/schema off")
        await wait_until(pilot, lambda: "replies are free text again" in notices(app))
        assert "⟨" not in status(app) and not app.chat.generating
        app.chat.session.close()


@pytest.mark.real
async def test_palette_reply_as_json_matching_sets_the_schema(tmp_path, tiny_pair):
    app = make_app(tmp_path, models=TinyPair(tiny_pair[0], max_tokens=160), settings=Settings(), drafter="off", k=4)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=120)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Reply as JSON")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press(*str(SCHEMA))
        await pilot.press("enter")
        await wait_until(pilot, lambda: "⟨JSON · person.schema.json⟩" in status(app))
        assert app.chat.session.status().constraint == "JSON · person.schema.json"
        app.chat.session.close()


async def test_a_missing_schema_file_is_one_notice_and_the_message_stays(tmp_path):
    app = make_app(tmp_path, drafter="off")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        prompt = await enter(pilot, "/schema /nonexistent/person.json Extract this")
        missing = "no JSON schema file at /nonexistent/person.json (check the path of the JSON schema file)"
        await wait_until(pilot, lambda: missing in notices(app))
        assert not app.chat.binding
        assert prompt.text == "/schema /nonexistent/person.json Extract this"  # kept, to fix the path
        assert not app.query(AssistantMessage) and "⟨" not in status(app)


async def test_switching_to_the_grammar_drafter_without_a_constraint_says_so(tmp_path):
    app = make_app(tmp_path, drafter="hybrid")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert app.chat.drafter == "grammar"
        assert ("drafter: grammar; it drafts only while replies are constrained (F8 or /schema FILE): "
                "plain steps until then") in notices(app)


@pytest.mark.real
async def test_a_schema_holds_across_a_pair_switch(tmp_path, tiny_pair):
    app = make_app(tmp_path, models=TinyPair(tiny_pair[0], max_tokens=160), settings=Settings(), drafter="grammar", k=16)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=120)
        app.schema.bind(str(SCHEMA))
        await wait_until(pilot, lambda: not app.chat.binding and app.chat.session.status().constraint == "JSON · person.schema.json",
                         timeout=30)
        first = app.chat.session
        app.load_session("smollm2-135m", "grammar", 16)  # what F4's picker does
        await wait_until(pilot, lambda: app.chat.session is not first, timeout=120)
        await pilot.pause()
        assert app.chat.session.status().constraint == "JSON · person.schema.json"  # bound to the new model
        assert "⟨JSON · person.schema.json⟩" in status(app)
        app.chat.session.close()
