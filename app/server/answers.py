"""A server's answers are untrusted input: every one is read through
`Fields`, typed readers that turn a missing field, a wrong type, a number
out of range or a body that is not JSON into one SpecchatError naming the
server, the answer and the field. JSON null reads as a missing field."""

from __future__ import annotations

import json
import math

from specchat.errors import SpecchatError
from specchat.textsafe import safe_text

MAX_COUNT = 2**31 - 1  # llama.cpp's counters are 32-bit
MAX_NUMBER = 1e12  # a rate or a time in ms beyond this is not a measurement
TEXT_LIMIT = 200  # characters kept of a name the server gives (its model, its build)
BAD_ANSWER_HINT = "is --server a llama.cpp server (llama-server)? its answers cannot be trusted; see its log"


def bad_answer(server: str, answer: str, what: str) -> SpecchatError:
    """One line about an answer specchat cannot take: the server, which answer, what was wrong."""
    return SpecchatError(f"the server at {server} sent a bad {answer}: {what}", hint=BAD_ANSWER_HINT)


def inconsistent(server: str, what: str) -> SpecchatError:
    """Counters that parse but cannot be true: refused, never shown."""
    return SpecchatError(
        f"the server's counters are inconsistent: {what} (the server at {server})",
        hint="no figures are shown from counters that contradict each other; see the server's log",
    )


def _shown(value: object) -> str:
    """A JSON value in a few words, for an error line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 24 else f"a {len(text)}-digit number"
    if isinstance(value, str):
        return json.dumps(safe_text(value[:40]) + ("…" if len(value) > 40 else ""), ensure_ascii=False)
    return "a list" if isinstance(value, list) else "an object"


def parse_json(data: bytes | str, server: str, answer: str) -> object:
    """A JSON document, with every number finite (Python's json takes NaN,
    Infinity and 1e309, which no measurement is)."""

    def finite(text: str) -> float:
        number = float(text)
        if not math.isfinite(number):
            raise ValueError(f"the number {text[:24]} is out of range")
        return number

    def refuse(name: str) -> float:
        raise ValueError(f"{name} is not a number")

    try:
        return json.loads(data, parse_float=finite, parse_constant=refuse)
    except RecursionError:
        raise bad_answer(server, answer, "JSON nested too deep to read") from None
    except ValueError as err:  # not JSON, not UTF-8, a number out of range, an integer of 4,300 digits
        raise bad_answer(server, answer, f"not JSON ({safe_text(str(err))[:120]})") from None


class Fields:
    """Typed reads of one JSON object in a server's answer. A read that
    fails names the server, the answer and the field's path; null and a
    missing field read as None."""

    def __init__(self, value: object, server: str, answer: str, path: str = "the answer") -> None:
        self.server, self.answer, self.path = server, answer, path
        if not isinstance(value, dict):
            raise bad_answer(server, answer, f"{path} is {_shown(value)}, not an object")
        self.value = value

    def _name(self, key: str) -> str:
        return key if self.path == "the answer" else f"{self.path}.{key}"

    def _wrong(self, key: str, value: object, kind: str) -> SpecchatError:
        return bad_answer(self.server, self.answer, f"{self._name(key)} is {_shown(value)}, not {kind}")

    def __contains__(self, key: str) -> bool:
        return self.value.get(key) is not None

    def node(self, key: str) -> Fields:
        """An object field; an empty one where it is missing."""
        value = self.value.get(key)
        return Fields({} if value is None else value, self.server, self.answer, self._name(key))

    def maybe_node(self, key: str) -> Fields | None:
        return self.node(key) if key in self else None

    def nodes(self, key: str) -> list[Fields]:
        """A list of objects; an empty one where it is missing."""
        value = self.value.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(key, value, "a list")
        return [Fields(item, self.server, self.answer, f"{self._name(key)}[{i}]") for i, item in enumerate(value)]

    def count(self, key: str) -> int | None:
        """A whole number from 0 to MAX_COUNT; None where it is missing."""
        value = self.value.get(key)
        whole = int(value) if isinstance(value, float) and value.is_integer() else value
        if whole is None or (isinstance(whole, int) and not isinstance(whole, bool) and 0 <= whole <= MAX_COUNT):
            return whole
        raise self._wrong(key, value, f"a count from 0 to {MAX_COUNT}")

    def count_or(self, key: str, default: int) -> int:
        found = self.count(key)
        return default if found is None else found

    def number(self, key: str) -> float | None:
        """A finite number from 0 to MAX_NUMBER (a rate, a time); None where it is missing."""
        value = self.value.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_NUMBER:
            raise self._wrong(key, value, f"a number from 0 to {MAX_NUMBER:.0e}")
        return float(value)

    def text(self, key: str, limit: int | None = TEXT_LIMIT) -> str | None:
        """A string, cut to `limit` characters (None: whole)."""
        value = self.value.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._wrong(key, value, "a string")
        return value if limit is None or len(value) <= limit else value[:limit] + "…"

    def flag(self, key: str) -> bool | None:
        value = self.value.get(key)
        if value is not None and not isinstance(value, bool):
            raise self._wrong(key, value, "true or false")
        return value


def answer_list(value: object, server: str, answer: str) -> list[Fields]:
    """A whole answer that is a list of objects."""
    if not isinstance(value, list):
        raise bad_answer(server, answer, f"the answer is {_shown(value)}, not a list")
    return [Fields(item, server, answer, f"item {i}") for i, item in enumerate(value)]


def read_event(event: Fields) -> tuple[str, str | None, Fields | None]:
    """One streamed event's (text, finish reason, timings), each read as its type."""
    choices = event.nodes("choices")  # the last event, with the usage, has none
    choice = choices[0] if choices else None
    text = (choice.node("delta").text("content", limit=None) if choice else None) or ""
    finish = choice.text("finish_reason", limit=40) if choice else None
    return text, finish, event.maybe_node("timings")
