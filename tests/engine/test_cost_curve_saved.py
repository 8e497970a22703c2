"""The first reply as fast as the tenth: nothing is measured before a
reply (auto prices a size not measured by its prior); auto's cost curve is
measured between replies in the chat, a size at a time, and for a few
seconds after each `run`, kept in the data folder and reused by the next
session; a reply stops a measurement between two sizes and keeps what it
timed; measuring shows a bar with an estimate; a turn that drafted nothing
shows no speedup; settings.toml's threads reach every command."""

from __future__ import annotations

import json
import threading
import time

import pytest
from typer.testing import CliRunner

from specchat import paths
from specchat.cli.main import app
from specchat.decoding import costmodel, keptcurve
from specchat.decoding.costmodel import (
    CALIBRATION_SIZES,
    DRIFT_ROUNDS,
    SMOOTHING,
    CostModel,
    calibration_sizes,
    implausible,
)
from specchat.decoding.keptcurve import MAX_AGE_S, measured_at, save_curve, saved_curve
from specchat.decoding.target import K_MAX
from specchat.display import local_fields
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from tests.support.fake_model import FakeModel
from tests.support.tui import FakeModels, make_app, ready, wait_until


def run_json(*args: str) -> dict:
    r = CliRunner().invoke(app, ["run", *args, "--json", "--no-history"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.real
def test_a_second_run_reuses_the_curve_the_first_measured(tiny_pair):
    """Asserted from each run's own record of what it did, not from its time."""
    args = ("Rename x to y: def f(x): return x * x", "--target", str(tiny_pair[0]), "--drafter", "auto",
            "--max-tokens", "16")
    first = run_json(*args, "--measure-for", "600")
    assert first["cost_curve"]["from"] == "none" and first["cost_curve"]["calibration_s"] == 0.0  # none before it
    kept = json.loads((paths.data_dir() / "cost-curves.json").read_text())
    (key,) = kept
    bufts = first["devices"]["target"]["extra_bufts"]  # off on an AMX CPU, on where the probe decoded
    assert key.startswith(f"{tiny_pair[0].resolve()}:") and "threads=" in key and f"bufts={bufts}" in key
    assert {str(n) for n in CALIBRATION_SIZES} <= set(kept[key]["seconds"])  # measured whole after the reply
    second = run_json(*args)
    whole = {"from": "saved", "calibration_s": 0.0, "sizes_measured": len(CALIBRATION_SIZES),
             "sizes": len(CALIBRATION_SIZES)}
    assert second["cost_curve"] == whole
    assert second["stats"]["tokens"] == 16
    off = run_json(*args[:3], "--drafter", "off", "--max-tokens", "4")  # off prices nothing: nothing measured
    assert off["cost_curve"] == whole


@pytest.mark.real
def test_a_run_measures_for_its_budget_after_the_reply_and_the_next_goes_on(tiny_pair):
    args = ("hi", "--target", str(tiny_pair[0]), "--drafter", "auto", "--max-tokens", "2")
    run_json(*args, "--measure-for", "0")
    assert not (paths.data_dir() / "cost-curves.json").exists()  # --measure-for 0: nothing measured
    run_json(*args, "--measure-for", "0.3")
    first = run_json(*args, "--measure-for", "0")["cost_curve"]
    assert 3 <= first["sizes_measured"] < first["sizes"]  # part of it, kept
    run_json(*args, "--measure-for", "600")
    assert run_json(*args, "--measure-for", "0")["cost_curve"]["sizes_measured"] == first["sizes"]


@pytest.mark.real
def test_another_thread_count_is_another_curve(tiny_pair):
    base = ("hi", "--target", str(tiny_pair[0]), "--drafter", "auto", "--max-tokens", "2")
    assert run_json(*base, "--threads", "1", "--measure-for", "600")["cost_curve"]["from"] == "none"
    assert run_json(*base, "--threads", "2", "--measure-for", "600")["cost_curve"]["from"] == "none"
    assert len(json.loads((paths.data_dir() / "cost-curves.json").read_text())) == 2


@pytest.mark.real
def test_settings_threads_reach_run(tiny_pair):
    paths.settings_file().parent.mkdir(parents=True, exist_ok=True)
    paths.settings_file().write_text("threads = 1\n")
    out = run_json("hi", "--target", str(tiny_pair[0]), "--drafter", "off", "--max-tokens", "2")
    assert out["threads"] == 1
    out = run_json("hi", "--target", str(tiny_pair[0]), "--drafter", "off", "--max-tokens", "2", "--threads", "2")
    assert out["threads"] == 2  # the flag wins


@pytest.mark.parametrize("damaged", [
    {"seconds": {"1": 0.01, "2": float("nan"), "4": 0.03}},
    {"seconds": {"1": -0.01, "2": 0.02, "4": 0.03}},
    {"seconds": {"2": 0.02, "4": 0.03, "8": 0.05}},  # no single step
    {"seconds": {"1": 0.01, "x": 0.02, "4": 0.03}},
    {"seconds": {"1": 0.01, "2": True, "4": 0.03}},
    {"seconds": [0.01, 0.02]},
    "not an entry",
], ids=["nan", "negative", "no step", "a key not a size", "a bool", "a list", "a string"])
def test_a_damaged_saved_curve_is_measured_again(damaged):
    paths.data_dir().mkdir(parents=True)
    (paths.data_dir() / "cost-curves.json").write_text(json.dumps({"k": damaged}))
    assert saved_curve("k") is None


def test_a_saved_file_nested_past_any_parser_is_no_curve():
    paths.data_dir().mkdir(parents=True)
    (paths.data_dir() / "cost-curves.json").write_text("[" * 100_000 + "]" * 100_000)
    assert saved_curve("k") is None
    save_curve("k", {1: 0.01, 2: 0.015, 4: 0.03})  # and the next measurement replaces it
    assert saved_curve("k") == {1: 0.01, 2: 0.015, 4: 0.03}


def keyed_model() -> FakeModel:
    model = FakeModel()
    model.cost_key = "a fake with a key"  # as llama.Model names what its curve depends on
    return model


def test_a_session_starts_from_the_saved_curve_and_keeps_the_refined_one():
    save_curve("a fake with a key", {n: 0.001 * n for n in CALIBRATION_SIZES})
    model = keyed_model()
    model.step_seconds = 0.001  # a decode takes as long as the curve says a step does
    session = ChatSession(model, decode=DecodeOptions(drafter="auto", k=8, max_tokens=20))
    assert session.costs.covers and session.cost_curve()["from"] == "saved"
    assert session.cost_curve()["calibration_s"] == 0.0
    session.reply("hello")
    assert session.cost_curve()["calibration_s"] == 0.0  # nothing measured before the reply
    assert saved_curve("a fake with a key") == session.costs.seconds  # what live rounds refined is kept


class BusyClock:
    """A machine whose clock the model's decodes move: a plain step costs 1 ms,
    a batch of n positions 0.5 ms a position, while `busy` batches are left
    (another job slows each of them fivefold)."""

    def __init__(self, monkeypatch, busy: int) -> None:
        self.now, self.busy = 0.0, busy
        monkeypatch.setattr(costmodel, "timer", lambda: self.now)
        clock = self

        class Model(FakeModel):
            def eval(self, tokens, n_logits=1):
                super().eval(tokens, n_logits)
                n = len(tokens)
                cost = 0.001 if n == 1 else 0.0005 * n
                if n > 1 and clock.busy > 0:
                    clock.busy -= 1
                    cost *= 5
                clock.now += cost

        self.model = Model()
        self.model.cost_key = "a fake with a key"


@pytest.mark.parametrize("busy_batches", [4, 10_000])
def test_a_curve_measured_on_a_busy_machine_is_measured_again_and_kept_only_once_it_is_plausible(
    monkeypatch, busy_batches
):
    clock = BusyClock(monkeypatch, busy_batches)  # busy for the first size's timings, or throughout
    session = ChatSession(clock.model, decode=DecodeOptions(drafter="auto", k=8, max_tokens=4))
    assert session.measure_ahead() == "missing"
    if busy_batches < 10_000:
        # The size measured fivefold was measured again, once the job had ended.
        assert implausible(session.costs.seconds) == []
        assert session.costs.relative(17) == pytest.approx(17 * 0.5)
        assert saved_curve("a fake with a key") == session.costs.seconds
    else:
        # Still implausible after RETRIES: used for this session, not kept for the next.
        assert implausible(session.costs.seconds) == [n for n in CALIBRATION_SIZES if n > 1]
        assert saved_curve("a fake with a key") is None
        assert session.curve_due() is None  # this session does not measure it again after every reply


def test_a_kept_curve_that_live_rounds_made_implausible_is_measured_again():
    # Kept from a busy machine (or an older specchat): 2 positions read as 10 steps.
    save_curve("a fake with a key", {1: 0.0002, **{n: 0.001 * n for n in CALIBRATION_SIZES if n > 1}})
    assert saved_curve("a fake with a key") is None
    session = ChatSession(keyed_model(), decode=DecodeOptions(drafter="auto", k=8, max_tokens=4))
    assert session.curve_due() == "missing" and session.measure_ahead() == "missing"


def test_a_machine_that_got_faster_keeps_the_curve_s_shape():
    costs = CostModel.from_points({1: 0.040, 2: 0.068, 17: 0.272})  # 2 positions 1.7 steps, 17 6.8
    for _ in range(20):  # plain steps only, at 30 ms: the machine got faster
        costs.observe(1, 0.030)
    assert costs.step(1) == pytest.approx(0.030, rel=0.02)
    assert costs.relative(2) == pytest.approx(1.7) and costs.relative(17) == pytest.approx(6.8)
    costs.observe(17, 0.030 * 5.0)  # a verify of 17 now: its own shape moves
    assert costs.relative(17) == pytest.approx(6.8 + SMOOTHING * (5.0 - 6.8), rel=0.02)


def test_a_cancelled_calibration_keeps_nothing():
    cancel = threading.Event()
    model = FakeModel()

    class Stop(FakeModel):
        def eval(self, tokens, n_logits=1):
            super().eval(tokens, n_logits)
            if len(tokens) >= 3:
                cancel.set()  # Esc while the third size is timed

    costs = CostModel()
    costs.calibrate(Stop(), cancel=cancel)
    assert costs.seconds == {} and not costs.calibrated
    costs.calibrate(model)
    assert costs.calibrated


def test_a_turn_that_drafted_nothing_shows_no_speedup():
    stats = {"tokens": 6, "drafted": 0, "accepted": 0, "tok_s": 11.8, "baseline_tok_s": 16.1, "speedup": 0.73,
             "alpha": 1.0, "drafters": ["auto"]}
    assert local_fields(stats) == [("tok_s", "11.8 tok/s"), ("drafter", "no drafts this turn")]
    assert local_fields({**stats, "drafters": ["off"]}) == [("tok_s", "11.8 tok/s"), ("drafter", "drafter off")]


async def test_the_chat_measures_the_curve_while_the_user_types(tmp_path):
    models = FakeModels(step_seconds=0.02)  # 25 timed decodes: half a second of measuring
    app = make_app(tmp_path, models=models)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        from tests.support.tui import enter

        bar = app.query_one("StatusBar")
        await wait_until(pilot, lambda: bar.status.note.startswith("measuring auto's cost curve"))
        assert "sizes" in bar.status.note and "a message stops it" in bar.status.note and not app.chat.generating
        await wait_until(pilot, lambda: bar.status.note == "")
        measured = app.chat.session.curve.spent
        assert measured > 0 and app.chat.session.costs.covers
        await enter(pilot, "hello")
        await wait_until(pilot, lambda: not app.chat.generating)
        assert app.chat.session.curve.spent == measured  # the first reply measured nothing
        assert bar.status.note == ""


async def test_a_measurement_that_ends_clears_only_its_own_note(tmp_path):
    from specchat.decoding.costmodel import Measuring
    from specchat.tui.app import CurveMeasuring

    app = make_app(tmp_path, models=FakeModels())
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.chat.session.curve.spent > 0)
        bar = app.query_one("StatusBar")
        await wait_until(pilot, lambda: bar.status.note == "")
        app.chat_screen.set_status(note="loading the draft model")  # set while a measurement ran
        app.post_message(CurveMeasuring(Measuring(3, 18, 0.0, ended=True)))
        await pilot.pause()
        assert bar.status.note == "loading the draft model"
        app.chat_screen.set_status(note="")
        app.post_message(CurveMeasuring(Measuring(9, 18, 12.4)))
        await wait_until(pilot, lambda: "█" * 6 + "░" * 6 + " 9 of 18 sizes, about 12 s left" in bar.status.note)
        app.post_message(CurveMeasuring(Measuring(10, 18, 11.0, ended=True)))
        await wait_until(pilot, lambda: bar.status.note == "")


def test_the_chat_measures_a_missing_curve_before_the_first_reply_asks():
    session = ChatSession(keyed_model(), decode=DecodeOptions(drafter="auto", k=8, max_tokens=20))
    assert session.curve_due() == "missing"
    assert session.measure_ahead() == "missing"
    measured = session.curve.spent
    assert measured > 0 and saved_curve("a fake with a key") == session.costs.seconds
    assert session.curve_due() is None and session.measure_ahead() is None  # measured once
    session.reply("hello")
    assert session.curve.spent == measured  # the reply measured nothing


def test_off_needs_no_curve_until_auto_is_picked():
    session = ChatSession(keyed_model(), decode=DecodeOptions(drafter="off", k=8, max_tokens=20))
    assert session.curve_due() is None and session.measure_ahead() is None
    session.set_drafter("auto")
    assert session.curve_due() == "missing"


def test_an_old_curve_is_measured_again_and_dated():
    month_ago = time.time() - MAX_AGE_S - 60
    save_curve("a fake with a key", {n: 0.5 * n for n in CALIBRATION_SIZES}, month_ago)
    session = ChatSession(keyed_model(), decode=DecodeOptions(drafter="auto", k=8, max_tokens=20))
    assert session.curve_due() == "old"
    assert session.measure_ahead() == "old"
    assert session.costs.seconds[17] < 1  # the fake's decodes take no time, not the old 8.5 s
    assert measured_at("a fake with a key") > month_ago + 60
    session.reply("hello")  # a turn's refined curve keeps the date it was measured
    assert measured_at("a fake with a key") == session.curve.measured


def test_live_rounds_that_drift_from_the_curve_s_shape_call_for_a_new_one():
    costs = CostModel.from_points({1: 0.010, 2: 0.012, 4: 0.020})
    for _ in range(DRIFT_ROUNDS):
        costs.observe(4, 0.022)  # within DRIFT of what was measured
    assert costs.drifted() is None
    for _ in range(DRIFT_ROUNDS):
        costs.observe(4, 0.060)  # four positions now cost six plain steps, not two
    assert costs.drifted() == 4
    costs.load(costs.seconds)  # measured again: the new curve is the reference
    assert costs.drifted() is None


def test_a_machine_that_got_slower_as_a_whole_keeps_its_curve():
    """Live steps that cost a steady share more than calibration's bare
    decodes (or a machine three times slower) move every size alike: the
    curve's shape holds, and it is not measured again."""
    costs = CostModel.from_points({1: 0.010, 2: 0.012, 4: 0.020})
    for _ in range(3 * DRIFT_ROUNDS):
        costs.observe(1, 0.030)
        costs.observe(4, 0.060)  # twice a step's cost still, at the new level
    assert costs.seconds[1] == pytest.approx(0.030, rel=0.01) and costs.step(2) == pytest.approx(0.036, rel=0.02)
    assert costs.drifted() is None


class SlowDecodes(FakeModel):
    """A fake whose decodes take a while (a batch as long as a step: a
    plausible curve), and which says when a batch started."""

    def __init__(self) -> None:
        super().__init__()
        self.cost_key = "a fake with a key"
        self.batch_started = threading.Event()

    def eval(self, tokens, n_logits=1):
        if len(tokens) > 1:
            self.batch_started.set()
        time.sleep(0.02)
        super().eval(tokens, n_logits)


def measuring_ahead(session: ChatSession, model: SlowDecodes) -> tuple[threading.Thread, list]:
    """measure_ahead on a thread of its own, once its first batch is under way; what it returned."""
    result: list = []
    thread = threading.Thread(target=lambda: result.append(session.measure_ahead()))
    thread.start()
    assert model.batch_started.wait(5)
    return thread, result


def test_a_reply_stops_a_refresh_and_the_old_curve_prices_the_sizes_not_measured_again():
    old = {n: 0.02 * n for n in CALIBRATION_SIZES}
    save_curve("a fake with a key", old, time.time() - MAX_AGE_S - 60)
    model = SlowDecodes()
    session = ChatSession(model, decode=DecodeOptions(drafter="auto", k=8, max_tokens=20))
    refresh, result = measuring_ahead(session, model)
    turn = session.reply("hello")  # waits one decode at most, not the whole curve
    refresh.join(5)
    assert result == ["old"] and turn.tokens
    assert session.curve.spent < 0.02 * 11  # the refresh stopped before timing every size
    assert session.costs.seconds[65] == pytest.approx(old[65], rel=0.5)  # not measured again yet: the old price
    assert session.curve_due() == "missing"  # the next pause between replies measures the rest


def test_a_reply_stops_a_missing_curve_and_the_next_pause_goes_on_from_there():
    model = SlowDecodes()
    session = ChatSession(model, decode=DecodeOptions(drafter="auto", k=8, max_tokens=20))
    ahead, result = measuring_ahead(session, model)
    turn = session.reply("hello")  # the reply does not wait for the curve
    ahead.join(5)
    assert result == ["missing"] and turn.tokens and not session.costs.covers
    timed = [n for n in CALIBRATION_SIZES if n not in session.costs.missing()]
    assert timed and session.curve.spent < 0.02 * 11
    batches = []
    model.batch_started.clear()
    original = model.eval
    model.eval = lambda tokens, n_logits=1: (batches.append(len(tokens)), original(tokens, n_logits))[1]
    assert session.measure_ahead() == "missing" and session.costs.covers
    assert not (set(timed) - {1}) & set(batches)  # the sizes timed before were not timed again
    assert saved_curve("a fake with a key") is not None


def test_a_measurement_keeps_to_its_budget_and_says_how_far_it_got():
    model = SlowDecodes()
    session = ChatSession(model, decode=DecodeOptions(drafter="auto", k=8, max_tokens=20))
    heard = []
    session.on_measure(heard.append)
    started = time.perf_counter()
    assert session.measure_ahead(budget_s=0.15) == "missing"
    assert time.perf_counter() - started < 0.15 + 0.02 * 4 * 4  # the size under way ends, no other starts
    assert heard[0].done == 0 and heard[-1].ended and 0 < heard[-1].done < heard[-1].total
    assert [s.done for s in heard[1:-1]] == list(range(1, heard[-1].done + 1))
    assert all(s.seconds_left > 0 for s in heard[1:-1])  # an estimate for the sizes left


def test_the_context_shown_while_a_curve_is_measured_is_the_conversation_s():
    """A measurement decodes junk after the conversation and rolls it back:
    the count the status bar shows stays the conversation's meanwhile."""
    model = SlowDecodes()
    session = ChatSession(model, decode=DecodeOptions(drafter="auto", k=8, max_tokens=20))
    session.reply("hello")
    used = session.context_used
    seen = []  # after each decode: (the count shown, the tokens in the cache)
    original = model.eval
    model.eval = lambda tokens, n_logits=1: (
        original(tokens, n_logits),
        seen.append((session.context_used, len(model.tokens))),
    )[0]
    session.costs.seconds.clear()  # due again: missing
    assert session.measure_ahead(budget_s=0.1) == "missing"
    assert used > 0 and any(cached > used for _, cached in seen)  # junk was in the cache
    assert {shown for shown, _ in seen} == {used}
    assert session.context_used == used == len(model.tokens)


def test_closing_stops_a_measurement_between_replies():
    model = SlowDecodes()
    session = ChatSession(model, decode=DecodeOptions(drafter="auto", k=8, max_tokens=20))
    ahead, result = measuring_ahead(session, model)
    session.close()
    ahead.join(5)
    assert not ahead.is_alive() and result == ["missing"] and not session.costs.covers


def test_a_curve_kept_before_auto_drafted_past_16_is_measured_again():
    """auto may draft 64 tokens (65 positions): a curve that stops at 17 is
    measured again, so no k auto may pick is priced by extrapolation."""
    save_curve("a fake with a key", {n: 0.001 * n for n in (1, 2, 4, 8, 16, 17)})
    session = ChatSession(keyed_model(), decode=DecodeOptions(drafter="auto", k=64, max_tokens=20))
    assert session.curve_due() == "missing"
    assert session.measure_ahead() == "missing"
    assert {24, 32, 33, 48, 64, 65} <= set(saved_curve("a fake with a key")) and session.curve_due() is None


def test_a_gpu_measures_every_size_and_a_cpu_the_bends():
    assert calibration_sizes({"gpu_layers": 29, "layers": 29}) == tuple(range(1, 66))
    assert calibration_sizes({"gpu_layers": 0, "layers": 29}) == CALIBRATION_SIZES
    assert calibration_sizes(None) == CALIBRATION_SIZES and CALIBRATION_SIZES[-1] == 65 == K_MAX + 1


def test_a_size_the_context_cannot_hold_is_not_asked_for_again():
    model = FakeModel()
    model.n_ctx = 24  # room for 17 positions after the step before, not for 24
    costs = CostModel()
    costs.calibrate(model)
    assert costs.covers and max(costs.sizes) == 17 and 24 not in costs.seconds


def test_a_small_context_measures_what_it_holds_once():
    model = keyed_model()
    model.n_ctx = 24  # room for 17 positions after the step before, not for 24
    session = ChatSession(model, decode=DecodeOptions(drafter="auto", k=32, max_tokens=4))
    assert session.measure_ahead() == "missing"
    assert session.curve_due() is None and session.measure_ahead() is None  # not measured again after each reply


# --- what a kept curve may say of itself -------------------------------------------------


def flat_curve() -> dict[str, float]:
    """A curve planted in the data folder: every size as cheap as one step, so auto drafts as long as it may."""
    return {str(n): 0.001 for n in CALIBRATION_SIZES}


def plant_curve(entry: dict) -> None:
    paths.data_dir().mkdir(parents=True, exist_ok=True)
    (paths.data_dir() / "cost-curves.json").write_text(json.dumps({"a fake with a key": entry}))


YEAR_2100 = 4102444800.0


@pytest.mark.parametrize(
    "dates", [{"measured": YEAR_2100, "saved": YEAR_2100}, {"saved": YEAR_2100}, {}], ids=["2100", "saved 2100", "none"]
)
def test_a_curve_dated_in_the_future_or_not_at_all_is_measured_again(dates):
    plant_curve({"seconds": flat_curve(), **dates})
    assert measured_at("a fake with a key") is None  # a date in the future is no date
    session = ChatSession(keyed_model(), decode=DecodeOptions(drafter="auto", k=8, max_tokens=20))
    assert session.cost_curve()["from"] == "none" and session.curve_due() == "missing"
    assert session.measure_ahead() == "missing"
    assert time.time() - 60 < measured_at("a fake with a key") <= time.time()


def test_a_kept_curve_that_live_rounds_of_earlier_sessions_disagree_with_is_measured_again():
    """Each `specchat run` sees a few rounds; together they judge the curve by
    the drift rule, as one long chat would, whatever the curve's date says."""
    plant_curve({"seconds": flat_curve(), "measured": time.time() - 60})
    for _ in range(2):  # two short sessions, each seeing a verify of 17 positions cost 6 steps, not 1
        session = ChatSession(keyed_model(), decode=DecodeOptions(drafter="auto", k=16, max_tokens=20))
        assert session.cost_curve()["from"] == "saved"
        for _ in range(DRIFT_ROUNDS // 2):
            session.costs.observe(17, 0.006)
        session.curve.keep()  # as each turn keeps the curve its rounds refined
    session = ChatSession(keyed_model(), decode=DecodeOptions(drafter="auto", k=16, max_tokens=20))
    assert session.cost_curve()["from"] == "none" and session.curve_due() == "missing"
    assert session.measure_ahead() == "missing" and saved_curve("a fake with a key")[17] < 0.006  # the fake's own cost


def test_a_kept_curve_that_live_rounds_agree_with_stays():
    plant_curve({"seconds": flat_curve(), "measured": time.time() - 60})
    for _ in range(3):
        session = ChatSession(keyed_model(), decode=DecodeOptions(drafter="auto", k=16, max_tokens=20))
        assert session.cost_curve()["from"] == "saved" and session.curve_due() is None
        for _ in range(DRIFT_ROUNDS):
            session.costs.observe(17, 0.0011)  # within DRIFT of what was measured
        session.curve.keep()


def test_only_the_most_recently_saved_curves_are_kept():
    now = time.time()
    planted = {f"model {i}": {"seconds": flat_curve(), "measured": now - 10_000, "saved": now - 1000 + i}
               for i in range(keptcurve.CURVES_KEPT + 8)}
    planted["a date to come"] = {"seconds": flat_curve(), "saved": YEAR_2100}  # no date: the oldest
    paths.data_dir().mkdir(parents=True)
    (paths.data_dir() / "cost-curves.json").write_text(json.dumps(planted))
    save_curve("a new model", {1: 0.01, 2: 0.015, 4: 0.03})
    kept = json.loads((paths.data_dir() / "cost-curves.json").read_text())
    assert len(kept) == keptcurve.CURVES_KEPT
    assert set(kept) == {"a new model", *(f"model {i}" for i in range(9, keptcurve.CURVES_KEPT + 8))}
