"""The interfaces specchat's parts are written against, checked on what
implements them: every member a Protocol names is there, on the real class
and on the tests' fakes alike, so no caller has to probe for one."""

from __future__ import annotations

import pytest

from specchat.config import Settings
from specchat.engine.loop import TargetModel
from specchat.tui.state.models import Models, ModelSource, ServerModels, Session
from tests.support.fake_model import FakeModel
from tests.support.fakeserver import Hostile, good_docs
from tests.support.tui import FakeModels, TinyPair


@pytest.fixture
def server():
    server = Hostile(good_docs())
    yield server.url
    server.shutdown()
    server.server_close()


def test_the_fake_model_has_the_shape_the_engine_and_the_session_use():
    model = FakeModel()
    assert isinstance(model, TargetModel)
    # What llama.Model reports of where it runs; a fake runs nowhere and times nothing.
    assert (model.device, model.n_threads, model.cpu_bound, model.llama_seconds) == (None, None, False, None)
    model.close()


@pytest.mark.real
def test_the_driver_has_the_shape_the_engine_and_the_session_use(tiny_pair):
    from specchat.llamacpp.llama import Model

    model = Model(tiny_pair[0], n_ctx=256, n_threads=1, n_gpu_layers=0)
    try:
        assert isinstance(model, TargetModel)
        assert model.n_threads == 1 and model.device["gpu_layers"] == 0 and model.llama_seconds > 0  # warmed up
        prompt = model.apply_template([{"role": "user", "content": "hi"}])
        assert prompt == model.apply_template([{"role": "user", "content": "hi"}])  # the template compiled once
        assert "hi" in prompt and model.tokenize(prompt)
    finally:
        model.close()


def test_a_local_and_a_servers_session_are_what_the_chat_drives(server):
    from specchat.server.session import ServerSession

    local = FakeModels(cpu_bound=True).open("fake-pair", "auto", 16, Settings())
    remote = ServerSession(server)
    try:
        assert isinstance(local, Session) and isinstance(remote, Session)
        assert (local.cpu_bound, local.draft_model_loaded) == (True, False)  # the target's word; not loaded yet
        assert (remote.cpu_bound, remote.draft_model_loaded) == (False, False)  # the server decodes
        idle = []
        turn = remote.reply("hi", on_idle=lambda: idle.append(1))  # a server that answers at once leaves no idle
        assert (turn.text, idle) == ("Hello world", [])
    finally:
        local.close()
        remote.close()


def test_every_model_source_of_the_chat_says_whether_it_is_remembered(server):
    sources = {"store": Models(), "server": ServerModels(server), "fake": FakeModels(), "tiny": TinyPair("t.gguf")}
    assert all(isinstance(s, ModelSource) for s in sources.values())
    assert {name: s.remembers_pair for name, s in sources.items()} == {
        "store": True, "server": False, "fake": True, "tiny": True}
    assert sources["store"].legend_note == "" and "draft_n_accepted" in sources["server"].legend_note
