"""What llama-cpp-python's JSON-schema converter (`json_schema_to_gbnf`)
makes of a schema, for schema.py, which turns a schema into a grammar:

- What it reads past. The converter honours a few keywords in each branch
  it takes (`_honoured`); the other JSON-schema keywords found where it
  looks (`ignored_keywords`) bind nothing. They are named in one warning
  line, and each finished reply is still checked against the whole schema.
- What it hangs on or writes no grammar for, refused before it starts
  (`check_before_converting`): a repeat count it would write out millions
  of times, a pattern whose ']' or '}' closes nothing (its pattern reader
  loops forever on one), and an empty enum, anyOf, oneOf or type list (a
  rule with nothing in it, which llama.cpp refuses with a log of its own).
- The layout of what it writes (`dumps_layout`): json.dumps's.
"""

from __future__ import annotations

import re

from specchat.errors import SpecchatError

MAX_REPEATS = 10_000  # a schema's minItems, maxItems, minLength, maxLength: the converter writes out each repeat


def check_before_converting(schema: dict, name: str) -> None:
    """What the converter would hang on, or write no grammar for, is one
    line before it starts (the module's docstring)."""
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
            empty = next((key for key in ("enum", "anyOf", "oneOf", "type") if node.get(key) == []), None)
            if empty is not None:
                raise SpecchatError(
                    f"{name} has an empty {empty}: no value can match it",
                    hint=f"give {empty} at least one choice, or leave it out",
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
