"""`.ci/sizes.py`, the caps `.ci/lint` keeps: a file over 400 lines, a class
over 300, and a class that meets the cap only by mixing in its methods."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SIZES = Path(__file__).resolve().parents[2] / ".ci" / "sizes.py"


def klass(name: str, lines: int, bases: str = "") -> str:
    body = "".join(f"    def m{i}(self):\n        return {i}\n" for i in range((lines - 1) // 2))
    return f"class {name}{f'({bases})' if bases else ''}:\n{body}\n\n"


def sizes(tmp_path: Path, **files: str) -> tuple[int, list[str]]:
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    done = subprocess.run([sys.executable, str(SIZES), str(tmp_path)], capture_output=True, text=True)
    return done.returncode, [line.removeprefix(f"{tmp_path}/") for line in done.stdout.splitlines()]


def test_a_class_counts_with_the_project_classes_it_mixes_in(tmp_path):
    code, lines = sizes(
        tmp_path,
        keys=klass("Keys", 101),
        base=klass("Base", 41),
        screen=klass("Screen", 251, "Keys, Base"),
        child=klass("Child", 251, "Base"),
    )
    assert code == 1
    assert lines == ["screen.py:1: class Screen is 393 lines with Keys, Base (at most 300)"]  # Child inherits: its own


def test_the_caps_pass_what_is_under_them_and_name_a_long_file(tmp_path):
    assert sizes(tmp_path, small=klass("Small", 299, "dict, object")) == (0, [])
    code, lines = sizes(tmp_path, long="x = 1\n" * 401)
    assert (code, lines) == (1, ["long.py: 401 lines (at most 400)"])
