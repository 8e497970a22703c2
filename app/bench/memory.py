"""`specchat bench --suites memory`: questions asked again, drafted from the
memory of their first answer.

Each prompt is answered once (drafting off): that reply is what the memory
holds, as a history would hold it. Then it is asked again three ways (WAYS):
- `new`: the same text in a new conversation;
- `one-word`: with one word changed (the suite's `changed`; for `--prompts`,
  `one_word_changed`), what editing and resending the message does;
- `regenerate`: the first answer generated again at temperature 0.7.
Each way decodes with drafting off (A), then with each drafter (B), and
before every run the memory is emptied and given the first answer alone, so
no run drafts from another run's reply. The report gives, per way and
drafter, the median over prompts of α and of the speedup (B's tok/s over
A's, decode only), and whether greedy output stayed the same as off's.
"""

from __future__ import annotations

import re
import statistics
import tomllib
from dataclasses import dataclass
from importlib import resources

from rich.console import Console
from rich.table import Table

from specchat.bench.report import write_json
from specchat.bench.suites import load_prompts, load_suite
from specchat.drafters import Name
from specchat.engine.loop import Turn
from specchat.errors import SpecchatError
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions, LoadOptions
from specchat.textsafe import safe_text

WAYS = ("new", "one-word", "regenerate")
DRAFTERS = (Name.NGRAM, Name.MEMORY, Name.AUTO)
REGENERATE_TEMP = 0.7


@dataclass(frozen=True)
class Asked:
    """A prompt of the suite and its one-word variant."""

    id: str
    text: str
    changed: str


def load(prompts: str | None) -> list[Asked]:
    """The packaged memory suite, or the user's own prompts (`--prompts`)."""
    if prompts:
        return [Asked(p.id, p.text, one_word_changed(p.text)) for p in load_prompts(prompts).prompts]
    path = resources.files("specchat.bench").joinpath("suites", "memory.toml")
    variants = {p["id"]: p.get("changed") for p in tomllib.loads(path.read_text("utf-8"))["prompt"]}
    suite = load_suite(str(path))
    return [Asked(p.id, p.text, variants.get(p.id) or one_word_changed(p.text)) for p in suite.prompts]


def one_word_changed(text: str) -> str:
    """The text with the last word of four letters or more in its first line
    replaced: "that", or "this" where the word was "that"."""
    first = text.split("\n", 1)[0]
    words = list(re.finditer(r"[A-Za-z]{4,}", first))
    if not words:
        return text + " again"
    w = words[-1]
    new = "this" if w.group().lower() == "that" else "that"
    return text[: w.start()] + new + text[w.end() :]


def again(session: ChatSession, asked: Asked, first: str, way: str, drafter: str) -> Turn:
    """One second answer: the memory holds the first answer alone."""
    session.set_memory(False)  # emptied: no run drafts from the runs before it
    session.set_memory(True)
    session.remember([(asked.id, asked.text, first)])
    if way == "regenerate":
        session.replace_messages([{"role": "user", "content": asked.text}, {"role": "assistant", "content": first}])
        with session.using(drafter, baseline_every=0, temp=REGENERATE_TEMP):
            return session.regenerate()
    session.clear()
    with session.using(drafter, baseline_every=0):
        return session.reply(asked.text if way == "new" else asked.changed)


def measure(session: ChatSession, asked: list[Asked], drafters=DRAFTERS, progress=None) -> list[dict]:
    """Every run: the first answers, then the second answers, off (A) before each drafter (B)."""
    runs: list[dict] = []
    for a in asked:
        session.set_memory(False)
        session.clear()
        with session.using(Name.OFF, baseline_every=0):
            first = session.reply(a.text).text
        for way in WAYS:
            off: Turn | None = None
            for drafter in (Name.OFF, *drafters):
                if progress is not None:
                    progress(f"memory · {a.id} · {way} · {drafter}")
                turn = again(session, a, first, way, drafter)
                off = off or turn
                runs.append(_run(a.id, way, drafter, turn, off))
    return runs


def _run(prompt: str, way: str, drafter: str, turn: Turn, off: Turn) -> dict:
    s = turn.stats
    greedy = way != "regenerate"
    return {
        "prompt": prompt,
        "way": way,
        "drafter": drafter,
        "tokens": s.tokens,
        "alpha": s.alpha,
        "tok_s": s.tok_s,
        "off_tok_s": off.stats.tok_s,
        "speedup": s.tok_s / off.stats.tok_s if off.stats.tok_s else None,
        "memory_accepted": s.memory_accepted,
        "identical": turn.tokens == off.tokens if greedy else None,
    }


def summary(runs: list[dict]) -> list[dict]:
    """Per way and drafter: medians over the prompts."""
    rows = []
    for way in WAYS:
        for drafter in dict.fromkeys(r["drafter"] for r in runs if r["drafter"] != Name.OFF):
            mine = [r for r in runs if r["way"] == way and r["drafter"] == drafter]
            if not mine:
                continue
            speedups = [r["speedup"] for r in mine if r["speedup"] is not None]
            same = [r["identical"] for r in mine if r["identical"] is not None]
            rows.append(
                {
                    "way": way,
                    "drafter": drafter,
                    "prompts": len(mine),
                    "alpha": statistics.median(r["alpha"] for r in mine),
                    "speedup": statistics.median(speedups) if speedups else None,
                    "memory_share": sum(r["memory_accepted"] for r in mine) / max(1, sum(r["tokens"] for r in mine)),
                    "identical": all(same) if same else None,
                }
            )
    return rows


def table(rows: list[dict], title: str) -> Table:
    t = Table(title=safe_text(title))
    for col in ("asked again", "drafter", "α", "speedup", "from memory", "same as off"):
        t.add_column(col, justify="left" if col in ("asked again", "drafter") else "right")
    for r in rows:
        same = "–" if r["identical"] is None else ("yes" if r["identical"] else "NO")
        speedup = "–" if r["speedup"] is None else f"{r['speedup']:.2f}×"
        t.add_row(r["way"], r["drafter"], f"{r['alpha']:.2f}", speedup, f"{r['memory_share'] * 100:.0f}%", same)
    return t


def run_command(
    suites: list[str], loading: LoadOptions, prompts: str | None, max_tokens: int, json_file: str | None
) -> int:
    """`specchat bench --suites memory`, on the pair `loading` names. Returns the exit code."""
    from specchat import checks
    from specchat.session.loader import open_session

    if suites != ["memory"]:
        raise SpecchatError("the memory suite runs on its own", hint="pass --suites memory alone", code=2)
    if json_file:
        checks.output_file(json_file, "--json", inputs=(prompts,))
    asked = load(prompts)
    status = Console(stderr=True, highlight=False)
    with status.status("loading the pair") as shown:
        session = open_session(loading, DecodeOptions(Name.OFF, baseline_every=0, max_tokens=max_tokens))
        try:
            runs = measure(session, asked, progress=shown.update)
        finally:
            session.close()
    rows = summary(runs)
    title = f"specchat bench · memory · {session.pair} · max {max_tokens} tokens · median over {len(asked)} prompts"
    Console(highlight=False).print(table(rows, title))
    if json_file:
        report = {"schema": 1, "suite": "memory", "pair": session.pair, "rows": rows, "runs": runs}
        write_json(report, json_file)
    return 0
