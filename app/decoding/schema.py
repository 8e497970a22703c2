"""Reading a constraint: a JSON schema (`--json-schema FILE`, turned into
GBNF by llama-cpp-python's converter and laid out the way `json.dumps`
writes JSON) or a GBNF grammar (`--grammar FILE.gbnf`) becomes a
`GrammarSpec`; a finished reply is checked against it (a chat message that
starts `/schema FILE` names one: message/slash.py). llamacpp/grammar.py
binds a spec to a vocabulary.

Also owned here: how big a grammar may be. What the converter reads past
and what it would hang on is converter.py's.
- Size. Every copy of llama.cpp's grammar state (one per reply, one per
  forced-text probe) compares each parse stack with every element of the
  grammar, so it costs about alternatives × size; a 110,000-member enum
  (5 MB) took minutes a copy. Measured with `python tools/grammar_size.py`
  on the tiny pair (a busy 2-core machine), a reply's first step (bind,
  first copy, first probe) reaches 2 s where alternatives × GBNF bytes
  reaches about 2e9 (6,000 enum members of 40 letters, or 12,000 of 8).
  `MAX_ALTERNATIVES` and `MAX_GBNF_BYTES` allow at most 2.7e8 (0.3 s): a
  grammar past either is refused before llama.cpp sees it.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specchat import paths
from specchat.decoding.converter import check_before_converting, dumps_layout, ignored_keywords
from specchat.errors import SpecchatError

MAX_FILE_BYTES = 16 * 1024 * 1024  # a schema or grammar file is read whole: past this it is no grammar to bind
MAX_ALTERNATIVES = 2_000  # as `alternatives` counts them
MAX_GBNF_BYTES = 128 * 1024


@dataclass(frozen=True)
class GrammarSpec:
    """A grammar, ready to bind to a model: GBNF text, where it came from, and
    the JSON schema it was made from (None for a GBNF file)."""

    gbnf: str
    source: str  # the file's name, for display
    schema: dict | None = None
    ignored: tuple[str, ...] = field(default=(), compare=False)  # schema keywords the grammar does not hold

    def __post_init__(self) -> None:
        check_size(self.gbnf, self.source, self.schema is not None)

    @property
    def label(self) -> str:
        return f"JSON · {self.source}" if self.schema is not None else f"grammar · {self.source}"

    @property
    def warning(self) -> str:
        """One line naming the keywords the grammar ignores ("" when none)."""
        if not self.ignored:
            return ""
        return (
            f"{self.source}: the grammar does not enforce {', '.join(self.ignored)} "
            "(llama.cpp's schema converter ignores them); each finished reply is still checked against the whole schema"
        )


def alternatives(gbnf: str) -> int:
    """About how many alternatives a GBNF text holds: one for each rule and
    each `|`, `?`, `*` and `+`, and the upper bound of each {m,n}, counted
    outside literals, character classes and comments."""
    bare = re.sub(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|#[^\n]*', " ", gbnf)
    repeats = sum(int(hi or lo or 0) or 1 for lo, hi in re.findall(r"\{\s*(\d*)\s*,?\s*(\d*)\s*\}", bare))
    return bare.count("::=") + sum(bare.count(c) for c in "|?*+") + repeats


def check_size(gbnf: str, source: str, from_schema: bool) -> None:
    """A grammar too big to bind quickly is a SpecchatError naming its size and the limits."""
    size, n = len(gbnf.encode("utf-8")), alternatives(gbnf)
    over = []
    if n > MAX_ALTERNATIVES:
        over.append(f"{n:,} alternatives (at most {MAX_ALTERNATIVES:,})")
    if size > MAX_GBNF_BYTES:
        over.append(f"{_size(size)} of GBNF (at most {_size(MAX_GBNF_BYTES)})")
    if not over:
        return
    hint = (
        'use fewer enum values or anyOf branches (a long list of values can be {"type": "string"} instead)'
        if from_schema
        else "use fewer alternatives, or a shorter grammar"
    )
    raise SpecchatError(
        f"{source} is too big to bind as a grammar: {' and '.join(over)}; llama.cpp's grammar "
        "sampler slows with alternatives × size",
        hint=hint,
        code=2,
    )


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n / 1024:.0f} KB"


def _read(path: str | Path, what: str) -> str:
    """The file's text, read as `paths.read_regular` reads (a link is
    followed: the user named it), or one clear error for each way it is not
    a grammar file."""
    p = Path(path).expanduser()
    try:
        return paths.read_regular(p, MAX_FILE_BYTES, follow_links=True).decode("utf-8")
    except FileNotFoundError:
        raise SpecchatError(f"no {what} file at {p}", hint=f"check the path of the {what} file", code=2) from None
    except paths.NotRegularFile:
        raise SpecchatError(
            f"{p} is not a regular file", hint=f"name the {what} file itself, not a folder or a pipe", code=2
        ) from None
    except paths.TooBig as err:
        raise SpecchatError(
            f"{p.name} is {_size(err.size)}: too big for a {what}",
            hint=f"specchat reads {what} files up to {_size(MAX_FILE_BYTES)}",
            code=2,
        ) from None
    except UnicodeDecodeError as err:
        raise SpecchatError(
            f"{p} is not UTF-8 text (byte {err.start})", hint=f"save the {what} as UTF-8", code=2
        ) from None
    except OSError as err:
        raise SpecchatError(
            f"cannot read {p}: {err.strerror}", hint=f"check the {what} file's permissions", code=2
        ) from None


def print_warning(line: str) -> None:
    from specchat.textsafe import safe_text  # a line may quote a file's name

    print(f"warning: {safe_text(line)}", file=sys.stderr)


def load_schema(path: str | Path, warn: Callable[[str], None] | None = print_warning) -> GrammarSpec:
    """A JSON schema file as a grammar. A file that is not JSON, not a schema
    object, too big to bind, or uses what the converter cannot express is one
    clear error. Keywords the grammar ignores are one line to `warn` (stderr;
    None: the caller shows `spec.warning` itself)."""
    text = _read(path, "JSON schema")
    name = Path(path).name
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecchatError(
            f"{name} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})",
            hint='a JSON schema file holds one JSON object, e.g. {"type": "object", "properties": {…}}',
            code=2,
        ) from None
    except RecursionError:
        raise SpecchatError(
            f"{name} nests too deeply to read", hint="a JSON schema nests a few levels, not thousands", code=2
        ) from None
    spec = schema_spec(schema, name)
    if spec.warning and warn is not None:
        warn(spec.warning)
    return spec


def schema_spec(schema: object, name: str = "schema") -> GrammarSpec:
    if not isinstance(schema, dict):
        raise SpecchatError(
            f"{name} is not a JSON schema (it holds a {type(schema).__name__}, not an object)",
            hint='a JSON schema is an object, e.g. {"type": "object", "properties": {…}}',
            code=2,
        )
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    check_before_converting(schema, name)
    try:
        gbnf = json_schema_to_gbnf(json.dumps(schema))
    except Exception as err:  # the converter raises plain exceptions for what it cannot express
        raise SpecchatError(
            f"cannot turn {name} into a grammar: {err}",
            hint="use types, properties, required, items, enum, const and $ref",
            code=2,
        ) from None
    return GrammarSpec(dumps_layout(gbnf), name, schema, ignored_keywords(schema))


def load_gbnf(path: str | Path) -> GrammarSpec:
    """A GBNF file as a grammar: one with no root rule, or too big to bind, is one clear error."""
    text = _read(path, "grammar")
    if not re.search(r"^\s*root\s*::=", text, flags=re.M):
        raise SpecchatError(
            f"{Path(path).name} has no root rule",
            hint="a GBNF grammar starts from `root ::= …` (see llama.cpp's grammars/README.md)",
            code=2,
        )
    return GrammarSpec(text, Path(path).name)


def check_reply(spec: GrammarSpec, text: str) -> str | None:
    """Why a finished reply does not match its JSON schema (None: it parses and
    validates). A GBNF grammar has no checker outside the sampler: None."""
    if spec.schema is None:
        return None
    import jsonschema

    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        return f"not JSON: {err.msg} at character {err.pos}"
    try:
        jsonschema.validate(value, spec.schema)
    except jsonschema.ValidationError as err:
        return f"does not match {spec.source}: {err.message}"
    return None
