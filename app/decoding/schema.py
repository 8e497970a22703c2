"""Reading a constraint: a JSON schema (`--json-schema FILE`, turned into
GBNF by llama-cpp-python's converter and laid out the way `json.dumps`
writes JSON) or a GBNF grammar (`--grammar FILE.gbnf`) becomes a
`GrammarSpec`; a finished reply is checked against it (a chat message that
starts `/schema FILE` names one: message/slash.py). llamacpp/grammar.py
binds a spec to a vocabulary.

Also owned here: how big a grammar may be, and which schema keywords the
converter ignores.
- Size. Every copy of llama.cpp's grammar state (one per reply, one per
  forced-text probe) compares each parse stack with every element of the
  grammar, so it costs about alternatives × size; a 110,000-member enum
  (5 MB) took minutes a copy. Measured with `python tools/grammar_size.py`
  on the tiny pair (a busy 2-core machine), a reply's first step (bind,
  first copy, first probe) reaches 2 s where alternatives × GBNF bytes
  reaches about 2e9 (6,000 enum members of 40 letters, or 12,000 of 8).
  `MAX_ALTERNATIVES` and `MAX_GBNF_BYTES` allow at most 2.7e8 (0.3 s): a
  grammar past either is refused before llama.cpp sees it.
- Ignored keywords. The converter honours a few keywords in each branch it
  takes (`_honoured`); the other JSON-schema keywords found where it looks
  (`ignored_keywords`) bind nothing. They are named in one warning line, and
  each finished reply is still checked against the whole schema.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specchat import paths
from specchat.errors import SpecchatError

MAX_FILE_BYTES = 16 * 1024 * 1024  # a schema or grammar file is read whole: past this it is no grammar to bind
MAX_ALTERNATIVES = 2_000  # as `alternatives` counts them
MAX_GBNF_BYTES = 128 * 1024
MAX_REPEATS = 10_000  # a schema's minItems, maxItems, minLength, maxLength: the converter writes out each repeat


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

    _check_what_hangs(schema, name)
    try:
        gbnf = json_schema_to_gbnf(json.dumps(schema))
    except Exception as err:  # the converter raises plain exceptions for what it cannot express
        raise SpecchatError(
            f"cannot turn {name} into a grammar: {err}",
            hint="use types, properties, required, items, enum, const and $ref",
            code=2,
        ) from None
    return GrammarSpec(dumps_layout(gbnf), name, schema, ignored_keywords(schema))


def _check_what_hangs(schema: dict, name: str) -> None:
    """What the converter would hang on is refused before it starts: a
    repeat count it would write out millions of times, and a pattern its
    reader loops on."""
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, dict):
            for key in ("minItems", "maxItems", "minLength", "maxLength"):
                n = node.get(key)
                if isinstance(n, (int, float)) and not isinstance(n, bool) and n > MAX_REPEATS:
                    raise SpecchatError(
                        f"{name} asks for {key} {n:,}: too many repeats to bind as a grammar (at most {MAX_REPEATS:,})",
                        hint=f"lower {key}, or leave it out",
                        code=2,
                    )
            pattern = node.get("pattern")
            if isinstance(pattern, str) and (at := _bare_closer(pattern)) is not None:
                raise SpecchatError(
                    f"{name} has the pattern {pattern!r}, whose {pattern[at]!r} at character {at + 1} closes "
                    "nothing: the grammar converter cannot read it",
                    hint=f"escape it as \\{pattern[at]}, or put it in a class: [{pattern[at]}]",
                    code=2,
                )
            todo.extend(v for k, v in node.items() if k not in ("enum", "const", "default", "examples"))  # data


def _bare_closer(pattern: str) -> int | None:
    """Where a pattern holds a ']' or a '}' that opens nothing, read as the
    converter reads (llama_grammar's _visit_pattern, which loops forever on
    one, where a regex takes it as itself): an escape is two characters, a
    [class] and a {count} run to their first closer. None where there is none."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
        elif c == "[":
            i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
        elif c == "{":
            close = pattern.find("}", i)
            i = n if close < 0 else close + 1
        elif c in "]}":
            return i
        else:
            i += 1
    return None


def dumps_layout(gbnf: str) -> str:
    """Fix the converter's optional whitespace to json.dumps's layout: no space
    after { and [, one after "," and ":", none elsewhere. Optional whitespace
    would make every structural position a choice, and nothing would be
    forced. Strings also refuse raw control characters, as JSON does."""
    gbnf = gbnf.replace('"," space', '", "').replace('":" space', '": "')
    gbnf = re.sub(r"^space ::= .*$", 'space ::= ""', gbnf, flags=re.M)
    return gbnf.replace(r'char ::= [^"\\]', r'char ::= [^"\\\x7F\x00-\x1F]')


# JSON Schema's keywords that constrain a value (annotations such as title,
# description, default and examples constrain nothing, and are left out).
CONSTRAINING = (
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependencies",
    "prefixItems",
    "items",
    "additionalItems",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
)
_FORMATS = re.compile(r"^(uuid[1-5]?|date|time|date-time)$")  # the string formats the converter has rules for


def _honoured(node: dict) -> tuple[set[str], list]:
    """The keywords the converter reads in `node` and the subschemas it visits
    from there: the branches of its `visit`, in its order ($ref and allOf are
    followed by `ignored_keywords`)."""
    t = node.get("type")
    if "$ref" in node:
        return {"$ref"}, []
    if "oneOf" in node or "anyOf" in node:
        key = "oneOf" if node.get("oneOf") else "anyOf"
        return {key}, _list(node[key])
    if isinstance(t, list):
        return {"type"}, []
    if "const" in node or "enum" in node:
        return {"const" if "const" in node else "enum", "type"}, []
    if t in (None, "object") and ("properties" in node or node.get("additionalProperties", True) is not True):
        extra = node.get("additionalProperties")
        return {"type", "properties", "required", "additionalProperties"}, _values(node) + [extra]
    if t in (None, "object") and "allOf" in node:
        return {"type", "allOf"}, []
    if t in (None, "array") and ("items" in node or "prefixItems" in node):
        key = "items" if node.get("items") else "prefixItems"
        if isinstance(node[key], list):
            return {"type", key}, node[key]
        return {"type", key, "minItems", "maxItems"}, [node[key]]
    if t in (None, "string") and "pattern" in node:
        return {"type", "pattern"}, []
    if t in (None, "string") and _FORMATS.match(str(node.get("format") or "")):
        return {"type", "format"}, []
    if t == "string" and ("minLength" in node or "maxLength" in node):
        return {"type", "minLength", "maxLength"}, []
    return {"type"}, []


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _values(node: dict) -> list:
    props = node.get("properties")
    return list(props.values()) if isinstance(props, dict) else []


def ignored_keywords(schema: dict) -> tuple[str, ...]:
    """The constraining keywords of `schema` that the converter reads past,
    in the order first met: the grammar does not hold replies to them."""
    found: dict[str, None] = {}
    followed: set[str] = set()

    def note(node: dict, read) -> None:
        found.update((k, None) for k in CONSTRAINING if k in node and k not in read)

    def resolve(ref):  # a local "#/…" reference, once each (a schema may refer to itself)
        if not isinstance(ref, str) or not ref.startswith("#") or ref in followed:
            return None
        followed.add(ref)
        target: object = schema
        for part in ref.split("#")[-1].split("/")[1:]:
            target = target.get(part) if isinstance(target, dict) else None
        return target

    def visit(node) -> None:
        if not isinstance(node, dict):
            return
        read, children = _honoured(node)
        note(node, read)
        if read == {"$ref"}:
            children = [resolve(node["$ref"])]
        elif "allOf" in read:
            children = [child for part in _list(node["allOf"]) for child in all_of_part(part)]
        for child in children:
            visit(child)

    def all_of_part(part) -> list:
        """The subschemas an allOf part gives: its properties (an anyOf part,
        its branches'); nothing else in it is read."""
        if isinstance(part, dict) and "anyOf" in part:
            note(part, {"anyOf"})
            return [child for branch in _list(part["anyOf"]) for child in component(branch)]
        return component(part)

    def component(comp) -> list:
        if isinstance(comp, dict) and "$ref" in comp:  # its target's properties
            note(comp, {"$ref"})
            comp = resolve(comp["$ref"])
        if not isinstance(comp, dict):
            return []
        note(comp, {"properties"})
        return _values(comp)

    visit(schema)
    return tuple(found)


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
