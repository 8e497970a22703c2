"""No source file over 400 lines and no class over 300: a room that grows
past these is split before it lands. Run by .ci/lint; prints each one over.

A class counts with the project classes it mixes in: where it has two bases
or more, every base defined in the folders checked adds its lines, so a
class cannot meet the cap by moving its methods into mixins. A single base
is inheritance, and counts on its own.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

FILE_LINES = 400
CLASS_LINES = 300


def classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.end_lineno is not None]


def size(node: ast.ClassDef) -> int:
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def base_name(base: ast.expr) -> str | None:
    """`Name`, `module.Name` or `Name[T]`: the class's own name."""
    if isinstance(base, ast.Subscript):
        base = base.value
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else None


def over(path: Path, text: str, sizes: dict[str, int]) -> list[str]:
    found = []
    if (n := len(text.splitlines())) > FILE_LINES:
        found.append(f"{path}: {n} lines (at most {FILE_LINES})")
    for node in classes(ast.parse(text)):
        mixed = [name for b in node.bases if (name := base_name(b)) in sizes] if len(node.bases) > 1 else []
        total = size(node) + sum(sizes[name] for name in mixed)
        if total > CLASS_LINES:
            with_mixins = f" with {', '.join(mixed)}" if mixed else ""
            found.append(f"{path}:{node.lineno}: class {node.name} is {total} lines{with_mixins} (at most {CLASS_LINES})")
    return found


def main(folders: list[str]) -> int:
    texts = {path: path.read_text(encoding="utf-8") for folder in folders for path in sorted(Path(folder).rglob("*.py"))}
    sizes = {node.name: size(node) for text in texts.values() for node in classes(ast.parse(text))}
    found = [line for path, text in texts.items() for line in over(path, text, sizes)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
