"""The chat's slash commands, as the first word of a message: "/schema
FILE rest" (decoding/schema.py reads FILE), "/file PATH rest" (attach.py), and "/system TEXT",
"/temp X", "/top-p X" (tui/parts/knobs.py)."""

from __future__ import annotations

from specchat.errors import SpecchatError


def command(message: str) -> tuple[str, str]:
    """A message's first word and the rest ("/temp", "0.7")."""
    head, _, rest = message.strip().partition(" ")
    return head, rest.strip()


def prefixed(message: str, prefix: str, needs: str, hint: str) -> tuple[str | None, str]:
    """Split a chat message "PREFIX ARG rest" (/schema FILE …, /file PATH …)
    into (ARG, rest); a message without the prefix gives (None, message).
    A prefix with no ARG is a SpecchatError: "PREFIX needs NEEDS"."""
    head, rest = command(message)
    if head != prefix:
        return None, message
    arg, _, rest = rest.strip().partition(" ")
    if not arg:
        raise SpecchatError(f"{prefix} needs {needs}", hint=hint, code=2)
    return arg, rest.strip()


SCHEMA_PREFIX = "/schema"


def schema_prefix(message: str) -> tuple[str | None, str]:
    """Split a chat message "/schema FILE rest" into (FILE, rest); FILE "off"
    frees the replies again. A message without the prefix gives (None, message)."""
    return prefixed(message, SCHEMA_PREFIX, "a file", "/schema person.json Extract …, or /schema off")
