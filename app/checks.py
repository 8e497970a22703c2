"""The limits of every number and text a user gives: the one owner of each
rule, checked at the edge (the command line, settings.toml) so that a bad
value is one clear line with a hint, never a traceback deep in the engine.

Each check returns the value or raises SpecchatError (exit code 2). The
settings file turns that error into a warning and keeps its default.
"""

from __future__ import annotations

import math

from specchat.drafters import K_MAX, K_MIN, NAMES, NEEDS_CONSTRAINT
from specchat.errors import SpecchatError

# The smallest context worth opening: a chat template, a short message and a
# few tokens of reply. llama.cpp asserts on much smaller ones.
CTX_MIN = 256


def _bad(flag: str, value: object, rule: str, hint: str) -> SpecchatError:
    return SpecchatError(f"{flag} {value!r} is out of range: {rule}", hint=hint, code=2)


def drafter(name: str, flag: str = "--drafter", constrained: bool | None = None) -> str:
    """A drafter name; with `constrained` given, also whether it can draft
    (the grammar drafter proposes only while a constraint is on)."""
    if name not in NAMES:
        raise SpecchatError(f"unknown drafter {name!r}", hint=f"choose one of: {', '.join(NAMES)}", code=2)
    if constrained is False and name in NEEDS_CONSTRAINT:
        raise SpecchatError(f"the {name} drafter drafts only while the reply is constrained",
                            hint="add --json-schema FILE or --grammar FILE.gbnf, or pick another drafter", code=2)
    return name


def constraint(json_schema: str | None, grammar: str | None, server: str | None = None):
    """The constraint of --json-schema/--grammar as a GrammarSpec (None for
    free text); a missing or unreadable file is one line with a hint."""
    if json_schema is None and grammar is None:
        return None
    if json_schema is not None and grammar is not None:
        raise SpecchatError("--json-schema and --grammar both constrain the reply", hint="pass one of them", code=2)
    if server is not None:
        raise SpecchatError("--json-schema and --grammar constrain the local engine, not a server",
                            hint="leave out --server to decode with the grammar here", code=2)
    from specchat.schema import load_gbnf, load_schema

    return load_schema(json_schema) if json_schema is not None else load_gbnf(grammar)


def temperature(value: float, flag: str = "--temp") -> float:
    if not math.isfinite(value) or value < 0:
        raise _bad(flag, value, "it must be a finite number ≥ 0", "0 is greedy; 0.7 is a common choice")
    return value


def top_p(value: float, flag: str = "--top-p") -> float:
    if not (math.isfinite(value) and 0 < value <= 1):
        raise _bad(flag, value, "it must be more than 0 and at most 1", "1 turns top-p off; 0.9 is a common choice")
    return value


def top_k(value: int, flag: str = "--top-k") -> int:
    if value < 0:
        raise _bad(flag, value, "it must be ≥ 0", "0 turns top-k off; 40 is a common choice")
    return value


def k(value: int, flag: str = "--k") -> int:
    if not K_MIN <= value <= K_MAX:
        raise _bad(flag, value, f"it must be between {K_MIN} and {K_MAX}", "the most tokens a drafter proposes per round, e.g. 4 or 16")
    return value


def max_tokens(value: int, flag: str = "--max-tokens") -> int:
    if value < 1:
        raise _bad(flag, value, "a reply needs at least 1 token", "e.g. --max-tokens 256")
    return value


def ctx(value: int | None, flag: str = "--ctx") -> int | None:
    """None or 0: the loader's default; otherwise at least CTX_MIN."""
    if value is not None and value != 0 and value < CTX_MIN:
        raise _bad(flag, value, f"the context must hold at least {CTX_MIN} tokens", "leave it out for the default (min(8192, trained))")
    return value


def threads(value: int | None, flag: str = "--threads") -> int | None:
    """None or 0: physical cores."""
    if value is not None and value < 0:
        raise _bad(flag, value, "it must be ≥ 1 (or 0 for the physical cores)", "leave it out to use the physical cores")
    return value


def prompt(text: str, what: str = "the prompt") -> str:
    """Text from the command line. Bytes that are not UTF-8 reach Python as
    lone surrogates, which no tokenizer can take."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise SpecchatError(
            f"{what} is not valid UTF-8 (a stray byte at character {err.start + 1})",
            hint="re-type it, or convert the file it came from, e.g. with `iconv -t UTF-8`",
            code=2,
        ) from None
    return text
