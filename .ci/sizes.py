"""No source file over 400 lines and no class over 300: a room that grows
past these is split before it lands. Run by .ci/lint; prints each one over."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

FILE_LINES = 400
CLASS_LINES = 300


def over(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    found = []
    if (n := len(text.splitlines())) > FILE_LINES:
        found.append(f"{path}: {n} lines (at most {FILE_LINES})")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            size = node.end_lineno - node.lineno + 1
            if size > CLASS_LINES:
                found.append(f"{path}:{node.lineno}: class {node.name} is {size} lines (at most {CLASS_LINES})")
    return found


def main(folders: list[str]) -> int:
    found = [line for folder in folders for path in sorted(Path(folder).rglob("*.py")) for line in over(path)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
