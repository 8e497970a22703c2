"""F2's charts: one row a reply, with its number and its figure, the
speedup's bars crossed where plain decoding's 1.00× is, and a reply that
drafted nothing saying so instead of drawing a bar."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from specchat.tui.chat.panels import CHART_REPLIES, CHART_WIDTH, alpha_chart, speedup_chart


def rows(content) -> list[str]:
    return content.plain.split("\n")


def styles_of(content, needle: str) -> set[str]:
    at = content.plain.index(needle)
    return {str(s.style) for s in content.spans if s.start <= at < s.end}


def test_speedups_each_in_a_row_with_plain_decodings_line():
    turns = [{"speedup": 0.96, "drafted": 9}, {"speedup": None, "drafted": 0}, {"speedup": 1.5, "drafted": 30}]
    chart = speedup_chart(turns)
    one, none, more = rows(chart)
    assert one.startswith("#1") and "0.96×" in one and none.startswith("#2") and "no drafts" in none
    assert "1.50×" in more and one.index("│") == more.index("│")  # the same 1.00× column
    assert one.rstrip().endswith("│")  # 0.96× stops short of it
    assert more.count("█") > one.count("█") and more.index("│") < more.rindex("█")  # 1.5× crosses it
    assert any("$spec-bad" in s for s in styles_of(chart, "█"))  # the first bar, 0.96×: the losing colour


def test_a_server_reply_without_counters_is_not_measured():
    chart = alpha_chart([{"source": "server", "alpha": 0.0, "speedup": None}, {"alpha": 3.5, "drafted": 12}])
    assert "not measured" in rows(chart)[0] and rows(chart)[1].startswith("#2") and "3.50" in rows(chart)[1]
    assert rows(chart)[1].count("█") == CHART_WIDTH  # the highest α shown fills the scale
    assert alpha_chart([]).plain == "no replies yet" == speedup_chart([]).plain


@given(st.lists(st.one_of(st.none(), st.floats(0.05, 50.0)), min_size=1, max_size=20))
def test_every_speedup_row_reads_its_figure_on_one_scale(speedups):
    turns = [{"speedup": s, "drafted": 0 if s is None else 5} for s in speedups]
    lines = rows(speedup_chart(turns))
    shown = speedups[-CHART_REPLIES:]
    assert len(lines) == len(shown)
    first = len(speedups) - len(shown) + 1
    marks = set()
    for n, (line, s) in enumerate(zip(lines, shown), first):
        assert line.startswith(f"#{n}")
        if s is None:
            assert "no drafts" in line and "█" not in line
            continue
        assert f"{s:5.2f}×" in line and line.count("│") == 1
        marks.add(line.index("│"))
        assert line.count("█") <= CHART_WIDTH
    assert len(marks) <= 1
    drawn = [(s, line.count("█")) for line, s in zip(lines, shown) if s is not None]
    for (_, x), (_, y) in zip(sorted(drawn), sorted(drawn)[1:]):
        assert x <= y  # a higher speedup never draws a shorter bar


def test_the_last_replys_line_has_no_alpha_where_nothing_was_drafted():
    from specchat.tui.chat.panels import panel_text

    assert "last α – · speedup –" in panel_text([{"alpha": 0.0, "drafted": 0, "speedup": None}]).plain
    assert "last α 2.50 · speedup 1.20×" in panel_text([{"alpha": 2.5, "drafted": 8, "speedup": 1.2}]).plain
