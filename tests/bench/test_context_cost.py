"""tools/context_cost on a real (tiny) model: one row per context, in the
order given, each size's cost in plain steps. The figures are the
machine's; only their shape is checked here."""

from __future__ import annotations

import re

from tools.context_cost import main


def test_one_row_per_context_in_turn_with_every_size(tiny_pair, capsys):
    target, _ = tiny_pair
    assert main(["--target", str(target), "--contexts", "8,40,8", "--sizes", "4,2", "--repeats", "1",
                 "--threads", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["context", "2", "4"]  # sizes sorted, the plain step taken as the unit
    rows = lines[1:-1]
    assert [r.split()[0] for r in rows] == ["8", "40", "8"]
    for r in rows:
        cells = re.findall(r"(\d+\.\d\d)/\s*(\d+\.\d\d)", r)  # fastest/median, for 2 and 4 positions
        assert len(cells) == 2 and all(float(x) > 0 for cell in cells for x in cell)
        assert re.search(r"\s\d+\.\d ms$", r)  # the plain step
