"""Snapshots of the chat (pytest-textual-snapshot). The replies come from a
stored conversation with fixed spans and numbers, so the pictures are stable.
Update them with `pytest tests/test_tui_snapshots.py --snapshot-update`."""

from __future__ import annotations

import pytest

from specchat import display
from specchat.config import Settings
from specchat.decoding.stats import Round
from specchat.history.database import History, Message
from specchat.tui.chat.widgets import PromptInput
from tests.support.tui import FakeModels, make_app, wait_until

SIZE = (110, 30)


def reply_spans(*rounds: tuple[str, str, str, str]) -> list[dict]:
    """A stored reply's spans, made as the app makes them, from its rounds:
    (drafter, accepted text, rejected text, the target's own text)."""
    return display.spans([Round([], [], None, drafter, plain=not (accepted or rejected), accepted_text=accepted, rejected_text=rejected,
                                target_text=target) for drafter, accepted, rejected, target in rounds])


SPANS = reply_spans(
    ("off", "", "", "Here is the function with the rename applied:\n\n```python\ndef "),
    ("ngram", "total_price(items", ", tax", "):\n"),
    ("ngram", "    return sum(item.price for item in items", "", ")\n```\n\nThe "),
    ("draft", "body is", " loop was", " unchanged"),
    ("draft", "; only the name", " moved", " changed."),
)


def stats(alpha, speedup, per_position, drafters=("ngram", "draft")) -> dict:
    return {"tokens": 52, "verify_rounds": 14, "alpha": alpha, "drafted": 40, "accepted": 31,
            "acceptance_rate": 0.775, "per_position_acceptance": per_position, "tok_s": 38.4,
            "spec_tok_s": 40.1, "baseline_tok_s": 27.9, "speedup": speedup, "t_draft": 0.21, "t_verify": 0.98,
            "t_plain": 0.12, "t_other": 0.05, "drafters": list(drafters)}


def seeded_app(tmp_path, theme: str = "specchat-dark", rejected_shown: bool = False):
    """The stored conversation reopened; its ended replies show their rejected
    drafts only where asked (ctrl+t, without the toast it brings)."""
    history = History(tmp_path / "history.sqlite3")
    cid = history.new_conversation("rename", "fake-pair")
    history.add_message(cid, Message("user", "Rename compute to total_price."))
    history.add_message(cid, Message("assistant", "", "eos", stats(3.71, 1.38, [0.95, 0.9, 0.8, 0.6]), SPANS))
    history.add_message(cid, Message("user", "Thanks. And a docstring?"))
    history.add_message(cid, Message("assistant", "", "cancelled",
                                     stats(1.42, 0.74, [0.5, 0.25], ("draft",)),
                                     reply_spans(("draft", " Sure:", " no", " add"))))
    history.close()
    app = make_app(tmp_path, models=FakeModels(), settings=Settings(theme=theme))

    async def run_before(pilot):
        await wait_until(pilot, lambda: app.chat.session is not None)
        await wait_until(pilot, lambda: app.chat.session.curve_due() is None)  # auto's curve measured: no note
        app.query_one(PromptInput).cursor_blink = False
        app.chat_screen.show_rejected = rejected_shown
        app.chat_screen.load_conversation(cid)
        await pilot.pause()

    return app, run_before


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))


def test_reply_with_rejected_drafts(snap_compare, tmp_path):
    app, run_before = seeded_app(tmp_path, rejected_shown=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_stats_panel(snap_compare, tmp_path):
    app, load = seeded_app(tmp_path)

    async def run_before(pilot):
        await load(pilot)
        await pilot.press("f2")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_colorblind_theme(snap_compare, tmp_path):
    app, run_before = seeded_app(tmp_path, theme="specchat-colorblind", rejected_shown=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
