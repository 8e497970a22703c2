"""Reading a constraint: a JSON schema (`--json-schema FILE`, turned into
GBNF by llama-cpp-python's converter and laid out the way `json.dumps`
writes JSON) or a GBNF grammar (`--grammar FILE.gbnf`) becomes a
`GrammarSpec`; a finished reply is checked against it; a chat message may
start with `/schema FILE`. grammar.py binds a spec to a vocabulary.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from specchat.errors import SpecchatError


@dataclass(frozen=True)
class GrammarSpec:
    """A grammar, ready to bind to a model: GBNF text, where it came from, and
    the JSON schema it was made from (None for a GBNF file)."""

    gbnf: str
    source: str  # the file's name, for display
    schema: dict | None = None

    @property
    def label(self) -> str:
        return f"JSON · {self.source}" if self.schema is not None else f"grammar · {self.source}"


def _read(path: str | Path, what: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise SpecchatError(f"no {what} file at {p}", hint=f"check the path of the {what} file", code=2)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SpecchatError(f"{p} is not UTF-8 text (byte {err.start})", hint=f"save the {what} as UTF-8", code=2) from None
    except OSError as err:
        raise SpecchatError(f"cannot read {p}: {err.strerror}", hint=f"check the {what} file's permissions", code=2) from None


def load_schema(path: str | Path) -> GrammarSpec:
    """A JSON schema file as a grammar. A file that is not JSON, not a schema
    object, or uses what the converter cannot express is one clear error."""
    text = _read(path, "JSON schema")
    name = Path(path).name
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecchatError(
            f"{name} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})",
            hint="a JSON schema file holds one JSON object, e.g. {\"type\": \"object\", \"properties\": {…}}",
            code=2,
        ) from None
    return schema_spec(schema, name)


def schema_spec(schema: object, name: str = "schema") -> GrammarSpec:
    if not isinstance(schema, dict):
        raise SpecchatError(f"{name} is not a JSON schema (it holds a {type(schema).__name__}, not an object)",
                            hint="a JSON schema is an object, e.g. {\"type\": \"object\", \"properties\": {…}}", code=2)
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        gbnf = json_schema_to_gbnf(json.dumps(schema))
    except Exception as err:  # the converter raises plain exceptions for what it cannot express
        raise SpecchatError(f"cannot turn {name} into a grammar: {err}",
                            hint="use types, properties, required, items, enum, const and $ref", code=2) from None
    return GrammarSpec(dumps_layout(gbnf), name, schema)


def dumps_layout(gbnf: str) -> str:
    """Fix the converter's optional whitespace to json.dumps's layout: no space
    after { and [, one after "," and ":", none elsewhere. Optional whitespace
    would make every structural position a choice, and nothing would be
    forced. Strings also refuse raw control characters, as JSON does."""
    gbnf = gbnf.replace('"," space', '", "').replace('":" space', '": "')
    gbnf = re.sub(r"^space ::= .*$", 'space ::= ""', gbnf, flags=re.M)
    return gbnf.replace(r'char ::= [^"\\]', r'char ::= [^"\\\x7F\x00-\x1F]')


SCHEMA_PREFIX = "/schema"


def schema_prefix(message: str) -> tuple[str | None, str]:
    """Split a chat message "/schema FILE rest" into (FILE, rest); FILE "off"
    frees the replies again. A message without the prefix gives (None, message)."""
    head, _, rest = message.lstrip().partition(" ")
    if head != SCHEMA_PREFIX:
        return None, message
    path, _, rest = rest.strip().partition(" ")
    if not path:
        raise SpecchatError("/schema needs a file", hint="/schema person.json Extract …, or /schema off", code=2)
    return path, rest.strip()


def load_gbnf(path: str | Path) -> GrammarSpec:
    text = _read(path, "grammar")
    if not re.search(r"^\s*root\s*::=", text, flags=re.M):
        raise SpecchatError(f"{Path(path).name} has no root rule",
                            hint="a GBNF grammar starts from `root ::= …` (see llama.cpp's grammars/README.md)", code=2)
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
