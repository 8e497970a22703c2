"""The chat's settings in the chat: the system prompt, temperature and top-p.

Typed as the message (`/system TEXT`, `/temp 0.7`, `/top-p 0.9`) or picked
from the command palette (System prompt…, Temperature…, Top-p…). They take
effect from the next reply. The system prompt is this conversation's,
stored with it in the history (a conversation reopened from F3 comes back
with its own), and the next new chat's too; temperature and top-p are the
chat's. Each is kept in settings.toml for the next start.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from specchat import checks
from specchat.errors import SpecchatError
from specchat.message.slash import command
from specchat.tui.parts.screens import TextPrompt

if TYPE_CHECKING:
    from specchat.tui.parts.view import ChatView

COMMANDS = ("/system", "/temp", "/top-p")


def knob_command(text: str) -> tuple[str, str] | None:
    """("/temp", "0.7") for a message that is one of COMMANDS; None for any other."""
    head, rest = command(text)
    return (head, rest) if head in COMMANDS else None


def number(command: str, value: str) -> float:
    """The number a /temp or /top-p command gives, checked as --temp and --top-p are."""
    try:
        x = float(value)
    except ValueError:
        example = "/temp 0.7" if command == "/temp" else "/top-p 0.9"
        raise SpecchatError(f"{command} needs a number, not {value!r}", hint=f"for example {example}", code=2) from None
    if not math.isfinite(x):
        raise SpecchatError(f"{command} needs a finite number, not {value!r}", hint="0 is greedy", code=2)
    return checks.temperature(x, flag=command) if command == "/temp" else checks.top_p(x, flag=command)


class Knobs:
    """The chat's settings commands (/system, /temp, /top-p and their
    prompts from the palette), acting on its screen."""

    def __init__(self, view: ChatView) -> None:
        self.view = view

    def run(self, command: str, value: str) -> None:
        """Apply one settings command; a bad value is one line, and nothing changes."""
        view = self.view
        session = view.chat.session
        try:
            if command == "/system":
                view.chat.conversation.set_system(value or None)
                view.keep({"system_prompt": value})
                said = f"system prompt: {value}" if value else "no system prompt"
            elif session is None:
                raise SpecchatError("no model loaded yet", hint="wait for the pair to load")
            else:
                sampling, x = session.sampling, number(command, value)
                temp, top_p = (x, sampling.top_p) if command == "/temp" else (sampling.temp, x)
                session.set_sampling(temp, top_p)
                view.keep({"temperature": temp, "top_p": top_p})
                said = f"temperature {temp:g}" + ("" if temp else " (greedy)") + f" · top-p {top_p:g}"
        except SpecchatError as err:
            view.notify(err.one_line(), severity="error", timeout=8)
            return
        view.notify(f"{said}, from the next reply", timeout=4)
        view.set_status()

    def ask(self, command: str) -> None:
        """Ask for a new value of /system, /temp or /top-p, showing the current one."""
        session = self.view.chat.session
        if command == "/system":
            title, value = "System prompt for this conversation (empty: none)", self.view.chat.conversation.system or ""
        elif command == "/temp":
            title, value = "Temperature (0 is greedy)", f"{session.sampling.temp:g}" if session else ""
        else:
            title, value = "Top-p (1 is off)", f"{session.sampling.top_p:g}" if session else ""

        def done(text: str | None) -> None:
            if text is not None:  # Esc changes nothing; an empty system prompt clears it
                self.run(command, text)

        self.view.app.push_screen(TextPrompt(title, value, empty_ok=command == "/system"), done)
