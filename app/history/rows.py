"""What the history holds, as the chat reads it: a Message, a
Conversation, and the checks every stored row passes before any reader
meets it (database.py reads through these): an unknown role, a span whose
text is a number, stats that are a list, NaN or absurd counts make the
Message carry `problem` instead."""

from __future__ import annotations

import json
import math
import reprlib
from dataclasses import dataclass, field


@dataclass
class Message:
    role: str
    content: str
    finish: str | None = None
    stats: dict | None = None
    spans: list[dict] | None = None
    problem: str = ""  # why the stored row could not be read; then the other fields are empty

    @property
    def marker(self) -> str:
        """The line shown in place of a row that could not be read."""
        return f"this message could not be read: {self.problem}"


@dataclass
class Conversation:
    id: int
    title: str
    pair: str = ""
    updated: float = 0.0
    n_messages: int = 0
    messages: list[Message] = field(default_factory=list)
    parent: int | None = None  # the conversation it branched from (tree.py)
    system: str | None = None  # its own system prompt; None: the settings' default


ROLES = ("user", "assistant")
SPAN_KINDS = ("accepted", "rejected", "target")
LIMIT = 1e12  # no count, time or rate specchat stores comes near this
LATEST = 1e11  # seconds since 1970: far beyond any real date, well inside what a clock shows
_MISSING = object()


class Unreadable(ValueError):
    """A stored value that is not what specchat writes; the message says which and why."""


def read_conversation(conv_id, title, pair, updated, n_messages: int = 0, parent=None, system=None) -> Conversation:
    """A conversation's row; an odd title, pair, time, parent or system
    prompt is shown plainly or left out, never a crash."""
    title = title if isinstance(title, str) else "(unreadable title)"
    pair = pair if isinstance(pair, str) else ""
    updated = float(updated) if _amount(updated) and updated <= LATEST else 0.0
    parent = parent if isinstance(parent, int) and not isinstance(parent, bool) else None
    system = system if isinstance(system, str) else None
    return Conversation(conv_id, title, pair, updated, n_messages, [], parent, system)


def read_message(role, content, finish, stats_json, spans_json) -> Message:
    """One message row, checked; a row that fails comes back with only `problem` set."""
    try:
        if role not in ROLES:
            raise Unreadable(f"role is {_show(role)}, not user or assistant")
        if not isinstance(content, str):
            raise Unreadable(f"content is {_show(content)}, not text")
        if finish is not None and not isinstance(finish, str):
            raise Unreadable(f"finish is {_show(finish)}, not text")
        return Message(
            role, content, finish, _stats(_json("stats_json", stats_json)), _spans(_json("spans_json", spans_json))
        )
    except Unreadable as err:
        return Message(role if role in ROLES else "", "", problem=str(err))


def _json(column: str, text):
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise Unreadable(f"{column} is not JSON") from None


def _spans(spans) -> list[dict] | None:
    if spans is None:
        return None
    if not isinstance(spans, list):
        raise Unreadable(f"spans_json is {_show(spans)}, not a list")
    for i, span in enumerate(spans):
        if not isinstance(span, dict):
            raise Unreadable(f"spans_json[{i}] is {_show(span)}, not an object")
        for key in ("text", "drafter"):
            if not isinstance(span.get(key), str):
                raise Unreadable(f"spans_json[{i}].{key} is {_show(span.get(key, _MISSING))}, not text")
        if span.get("kind") not in SPAN_KINDS:
            raise Unreadable(
                f"spans_json[{i}].kind is {_show(span.get('kind', _MISSING))}, not one of {', '.join(SPAN_KINDS)}"
            )
    return spans


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= LIMIT


def _amount(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= LIMIT


def _share(v) -> bool:
    return _amount(v) and v <= 1


def _or_none(check):
    return lambda v: v is None or check(v)


_COUNTS = ("tokens", "verify_rounds", "drafted", "accepted", "prefill_tokens", "plain_steps", "memory_accepted")
_AMOUNTS = (
    "alpha",
    "tok_s",
    "spec_tok_s",
    "prefill_tok_s",
    "t_draft",
    "t_verify",
    "t_verify_priced",
    "t_plain",
    "t_other",
    "t_decode",
)
# What each stats key must hold (stats.TurnStats.to_dict(), server.counts.ServerStats, "drafters"),
# and how the marker says it. Keys not listed are kept and read by no one.
_STATS = {
    **{key: (_count, "a whole number from 0 to 1e12") for key in _COUNTS},
    **{key: (_amount, "a number from 0 to 1e12") for key in _AMOUNTS},
    **{key: (_or_none(_amount), "a number from 0 to 1e12 or null") for key in ("baseline_tok_s", "speedup", "t_llama")},
    "acceptance_rate": (_share, "a share from 0 to 1"),
    "per_position_acceptance": (lambda v: isinstance(v, list) and all(map(_share, v)), "a list of shares from 0 to 1"),
    **{key: (_or_none(_count), "a whole number from 0 to 1e12 or null") for key in ("first_divergence", "memory_held")},
    "identical": (lambda v: v is None or isinstance(v, bool), "true, false or null"),
    **{key: (lambda v: isinstance(v, bool), "true or false") for key in ("timings_sent", "counters", "alpha_exact")},
    **{key: (lambda v: isinstance(v, str), "text") for key in ("source", "baseline_error")},
    "drafters": (lambda v: isinstance(v, list) and all(isinstance(d, str) for d in v), "a list of names"),
}


def _stats(stats) -> dict | None:
    if stats is None:
        return None
    if not isinstance(stats, dict):
        raise Unreadable(f"stats_json is {_show(stats)}, not an object")
    for key, (check, what) in _STATS.items():
        if key in stats and not check(stats[key]):
            raise Unreadable(f"stats_json.{key} is {_show(stats[key])}, not {what}")
    if stats.get("accepted", 0) > stats.get("drafted", 0):
        raise Unreadable(f"stats_json says {stats['accepted']} accepted of {stats.get('drafted', 0)} drafted")
    needed = ["accepted", "drafted", "acceptance_rate"] if stats.get("counters") else []
    needed += ["alpha"] if stats.get("alpha_exact") and stats.get("verify_rounds") else []
    missing = [key for key in needed if key not in stats]  # what the server's stats line reads
    if missing:
        raise Unreadable(f"stats_json has no {missing[0]}")
    return stats


def _show(value) -> str:
    """A stored value in a marker: short, on one line."""
    return "missing" if value is _MISSING else reprlib.repr(value)
