"""Where a server runs its target, as the stats panel says it: the devices a
llama.cpp server reports in /props or /slots, its RPC workers by their
endpoints, and otherwise "the server does not report its devices".

A real loopback HTTP server, written here (tests/support/fakeserver.py's),
answers like llama-server; llama-server as vendored in llama-cpp-python
reports no devices, so the lists here are the server's answer as a test
writes it. What a server names is data: shown escaped."""

from __future__ import annotations

import copy

import pytest

from specchat.errors import SpecchatError
from tests.support.fakeserver import good_docs, serve  # noqa: F401 - serve is a fixture

RPC_DEVICES = [
    {"name": "RPC0", "description": "10.0.0.2:50052"},
    {"name": "RPC1", "description": "10.0.0.3:50052"},
    {"name": "CPU", "description": "AMD EPYC 7B13"},
]


def docs_with(answer: str, devices) -> dict:
    docs = copy.deepcopy(good_docs())
    if answer == "/props":
        docs["/props"]["devices"] = devices
    else:
        docs["/slots"][0]["devices"] = devices
    return docs


def panel_of(url: str) -> str:
    from specchat.server.session import ServerSession
    from specchat.tui.chat.panels import panel_text

    session = ServerSession(url)
    try:
        return panel_text([], session.devices).plain
    finally:
        session.close()


def test_a_server_that_reports_no_devices_says_so(serve):  # noqa: F811
    text = panel_of(serve(good_docs()))
    assert text.splitlines()[0] == "target: the server does not report its devices"
    assert "draft:" not in text and "not loaded" not in text  # the server's draft is its own


def test_the_rpc_workers_a_server_lists_in_props_are_named_by_endpoint(serve):  # noqa: F811
    text = panel_of(serve(docs_with("/props", RPC_DEVICES)))
    assert text.splitlines()[0] == (
        "target: RPC worker 10.0.0.2:50052 · RPC worker 10.0.0.3:50052 · CPU (AMD EPYC 7B13)"
    )


def test_devices_listed_by_a_slot_are_read_when_props_lists_none(serve):  # noqa: F811
    text = panel_of(serve(docs_with("/slots", RPC_DEVICES[:1])))
    assert text.splitlines()[0] == "target: RPC worker 10.0.0.2:50052"


def test_run_json_carries_the_devices_the_server_reports(serve):  # noqa: F811
    from specchat.server.session import ServerSession

    session = ServerSession(serve(docs_with("/props", RPC_DEVICES[:2])))
    try:
        assert session.info.to_dict()["devices"] == RPC_DEVICES[:2]
    finally:
        session.close()


def test_a_device_name_with_markup_and_escapes_is_shown_as_text(serve):  # noqa: F811
    hostile = [{"name": "RPC0", "description": "[bold red]10.0.0.2[/]\x1b[31m:1\x07"}]
    text = panel_of(serve(docs_with("/props", hostile)))
    line = text.splitlines()[0]
    assert "\x1b" not in line and "\x07" not in line
    assert line.startswith("target: RPC worker [bold red]10.0.0.2[/]")  # markup shown as the characters it is


@pytest.mark.parametrize(
    ("devices", "what"),
    [
        ("RPC0", "devices is \"RPC0\", not a list"),
        (["RPC0"], "devices[0] is \"RPC0\", not an object"),
        ([{"name": 5}], "devices[0].name is 5, not a string"),
    ],
)
def test_a_devices_field_of_the_wrong_type_is_one_error_line(serve, devices, what):  # noqa: F811
    from specchat.server.session import ServerSession

    url = serve(docs_with("/props", devices))
    with pytest.raises(SpecchatError) as err:
        ServerSession(url)
    assert str(err.value) == f"the server at {url} sent a bad /props: {what}"


@pytest.mark.usefixtures("specchat_home")
async def test_f2_in_the_chat_shows_the_servers_rpc_workers(tmp_path, serve):  # noqa: F811
    from specchat.config import Settings
    from specchat.tui.state.models import chat_models
    from tests.support.tui import make_app, ready, segments, wait_until

    url = serve(docs_with("/props", RPC_DEVICES[:2]))
    models = chat_models(url, pair=None, drafter=None, baseline=False, baseline_server=None)
    app = make_app(tmp_path, models=models, settings=Settings())
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.chat.session is not None, timeout=5)
        await pilot.press("f2")
        await pilot.pause()
        shown = "".join(t for t, _ in segments(app.query_one("#panel-numbers")))
        words = "".join(shown.split())  # the narrow panel wraps the line
        assert "target:RPCworker10.0.0.2:50052·RPCworker10.0.0.3:50052" in words
        assert "draft:" not in shown
        app.chat.session.close()
