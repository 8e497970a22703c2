"""The chat app on the fake model, for tests and tools: a fake model store
(`FakeModels`), the app built on it, and helpers that drive it under Pilot
and read the screen as the user sees it (text, colour, strike-through).
"""

from __future__ import annotations

import asyncio
import re

import numpy as np
from rich.style import Style
from textual.geometry import Region

from specchat.config import Settings
from specchat.decoding.sampling import SamplingParams
from specchat.history.database import History
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions, LoadOptions
from specchat.tui.app import SpecchatApp
from specchat.tui.chat.widgets import AssistantMessage, PromptInput, ReplyBody, ReplyChunk
from specchat.tui.state.models import PairInfo
from tests.support.fake_model import EOS, FakeModel

DARK = {"accepted": "#4ec96b", "rejected": "#e0605e", "ngram": "#4ec96b", "model": "#3fb8c4", "fg": "#d8dbe2",
        "panel": "#272b34"}  # fmt: skip


# --- fakes and helpers ---------------------------------------------------------------


def long_model(seed: int = 7, step_seconds: float = 0.0) -> FakeModel:
    """The fake model with EOS made impossible: replies run to max_tokens."""
    m = FakeModel(seed=seed, step_seconds=step_seconds)
    m.table[:, :, EOS] -= 50.0
    return m


def noisy_draft(noise: float = 1.0) -> FakeModel:
    """The target's weights plus noise: some drafts accepted, some rejected."""
    m = long_model()
    m.table += np.random.default_rng(3).normal(0.0, noise, m.table.shape).astype(np.float32)
    return m


class FakeModels:
    """The app's model store and loader, on the fake model."""

    remembers_pair = True
    legend_note = ""

    def __init__(
        self,
        pulled: bool = True,
        step_seconds: float = 0.0,
        max_tokens: int = 60,
        draft=noisy_draft,
        cpu_bound: bool = False,
    ) -> None:
        self.pulled = pulled
        self.step_seconds = step_seconds
        self.cpu_bound = cpu_bound  # as llama.Model says when decoding keeps every core busy
        self.max_tokens = max_tokens
        self.draft = draft
        self.pull_calls = 0
        self.opened: list[ChatSession] = []

    def pairs(self):
        return [
            PairInfo("fake-pair", "a fake pair", self.pulled, True, 2_000_000),
            PairInfo("other-pair", "another fake pair", True, False, 1_000_000),
        ]

    def default_pair(self) -> str:
        return "fake-pair"

    def is_pulled(self, name: str) -> bool:
        return self.pulled or name != "fake-pair"

    def pull(self, name: str) -> None:
        self.pull_calls += 1
        import time

        time.sleep(0.3)
        self.pulled = True

    def pull_progress(self, name: str):
        return (2_000_000 if self.pulled else 500_000), 2_000_000

    def found_pairs(self):
        return []  # no files of the user's own beside the fake store

    def add_found(self, name: str) -> str:
        raise AssertionError("nothing was offered")

    def open(self, pair: str, drafter: str, k: int, settings: Settings) -> ChatSession:
        target = long_model(step_seconds=self.step_seconds)
        target.cpu_bound = self.cpu_bound
        sampling = SamplingParams(temp=settings.temperature, top_p=settings.top_p)  # as the real Models.open
        decode = DecodeOptions(drafter, k, sampling, system=settings.system_prompt or None, max_tokens=self.max_tokens)
        session = ChatSession(target, self.draft, decode, pair=pair)
        self.opened.append(session)
        return session


def make_app(tmp_path, models=None, settings=None, **kw) -> SpecchatApp:
    history = History(tmp_path / "history.sqlite3")
    return SpecchatApp(
        models or FakeModels(),
        settings or Settings(),
        history=history,
        save_settings=kw.pop("save_settings", False),
        **kw,
    )


def user_themes(home, monkeypatch, **files: str) -> None:
    """specchat's home at `home`, with these user theme files (name=TOML) in its config folder."""
    monkeypatch.setenv("SPECCHAT_HOME", str(home))
    folder = home / "config" / "themes"
    folder.mkdir(parents=True)
    for name, toml in files.items():
        (folder / f"{name}.toml").write_text(toml)


async def wait_until(pilot, predicate, timeout: float = 10.0) -> None:
    """Poll the app until predicate() holds (no fixed sleeps)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {predicate}")
        await pilot.pause(0.02)


async def ready(pilot) -> None:
    await wait_until(pilot, lambda: pilot.app.chat.session is not None)


async def send(pilot, text: str) -> AssistantMessage:
    """Type a message, press Enter, wait for the reply to end."""
    app = pilot.app
    replies = app.query(AssistantMessage)
    before = replies.last() if replies else None
    prompt = app.query_one(PromptInput)
    prompt.text = text
    prompt.focus()
    await pilot.press("enter")
    await wait_until(pilot, lambda: app.query(AssistantMessage) and app.query(AssistantMessage).last() is not before)
    await wait_until(pilot, lambda: not app.chat.generating)
    await pilot.pause()
    saved(app)
    return app.query(AssistantMessage).last()


def saved(app) -> None:
    """Wait until the chat's history writes are done (they run on a thread of their own)."""
    writer = app.conversation.writer
    if writer is not None:
        assert writer.flush(10), "the history writes did not finish"


async def enter(pilot, text: str) -> PromptInput:
    """Put `text` in the prompt and press Enter, as the user sends it; the prompt."""
    prompt = pilot.app.query_one(PromptInput)
    prompt.text = text
    await pilot.press("enter")
    return prompt


async def start_reply(pilot, text: str = "hello") -> None:
    """Once the app is ready, send a message and return while it streams."""
    await ready(pilot)
    await enter(pilot, text)


def notices(app) -> list[str]:
    """The messages of every notification the app has shown."""
    return [n.message for n in app._notifications]


def segments(widget) -> list[tuple[str, Style]]:
    """The widget's rendered text as (text, style) runs, as the terminal gets
    them. A reply body is a column of chunks: their runs, in order."""
    if isinstance(widget, ReplyBody):
        return [run for chunk in widget.query(ReplyChunk) for run in segments(chunk)]
    w, h = widget.size
    out = []
    for strip in widget.render_lines(Region(0, 0, w, h)):
        for seg in strip:
            if seg.text.strip():
                out.append((seg.text, seg.style))
    return out


def hexcolor(style: Style) -> str | None:
    return None if style.color is None else style.color.triplet.hex


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def rendered_by_colour(widget) -> dict[tuple[str | None, bool], str]:
    """Rendered text (whitespace removed) per (colour, strike)."""
    out: dict[tuple[str | None, bool], str] = {}
    for text, style in segments(widget):
        key = (hexcolor(style), bool(style.strike))
        out[key] = out.get(key, "") + squash(text)
    return out


def spans_text(reply: AssistantMessage, kind: str, drafter: str | None = None) -> str:
    """The spans' text as the screen shows it (a rejected line end as ⏎), whitespace removed."""
    from specchat.display import shown_text

    return squash(
        "".join(shown_text(s) for s in reply.spans if s["kind"] == kind and (drafter is None or s["drafter"] == drafter))
    )


# --- replies and their colours ----------------------------------------------------------


class TinyPair:
    """The app's models for the real tiny pair: its files through the real loader."""

    remembers_pair = True
    legend_note = ""

    def __init__(self, target, draft=None, max_tokens: int = 48) -> None:
        self.target, self.draft, self.max_tokens = target, draft, max_tokens

    def pairs(self):
        return [PairInfo("smollm2-135m", "tiny", True, True)]

    def default_pair(self) -> str:
        return "smollm2-135m"

    def is_pulled(self, name: str) -> bool:
        return True

    def pull(self, name: str) -> None:
        """Nothing to pull: the files are the test store's."""

    def pull_progress(self, name: str):
        return 0, None

    found_pairs = FakeModels.found_pairs
    add_found = FakeModels.add_found

    def open(self, pair, drafter, k, settings):
        from specchat.session.loader import open_session

        return open_session(
            LoadOptions(target=str(self.target), draft=self.draft and str(self.draft), ctx=2048),
            DecodeOptions(drafter=drafter, k=k, max_tokens=self.max_tokens),
        )
