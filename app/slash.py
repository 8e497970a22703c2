"""The chat's slash commands, as the first word of a message: "/schema
FILE rest" (schema.py) and "/file PATH rest" (attach.py)."""

from __future__ import annotations

from specchat.errors import SpecchatError


def prefixed(message: str, prefix: str, needs: str, hint: str) -> tuple[str | None, str]:
    """Split a chat message "PREFIX ARG rest" (/schema FILE …, /file PATH …)
    into (ARG, rest); a message without the prefix gives (None, message).
    A prefix with no ARG is a SpecchatError: "PREFIX needs NEEDS"."""
    head, _, rest = message.lstrip().partition(" ")
    if head != prefix:
        return None, message
    arg, _, rest = rest.strip().partition(" ")
    if not arg:
        raise SpecchatError(f"{prefix} needs {needs}", hint=hint, code=2)
    return arg, rest.strip()
