"""The shown speedup says how sure it is: the baseline's plain steps are a
sample, and where their spread leaves the speedup uncertain by more than 5%
either side the stats line gives its 90% interval beside it."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specchat.decoding.stats import Round, mean_interval, summarize
from specchat.display import local_fields, speedup_text


def plain(seconds: float) -> Round:
    return Round(accepted=[], rejected=[], target=1, drafter="off", plain=True, steady=True, t_verify=seconds)


def verify(seconds: float, accepted: int = 7) -> Round:
    return Round(accepted=[1] * accepted, rejected=[], target=1, drafter="ngram", plain=False, t_verify=seconds)


def test_the_interval_of_a_mean_follows_student_s_t():
    assert mean_interval([0.03]) is None
    half = 6.314 * statistics.stdev([0.03, 0.04]) / 2**0.5  # two samples: one degree of freedom
    assert mean_interval([0.030, 0.040]) == pytest.approx((0.035 - half, 0.035 + half))
    assert mean_interval([0.01, 0.09])[0] == 0.0  # a time is never negative
    steady = [0.036] * 30
    assert mean_interval(steady) == pytest.approx((0.036, 0.036))  # no spread: the mean itself
    many = [0.03, 0.04] * 20  # 40 samples: 1.645 + 1.7/39 sd/√n either side
    half = (1.645 + 1.7 / 39) * statistics.stdev(many) / 40**0.5
    assert mean_interval(many) == pytest.approx((0.035 - half, 0.035 + half))


def test_steady_samples_give_a_tight_interval_and_no_range_on_the_line():
    rounds = [plain(0.036), plain(0.0362), plain(0.0359), verify(0.3), plain(0.0361), verify(0.3)]
    s = summarize(rounds, t_decode=sum(r.t_verify for r in rounds)).to_dict()
    assert s["speedup_low"] < s["speedup"] < s["speedup_high"]
    assert s["speedup_high"] - s["speedup_low"] < 0.02 * s["speedup"]
    assert speedup_text({**s, "drafters": ["ngram"]}) == f"{s['speedup']:.2f}×"


def test_samples_a_slow_spell_split_show_the_range_beside_the_speedup():
    rounds = [plain(0.036), plain(0.052), plain(0.035), verify(0.3), plain(0.050), verify(0.3)]
    s = summarize(rounds, t_decode=sum(r.t_verify for r in rounds)).to_dict()
    low, high = s["speedup_low"], s["speedup_high"]
    assert low < s["speedup"] * 0.95 and high > s["speedup"] * 1.05
    fields = dict(local_fields({**s, "drafters": ["ngram"]}))
    assert fields["speedup"] == f"{s['speedup']:.2f}× ({low:.2f}–{high:.2f}×)"


def test_a_stored_reply_without_an_interval_shows_its_speedup_alone():
    assert speedup_text({"speedup": 1.5}) == "1.50×"
    assert speedup_text({"speedup": 1.5, "speedup_low": "x", "speedup_high": None}) == "1.50×"


def test_a_turn_that_drafted_nothing_has_no_speedup():
    """Plain steps only (drafter off, or auto finding nothing to draft): the
    "speedup" would be the machine's noise, so run --json, the stats line and
    the stored reply all say none."""
    s = summarize([plain(0.036), plain(0.040), plain(0.035)], t_decode=0.111)
    assert s.baseline_tok_s == pytest.approx(3 / 0.111)
    assert (s.speedup, s.speedup_low, s.speedup_high) == (None, None, None)


def test_the_speedup_counts_what_a_round_costs_beyond_its_decode_on_both_sides():
    """Every round pays for its text, the index's update and the screen's
    callback after its decode; a drafter that takes fewer rounds pays it
    fewer times. The speedup is a real off run's: a steady step's wall time
    less the drafter's decision (off decides nothing), against the drafter's
    rounds' whole wall time."""
    step, beyond, decide, check = 0.030, 0.006, 0.002, 0.180  # a plain decode, the rest of a round, auto's pick, a verify

    def timed(r: Round, decode: float) -> Round:
        r.t_draft, r.t_verify, r.t_round = decide, decode, decide + decode + beyond
        return r

    rounds = [timed(plain(0), step) for _ in range(4)] + [timed(verify(0), check) for _ in range(4)]
    s = summarize(rounds, t_decode=sum(r.t_round for r in rounds)).to_dict()
    off_tok_s = 1 / (step + beyond)  # an off run: every token a decode and the rest of its round
    mine_tok_s = (4 + 4 * 8) / (4 * (decide + step + beyond) + 4 * (decide + check + beyond))
    assert s["baseline_tok_s"] == pytest.approx(off_tok_s)
    assert s["speedup"] == pytest.approx(mine_tok_s / off_tok_s)
    inner = ((4 + 32) / (4 * (decide + step) + 4 * (decide + check))) * step  # the decodes alone, as before
    assert s["speedup"] > inner  # fewer rounds, so less of what a round costs beyond its decode


def test_a_round_made_by_hand_counts_its_draft_and_verify():
    r = verify(0.3)
    r.t_draft = 0.01
    assert r.wall == pytest.approx(0.31) and r.step == pytest.approx(0.3)


@given(
    st.lists(st.tuples(st.integers(0, 12), st.floats(0.02, 0.5)), min_size=1, max_size=30),
    st.floats(0.01, 0.1),
    st.floats(0.0, 0.2),
    st.booleans(),
)
def test_the_speedup_is_what_an_off_run_of_the_same_reply_says(shape, step, outside, ends):
    """Any turn of plain steps and verifies, ending on its end-of-generation
    token or cut at a length, against the off run of the same reply (a step
    of the same time per token, one for the end token, the same time outside
    the rounds): the shown speedup and baseline are that run's, a 2-token
    reply's too. Every plain step costs the same here, so they agree exactly."""
    rounds = [plain(step), plain(step)]  # two baseline samples in every turn: an interval
    for accepted, seconds in shape:
        rounds.append(plain(step) if accepted == 0 else verify(seconds, accepted))
    if ends:
        rounds.append(Round(accepted=[], rejected=[], target=None, drafter="off", plain=True, steady=True,
                            t_verify=step, eos=True))
    s = summarize(rounds, t_decode=sum(r.wall for r in rounds) + outside)
    off_rounds = [plain(step) for _ in range(s.tokens)] + rounds[len(rounds) - ends:]
    off = summarize(off_rounds, t_decode=sum(r.wall for r in off_rounds) + outside)
    assert s.baseline_tok_s == pytest.approx(off.tok_s)
    if s.verify_rounds:
        assert s.speedup == pytest.approx(s.tok_s / off.tok_s)
        assert s.speedup_low == pytest.approx(s.speedup) == pytest.approx(s.speedup_high)  # no spread in the steps
    else:
        assert s.speedup is None
