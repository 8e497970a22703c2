"""A folder tree nested deeper than Python's recursion limit, and its
removal: shutil.rmtree (pytest's tmp_path cleanup) recurses once per level
as Python 3.11's os.walk does, so the tree is taken down here, deepest first."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def nested_folders(root: Path, levels: int, name: str = "d") -> Iterator[Path]:
    """`levels` folders under root, each inside the last (root/d/d/...); yields the deepest."""
    folders = [root / name]
    for _ in range(levels - 1):
        folders.append(folders[-1] / name)
    for folder in folders:
        folder.mkdir()
    try:
        yield folders[-1]
    finally:
        for folder in reversed(folders):
            for entry in os.scandir(folder):
                if not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.path)
            folder.rmdir()
