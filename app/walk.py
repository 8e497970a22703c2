"""Walking a folder tree without recursion.

Python 3.11's os.walk calls itself once per level, so a tree nested a
thousand folders deep is a RecursionError. `walk` keeps its own stack
instead, reads each folder once with os.scandir, and never follows a link
to a folder (no loops, nothing outside the tree). It yields as it goes, so
a caller can stop at its own bound, or when the user gives up, at any
folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path


def walk(
    root: Path, keep: Callable[[str], bool] | None = None, on_error: Callable[[OSError], None] | None = None
) -> Iterator[tuple[Path, list[str]]]:
    """(folder, the names of its files, sorted) for `root` and each folder
    under it, in the order os.walk(root) gives them with its folders sorted:
    a folder, then each of its folders in name order, depth first. Folders
    whose name `keep` refuses are left out with what they hold; a link to a
    folder is neither a file nor walked into. A folder that cannot be read
    goes to `on_error` and the walk goes on."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as err:
            if on_error is not None:
                on_error(err)
            continue
        files, below = [], []
        for entry in entries:
            if not _is_dir(entry):
                files.append(entry.name)
            elif not entry.is_symlink() and (keep is None or keep(entry.name)):
                below.append(entry.name)
        yield folder, sorted(files)
        stack.extend(folder / name for name in sorted(below, reverse=True))  # popped in name order


def _is_dir(entry: os.DirEntry) -> bool:
    """A folder, or a link to one (os.walk's test)."""
    try:
        return entry.is_dir()
    except OSError:
        return False
