"""The last verdict of `specchat models check` on each pair: one line per
drafter ("pays here (1.4× on code-edit)", "break-even", "loses here …") and
when it was measured, kept in verdicts.json in the data dir (written
atomically) for `specchat models` and the chat's pair list to show.
"""

from __future__ import annotations

from specchat import paths
from specchat.store.files import read_json, write_json

VERDICTS_FILE = "verdicts.json"


def _path():
    return paths.data_dir() / VERDICTS_FILE


def load() -> dict[str, dict]:
    """Every pair's last verdict: {pair: {"checked_at": …, "drafters": {name: line}}}."""
    data = read_json(_path()) or {}
    pairs = data.get("pairs")
    return {name: v for name, v in pairs.items() if _valid(v)} if isinstance(pairs, dict) else {}


def _valid(v: object) -> bool:
    return (
        isinstance(v, dict)
        and isinstance(v.get("checked_at"), str)
        and isinstance(v.get("drafters"), dict)
        and all(isinstance(x, str) for x in v["drafters"].values())
    )


def save(pair: str, checked_at: str, drafters: dict[str, str]) -> None:
    """Record a pair's verdict, replacing its last one."""
    pairs = load()
    pairs[pair] = {"checked_at": checked_at, "drafters": drafters}
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"pairs": pairs})


def load_summaries() -> dict[str, str]:
    """Each checked pair's verdict in one line:
    "checked 2026-12-01: draft pays here (1.4× on code-edit) · ngram break-even"."""
    return {name: _summary(v) for name, v in load().items()}


def _summary(v: dict) -> str:
    lines = " · ".join(f"{name} {line}" for name, line in v["drafters"].items())
    return f"checked {v['checked_at'][:10]}: {lines}"
