"""tools/native_compare's table: beside auto's shown speedup, the real one
round by round, and auto's own plain steps over the off run of the same
round, so whether a shown speedup is wrong or the runs merely spread is read
off one row. The rows are written by hand here; the runs are the tool's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tools.native_compare import detail, plain_over_off, round_spread, table, verify_over_price


def run(tok_s: float, **more) -> dict:
    return {"tok_s": tok_s, "tokens": 100, **more}


def test_a_row_gives_the_real_speedup_of_every_round_and_the_baseline_against_off():
    by = {
        "off": [run(30.0), run(25.0), run(28.0)],
        "auto": [run(60.0, shown=2.0, baseline=30.0), run(40.0, shown=1.7, baseline=27.5), run(56.0, shown=1.9)],
    }
    [head, _, row] = table({"code edit": by}, ["off", "auto"])
    assert "real, round by round" in head and "auto's baseline over off" in head
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-3] == "1.60–2.00×"  # 40/25 and 60/30, 56/28 between them
    assert cells[-2] == "1.05 (2 of 3)"  # 30/30 and 27.5/25; the third run had no plain steps
    assert cells[-1] == "–"  # no run kept its verifies' price


def test_no_plain_steps_in_any_round_says_so():
    by = {"off": [run(30.0)], "auto": [run(60.0, shown=None, baseline=None)]}
    assert plain_over_off(by) == "–"


@given(st.lists(st.tuples(st.floats(1, 100), st.floats(1, 100)), min_size=1, max_size=9))
def test_the_spread_holds_every_round(pairs):
    by = {"off": [run(o) for o, _ in pairs], "auto": [run(a) for _, a in pairs]}
    low, high = (float(x) for x in round_spread(by).rstrip("×").split("–"))
    for o, a in pairs:
        assert low - 0.005 <= a / o <= high + 0.005


def test_verifies_over_their_price_is_the_median_of_the_runs_that_verified():
    by = {"off": [run(30.0)] * 3,
          "auto": [run(60.0, t_verify=1.2, t_verify_priced=1.0), run(50.0, t_verify=1.5, t_verify_priced=1.0),
                   run(30.0, t_verify=0.0, t_verify_priced=0.0)]}
    assert verify_over_price(by) == "1.35 (2 of 3)"  # the third drafted nothing
    row = table({"report": by}, ["off", "auto"])[2]
    assert row.rstrip().endswith("| 1.35 (2 of 3) |")


def test_the_progress_line_tells_where_a_run_spent_its_decode():
    r = run(40.0, alpha=6.5, verify_rounds=10, plain_steps=12, t_decode=3.0, t_draft=0.01, t_verify=2.0,
            t_plain=0.9, t_other=0.09, t_verify_priced=1.6)
    assert detail(r) == (": α 6.5 over 10 verifies, 12 plain steps; verify 2.00 s, plain 0.90 s, draft 0.01 s, "
                         "other 0.09 s, verifies 1.25× their price")
    assert detail(run(12.0)) == ""  # a llama.cpp program's run: no split
    assert detail(run(12.0, alpha=0.0, verify_rounds=0, plain_steps=90, t_decode=8.0)) == ""  # off
