"""User-facing errors: one clear line and a hint, never a traceback."""

from __future__ import annotations


class SpecchatError(Exception):
    """A mistake or condition the user can act on. The CLI prints it as
    `error: MESSAGE` and `hint: HINT` and exits with `code`."""

    def __init__(self, message: str, hint: str = "", code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code

    def __str__(self) -> str:
        return self.message

    def one_line(self) -> str:
        """ "MESSAGE (HINT)": the error and its hint for a notice or a status line."""
        return self.message + (f" ({self.hint})" if self.hint else "")
