"""The limits of every number and text a user gives: the one owner of each
rule, checked at the edge (the command line, settings.toml) so that a bad
value is one clear line with a hint, never a traceback deep in the engine.

Each check returns the value or raises SpecchatError (exit code 2). The
settings file turns that error into a warning and keeps its default.
"""

from __future__ import annotations

import math
import os
import unicodedata
from pathlib import Path

from specchat.decoding.target import K_MAX, K_MIN
from specchat.drafters import NAMES, NEEDS_CONSTRAINT
from specchat.errors import SpecchatError

# The smallest context worth opening: a chat template, a short message and a
# few tokens of reply. llama.cpp asserts on much smaller ones.
CTX_MIN = 256
# The largest count llama.cpp's C ints take (tokens, layers, a server's fields).
INT_MAX = 2**31 - 1
# llama.cpp's seed is a 32-bit unsigned number.
SEED_MAX = 2**32 - 1
# ggml's most threads (GGML_MAX_N_THREADS); llama.cpp crashes above it.
GGML_THREADS = 512


def _bad(flag: str, value: object, rule: str, hint: str) -> SpecchatError:
    return SpecchatError(f"{flag} {value!r} is out of range: {rule}", hint=hint, code=2)


def _within(flag: str, value: int, least: int, most: int, hint: str) -> int:
    if not least <= value <= most:
        raise _bad(flag, value, f"it must be between {least} and {most}", hint)
    return value


def drafter(name: str, flag: str = "--drafter", constrained: bool | None = None) -> str:
    """A drafter name; with `constrained` given, also whether it can draft
    (the grammar drafter proposes only while a constraint is on)."""
    if name not in NAMES:
        raise SpecchatError(f"unknown drafter {name!r}", hint=f"choose one of: {', '.join(NAMES)}", code=2)
    if constrained is False and name in NEEDS_CONSTRAINT:
        raise SpecchatError(
            f"the {name} drafter drafts only while the reply is constrained",
            hint="add --json-schema FILE or --grammar FILE.gbnf, or pick another drafter",
            code=2,
        )
    return name


def constraint(json_schema: str | None, grammar: str | None, server: str | None = None):
    """The constraint of --json-schema/--grammar as a GrammarSpec (None for
    free text); a missing or unreadable file is one line with a hint."""
    if json_schema is None and grammar is None:
        return None
    if json_schema is not None and grammar is not None:
        raise SpecchatError("--json-schema and --grammar both constrain the reply", hint="pass one of them", code=2)
    if server is not None:
        raise SpecchatError(
            "--json-schema and --grammar constrain the local engine, not a server",
            hint="leave out --server to decode with the grammar here",
            code=2,
        )
    from specchat.decoding.schema import load_gbnf, load_schema

    if json_schema is not None:
        return load_schema(json_schema)
    assert grammar is not None  # one of the two, as checked above
    return load_gbnf(grammar)


def model_file(value: str | None, flag: str) -> str | None:
    """--target or --draft: None is left out; an empty path is a mistake,
    never "left out", which would open the default pair instead."""
    if value is not None and not value.strip():
        raise SpecchatError(f"{flag} is empty", hint=f"pass the path of a .gguf file, or leave {flag} out", code=2)
    return value


def temperature(value: float, flag: str = "--temp") -> float:
    if not math.isfinite(value) or value < 0:
        raise _bad(flag, value, "it must be a finite number ≥ 0", "0 is greedy; 0.7 is a common choice")
    return value


def measure_for(value: float, flag: str = "--measure-for") -> float:
    if not math.isfinite(value) or value < 0:
        raise _bad(
            flag,
            value,
            "it must be a finite number of seconds ≥ 0",
            "0 measures nothing after the reply; 3 is the default",
        )
    return value


def top_p(value: float, flag: str = "--top-p") -> float:
    if not (math.isfinite(value) and 0 < value <= 1):
        raise _bad(flag, value, "it must be more than 0 and at most 1", "1 turns top-p off; 0.9 is a common choice")
    return value


def _at_most(flag: str, value: int, most: int, hint: str) -> int:
    if value > most:
        raise _bad(flag, value, f"it must be at most {most}", hint)
    return value


def _count(flag: str, value: int, least: int, rule: str, hint: str) -> int:
    """A whole number from `least` (else `rule`) up to what llama.cpp's C ints take."""
    if value < least:
        raise _bad(flag, value, rule, hint)
    return _at_most(flag, value, INT_MAX, hint)


def top_k(value: int, flag: str = "--top-k") -> int:
    return _count(flag, value, 0, "it must be ≥ 0", "0 turns top-k off; 40 is a common choice")


def k(value: int, flag: str = "--k") -> int:
    return _within(flag, value, K_MIN, K_MAX, "the most tokens a drafter proposes per round, e.g. 4 or 16")


def max_tokens(value: int, flag: str = "--max-tokens") -> int:
    return _count(flag, value, 1, "a reply needs at least 1 token", "e.g. --max-tokens 256")


def ctx(value: int | None, flag: str = "--ctx") -> int | None:
    """None or 0: the loader's default; otherwise at least CTX_MIN."""
    if value is None or value == 0:
        return value
    return _count(
        flag,
        value,
        CTX_MIN,
        f"the context must hold at least {CTX_MIN} tokens",
        "leave it out for the default (min(8192, trained))",
    )


def threads_max() -> int:
    """The most threads worth asking for: 4 per core here (more only slow
    decoding down), and never more than ggml takes."""
    return min(4 * (os.cpu_count() or 1), GGML_THREADS)


def threads(value: int | None, flag: str = "--threads") -> int | None:
    """None or 0: physical cores; otherwise 1 to threads_max()."""
    if value is None:
        return value
    if value < 0:
        raise _bad(
            flag, value, "it must be ≥ 1 (or 0 for the physical cores)", "leave it out to use the physical cores"
        )
    most = threads_max()
    return _at_most(
        flag,
        value,
        most,
        f"{most} is 4 per core on this machine (ggml takes at most {GGML_THREADS}); "
        "leave it out to use the physical cores",
    )


def seed(value: int, flag: str = "--seed") -> int:
    """llama.cpp reads -1 as "random"; specchat has no random seed, so a
    reply can always be decoded again."""
    return _within(
        flag, value, 0, SEED_MAX, "the same seed and prompt give the same reply; any number in range, e.g. 42"
    )


def baseline_every(value: int, flag: str = "--baseline-every") -> int:
    return _count(flag, value, 0, "it must be ≥ 0", "0 measures no baseline; 8 is the default")


def gpu_layers(value: int, flag: str = "--n-gpu-layers") -> int:
    return _count(
        flag,
        value,
        -1,
        "it must be -1 (all layers), 0 (none) or a number of layers",
        "-1 offloads every layer, 0 none; leave it out for all",
    )


EXTRA_BUFTS = ("auto", "on", "off")


def extra_bufts(value: str, flag: str = "--extra-bufts") -> str:
    """llama.cpp's extra CPU buffer types: auto (off on AMX CPUs, else probed), on or off."""
    if value not in EXTRA_BUFTS:
        raise SpecchatError(
            f"{flag} must be auto, on or off, not {value!r}", hint="auto turns them off where they crash", code=2
        )
    return value


def output_file(text: str, flag: str, inputs: tuple[str | None, ...] = ()) -> Path:
    """A file a command will write when its work is done, checked before the
    work starts: not one of the command's own inputs, not a folder or a
    device, in a folder where a new file can be made (it is written beside
    and renamed into place: paths.write_atomic)."""
    path = Path(text).expanduser().absolute()

    def bad(why: str, hint: str = "name a new file in a folder you can write") -> SpecchatError:
        return SpecchatError(f"cannot write {flag} {path}: {why}", hint=hint, code=2)

    if path.is_dir():
        raise bad("it is a folder")
    if path.exists() and not path.is_file():
        raise bad("it is not a regular file")
    for given in filter(None, inputs):
        source = Path(given).expanduser()
        if path.exists() and source.exists() and (source == path or _same(source, path)):
            raise bad("it is also an input of this command", "name another file for the report")
        if source.is_dir() and path.parent.resolve() == source.resolve():
            raise bad("it is inside the prompts folder, where the next run would read it as a prompt")
    if not path.parent.is_dir():
        raise bad("no such folder", "create the folder first")
    probe = path.parent / f".{path.name}.{os.getpid()}.probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        probe.unlink()
    except OSError as err:
        raise bad(f"a file cannot be made in {path.parent} ({err.strerror or err})") from None
    return path


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def repeats(value: int, flag: str = "--repeats") -> int:
    return _count(flag, value, 1, "each prompt runs at least once", "e.g. --repeats 3")


def sample(value: int | None, flag: str = "--sample") -> int | None:
    if value is None:
        return None
    return _count(flag, value, 1, "it must be ≥ 1", "how many conversations per category, e.g. --sample 2")


def draft_min(value: int | None, flag: str = "--draft-min") -> int | None:
    """None: the server's own."""
    return None if value is None else _within(flag, value, 0, K_MAX, "0 drafts always")


def draft_p_min(value: float | None, flag: str = "--draft-p-min") -> float | None:
    """None: the server's own."""
    if value is not None and not (math.isfinite(value) and 0 <= value <= 1):
        raise _bad(flag, value, "it must be 0 to 1", "0.75 is common")
    return value


_DRAWS_NOTHING = "\u115f\u1160\u2800\u3164\uffa0"  # letters that draw nothing (fillers, the blank braille cell)


def blank(text: str) -> bool:
    """Nothing visible: only whitespace, control and format characters
    (zero-width spaces, joiners, a BOM) and blank fillers. No message."""
    return all(
        ch.isspace() or ch in _DRAWS_NOTHING or unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp")
        for ch in text
    )


def prompt(text: str, what: str = "the prompt", empty_ok: bool = False) -> str:
    """Text from the command line or stdin. Bytes that are not UTF-8 reach
    Python as lone surrogates, which no tokenizer can take. A prompt with
    nothing visible is no message (`empty_ok`: a system prompt may be left empty)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise SpecchatError(
            f"{what} is not valid UTF-8 (a stray byte at character {err.start + 1})",
            hint="re-type it, or convert the file it came from, e.g. with `iconv -t UTF-8`",
            code=2,
        ) from None
    if not empty_ok and blank(text):
        raise SpecchatError(
            f"{what} is empty" if not text else f"{what} has no visible text",
            hint='say something, e.g. specchat run "Explain this error"',
            code=2,
        )
    return text
