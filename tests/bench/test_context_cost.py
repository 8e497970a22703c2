"""tools/context_cost on a real (tiny) model: one row per context, in the
order given, each size's cost in plain steps. The figures are the
machine's; only their shape is checked here."""

from __future__ import annotations

import re

import pytest

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


@pytest.mark.parametrize("wrong", [
    ["--repeats", "0"], ["--contexts", "0,30"], ["--sizes", "0,4"], ["--contexts", "x"],
    [],  # nothing wrong but the model: no file at its path
])
def test_a_count_below_one_not_a_number_or_no_model_is_one_line(wrong, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--target", str(tmp_path / "missing.gguf"), "--repeats", "1", *wrong])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("python -m tools.context_cost: error: ") and "Traceback" not in "\n".join(err)


def test_a_context_past_the_window_says_so(tiny_pair, capsys):
    target, _ = tiny_pair
    with pytest.raises(SystemExit):
        main(["--target", str(target), "--contexts", "100000", "--sizes", "1,4", "--threads", "1"])
    assert "pass the model's window" in capsys.readouterr().err
