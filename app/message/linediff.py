"""The difference between two lists of lines, quick on a big file: the
lines both ends share are set aside, the lines that occur once in each
side anchor the rest in order (the patience diff's anchors), and difflib
matches only what lies between two anchors. difflib alone takes seconds to
minutes on a file of thousands of lines with changes all through it (it
searches the whole file again for each change); here each search covers a
gap between anchors, which for a file edited here and there is a few lines.

`opcodes` gives difflib's opcodes; `unified` turns them into the lines of
a unified diff, as difflib.unified_diff writes them.
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator

Opcode = tuple[str, int, int, int, int]  # (tag, i1, i2, j1, j2), as difflib.SequenceMatcher.get_opcodes


def opcodes(a: list[str], b: list[str], stop: Callable[[], bool] = lambda: False) -> list[Opcode] | None:
    """The opcodes that turn `a` into `b`; None where `stop()` said to
    give up (it is asked between gaps)."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    codes: list[Opcode] = [("equal", 0, head, 0, head)]
    i, j = head, head
    for ai, bj in [*_anchors(a, b, head, len(a) - tail, len(b) - tail), (len(a) - tail, len(b) - tail)]:
        if stop():
            return None
        if ai > i or bj > j:
            matcher = difflib.SequenceMatcher(None, a[i:ai], b[j:bj])
            codes += [(tag, i + i1, i + i2, j + j1, j + j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]
        codes.append(("equal", ai, ai + 1, bj, bj + 1))  # the anchor itself (the last one is empty)
        i, j = ai + 1, bj + 1
    codes[-1] = ("equal", len(a) - tail, len(a), len(b) - tail, len(b))
    return _merged(codes)


def _anchors(a: list[str], b: list[str], lo: int, a_hi: int, b_hi: int) -> list[tuple[int, int]]:
    """(i, j) of lines that occur once in a[lo:a_hi] and once in b[lo:b_hi],
    the longest run of them in the same order on both sides."""
    in_a, in_b = Counter(a[lo:a_hi]), Counter(b[lo:b_hi])
    where_b = {b[j]: j for j in range(lo, b_hi) if in_b[b[j]] == 1 and in_a[b[j]] == 1}
    pairs = [(i, where_b[a[i]]) for i in range(lo, a_hi) if a[i] in where_b]
    # The longest increasing run of j (patience sorting): tops[k] ends the best run of length k + 1.
    tops: list[int] = []
    tails: list[int] = []  # index into pairs of each top
    before = [-1] * len(pairs)
    for n, (_, j) in enumerate(pairs):
        k = bisect_left(tops, j)
        if k == len(tops):
            tops.append(j)
            tails.append(n)
        else:
            tops[k], tails[k] = j, n
        before[n] = tails[k - 1] if k else -1
    run, n = [], tails[-1] if tails else -1
    while n >= 0:
        run.append(pairs[n])
        n = before[n]
    return run[::-1]


def _merged(codes: list[Opcode]) -> list[Opcode]:
    """Neighbouring opcodes of one tag as one, empty ones left out."""
    out: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if i1 == i2 and j1 == j2:
            continue
        if out and out[-1][0] == tag:
            out[-1] = (tag, out[-1][1], i2, out[-1][3], j2)
        elif out and {tag, out[-1][0]} <= {"replace", "delete", "insert"}:
            out[-1] = ("replace", out[-1][1], i2, out[-1][3], j2)  # a deletion beside an insertion is one change
        else:
            out.append((tag, i1, i2, j1, j2))
    return out


def unified(a: list[str], b: list[str], codes: list[Opcode], old: str, new: str, context: int = 3) -> Iterator[str]:
    """The unified diff of `a` into `b` from their opcodes, one line each
    (no line ends), headed by the two names; nothing where they are equal."""
    groups = list(_grouped(codes, context))
    if not groups:
        return
    yield f"--- {old}"
    yield f"+++ {new}"
    for group in groups:
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in a[i1:i2])
                continue
            yield from ("-" + line for line in a[i1:i2])
            yield from ("+" + line for line in b[j1:j2])


def _grouped(codes: list[Opcode], n: int) -> Iterator[list[Opcode]]:
    """The changes with up to n lines of context each side, as
    difflib.SequenceMatcher.get_grouped_opcodes groups them."""
    if not codes or all(tag == "equal" for tag, *_ in codes):
        return
    codes = list(codes)
    if codes[0][0] == "equal":
        _, i1, i2, j1, j2 = codes[0]
        codes[0] = ("equal", max(i1, i2 - n), i2, max(j1, j2 - n), j2)
    if codes[-1][0] == "equal":
        _, i1, i2, j1, j2 = codes[-1]
        codes[-1] = ("equal", i1, min(i2, i1 + n), j1, min(j2, j1 + n))
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * n:  # a long stretch alike ends one group and starts the next
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it: "3,4", "3" for one line, "2,0" for none."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"
