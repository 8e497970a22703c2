"""`specchat bench`: every drafter against plain decoding, on this machine.

One pair is loaded once. For each prompt of each suite, drafting off (A)
decodes once, then every configuration (drafter, k) decodes the same prompt
(B), so each configuration alternates with off prompt by prompt and drift in
the machine's speed hits both alike. A bare greedy loop on the driver (no
engine) runs the same way, as a reference row that shows the engine's own
cost. The runs of one cycle share the prompt's KV cache (each decodes at the
same context); the timings exclude prefill.

Besides the runs, bench measures the target's verify cost curve (one decode
of 1..K+1 positions at a realistic context), turns it into the α each
drafter needs to break even here, and times the n-gram proposal at a 32k
context. scorecard.py does the arithmetic and the output.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from specchat import checks
from specchat.bench import scorecard
from specchat.bench.measure import (
    bare_greedy,
    bare_stats,
    file_facts,
    machine_facts,
    measure_cost_curve,
    peak_rss_mb,
    time_ngram_proposals,
)
from specchat.bench.plan import Plan, items, make_plan
from specchat.bench.public import DATASETS
from specchat.bench.report import show, write_json
from specchat.bench.scorecard import OFF, REFERENCE, CostCurve, Run
from specchat.bench.suites import Prompt, Suite
from specchat.decoding.sampling import SamplingParams
from specchat.decoding.schema import check_reply
from specchat.decoding.stats import TurnStats, first_difference, position_counts
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions, LoadOptions
from specchat.textsafe import safe_text

WIDE = 160  # output width when stdout is not a terminal


# --- the bench ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """One turn as a run asks it: the message, the conversation before it
    (user and assistant messages), and which turn of its conversation it is
    (None: a prompt of one turn)."""

    text: str
    history: tuple[dict, ...] = ()
    turn: int | None = None

    def __hash__(self) -> int:  # the history's messages are dicts: hash their text
        return hash((self.text, tuple((m["role"], m["content"]) for m in self.history), self.turn))


class Bench:
    """Runs a plan on an open session and keeps every run."""

    def __init__(self, session: ChatSession, plan: Plan, console: Console | None = None) -> None:
        self.session = session
        self.plan = plan
        self.console = console  # None: no progress display
        self.greedy = session.status().greedy
        self.runs: list[Run] = []
        self.curve: CostCurve | None = None
        self.ngram: dict | None = None
        self.interrupted = False
        # Asked before each run and at each round: why to stop now (a check
        # whose machine is too busy, or past its time), or None; why it stopped.
        self.stop: Callable[[], str | None] | None = None
        self.stopped: str | None = None
        self.started = time.time()
        self.wall_s = 0.0
        self.load_average: dict[str, list[float]] = {"start": list(os.getloadavg())}
        self._cycles = 0
        self._prompt_cache: dict[Asked, list[int]] = {}

    # --- the whole run -----------------------------------------------------------------

    def run(self) -> None:
        """Measure everything; Ctrl-C stops early and keeps what was measured."""
        t0 = time.perf_counter()
        progress = self._progress()
        try:
            with progress:
                task = progress.add_task("cost curve", total=self.plan.total_runs)
                text = self.real_text()
                self.session.target.argmax_only(self.session.sampling.greedy)  # timed as the greedy runs read rows
                sizes = self.plan.curve_positions or self.plan.max_k + 1
                self._say(f"measuring the cost curve: {sizes} sizes, then {self.plan.total_runs} runs")

                def measured(done: int) -> None:  # the bar moves with each size, not once after them all
                    progress.update(task, description=f"cost curve: {done} of {sizes} sizes timed")

                self.curve = measure_cost_curve(self.session.target, text, sizes, on_size=measured)
                self._check_stop()
                if self.plan.extras:
                    progress.update(task, description="n-gram proposal timing")
                    self.ngram = time_ngram_proposals(text, self.session.drafters.spelling)
                for suite in self.plan.suites:
                    for prompt in suite.prompts:
                        for repeat in range(self.plan.repeats):
                            self._cycle(suite, prompt, repeat, progress, task)
        except KeyboardInterrupt:
            self.interrupted = True
        except _Stopped:
            pass  # self.stopped says why
        self.wall_s = time.perf_counter() - t0
        self.load_average["end"] = list(os.getloadavg())

    def _cycle(self, suite: Suite, prompt: Prompt, repeat: int, progress, task) -> None:
        """One off run (A), then every configuration (B) on the same prompt:
        each configuration alternates with off prompt by prompt, and off is
        decoded once per prompt rather than once per configuration. A
        conversation's later turns are cycles of their own, each asked after
        off's reply to the turn before (greedy B runs replied the same), so
        every run of a turn reads the same conversation."""
        history: list[dict] = []
        for turn, text in enumerate(prompt.turns, 1):
            asked = Asked(text, tuple(history), turn if prompt.followups else None)
            off = self._turn_cycle(suite, prompt, repeat, asked, progress, task)
            history += [{"role": "user", "content": text}, {"role": "assistant", "content": off.text}]

    def _turn_cycle(self, suite: Suite, prompt: Prompt, repeat: int, asked: Asked, progress, task) -> Run:
        """One turn's cycle: off, then each configuration; off's run."""
        self._cycles += 1
        slots = [("A", OFF, 0)] + [("B", drafter, k) for drafter, k in self.plan.configs]
        where = f"{suite.name} · {prompt.id}" + (f" · turn {asked.turn}" if asked.turn else "")
        for slot, name, k in slots:
            label = f"{where} · {slot} {name}{f' k={k}' if k else ''}"
            shown = escape(safe_text(label))  # a suite's name is text, not markup
            progress.update(task, description=shown)
            self._check_stop()

            def moved(tokens: int, shown: str = shown) -> None:  # the bar moves each round, not only each run
                progress.update(task, description=f"{shown} · {tokens} tokens")

            run = self._decode(suite, prompt, repeat, slot, name, k, asked, moved)
            self._check_stop()  # a run that a stop cut short is not kept
            self.runs.append(run)
            progress.advance(task)
            self._log(label, run)
            if slot == "A":
                off = run
            else:
                self._compare(off, run)
        return off

    def _check_stop(self) -> None:
        why = self.stop() if self.stop is not None else None
        if why is not None:
            self.stopped = why
            raise _Stopped

    def _compare(self, a: Run, b: Run) -> None:
        """Greedy output must match the target alone: compare B with its A."""
        if self.greedy:
            b.first_divergence = first_difference(b.tokens, a.tokens)
            b.identical = b.first_divergence is None

    # --- one run -----------------------------------------------------------------------

    def _decode(
        self, suite: Suite, prompt: Prompt, repeat: int, slot: str, drafter: str, k: int, asked: Asked, moved=None
    ) -> Run:
        tokens = self._prompt_tokens(asked)
        k_engine = k or self.plan.max_k  # the A run's k only sizes the reply budget, as B's does
        budget = min(self.plan.max_tokens, self.session.n_ctx - len(tokens) - k_engine - 1)
        run = Run(
            seq=len(self.runs),
            cycle=self._cycles,
            slot=slot,
            suite=suite.name,
            prompt=prompt.id,
            repeat=repeat,
            drafter=drafter,
            k=k if slot == "B" else 0,
            stats=TurnStats(),
            turn=asked.turn,
        )
        # A prompt with a schema is decoded under it in every run, off and the reference included.
        self.session.set_constraint(prompt.constraint)
        if drafter == REFERENCE:
            constraint = self.session.constraint if prompt.constraint else None
            out, t, steps = bare_greedy(self.session.target, tokens, budget, self.session.sampling, constraint)
            run.tokens, run.text = out, self.session.target.detokenize(out)
            run.finish = "length" if len(out) >= budget else "eos"
            run.stats = bare_stats(len(out), t, steps, len(tokens) - 1)
        else:
            turn = self._engine_turn(asked, drafter, k_engine, moved)
            run.tokens, run.text, run.finish, run.stats = turn.tokens, turn.text, turn.finish, turn.stats
            run.offered, run.hits = position_counts(turn.rounds)
        if prompt.constraint is not None:
            run.schema_error = (
                "the reply did not finish" if run.finish != "eos" else check_reply(prompt.constraint, run.text)
            )
            run.valid = run.schema_error is None
        run.peak_rss_mb = peak_rss_mb()
        return run

    def _engine_turn(self, asked: Asked, drafter: str, k: int, moved=None):
        """One engine turn; `moved(tokens)` hears of each round, and a stop
        (self.stop) asked for meanwhile cuts the turn short."""
        s = self.session
        s.replace_messages(list(asked.history))  # the target keeps the prompt's KV from the cycle's previous run
        cancel = threading.Event()
        tokens = 0

        def on_round(r) -> None:
            nonlocal tokens
            tokens += r.n_tokens
            if moved is not None:
                moved(tokens)
            if self.stop is not None and self.stop() is not None:
                cancel.set()

        # The engine begins the drafter (the draft model's prefill included) before its clock starts;
        # auto's cost curve is measured whole before its first run (nothing is measured inside a reply).
        with s.using(drafter, k):
            s.measure_ahead()
            return s.reply(asked.text, on_round, cancel)

    def _prompt_tokens(self, asked: Asked) -> list[int]:
        """The prompt exactly as ChatSession will build it for the conversation so far."""
        if asked not in self._prompt_cache:
            self._prompt_cache[asked] = self.session.prompt_for(asked.text, asked.history)
        return self._prompt_cache[asked]

    def real_text(self) -> list[int]:
        """Tokens of the suites' own text, for the cost curve and the n-gram timing."""
        text = "\n\n".join(t for s in self.plan.suites for p in s.prompts for t in p.turns)
        return self.session.target.tokenize(text, special=False)

    def _log(self, label: str, run: Run) -> None:
        done = f"{len(self.runs)} of {self.plan.total_runs}"
        self._say(f"{done} · {label}: {run.stats.tokens} tokens, {run.stats.tok_s:.1f} tok/s")

    def _say(self, line: str) -> None:
        """Where stderr is a file or a pipe (no bar to draw), progress is a line per step."""
        if self.console is not None and not self.console.is_terminal:
            self.console.print(Text(safe_text(line)), soft_wrap=True)

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("·"),
            TimeRemainingColumn(),  # from the runs so far
            TextColumn("left"),
            console=self.console,
            transient=True,
            disable=self.console is None,
        )

    # --- the report ----------------------------------------------------------------------

    def report(self, pair: dict | None = None, command: str | None = None) -> dict:
        """Every figure, as one JSON-ready dict."""
        return {
            "schema": 1,
            "command": command,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started)),
            "wall_s": self.wall_s,
            "interrupted": self.interrupted,
            "stopped": self.stopped,
            "runs_done": len(self.runs),
            "runs_planned": self.plan.total_runs,
            "settings": self.plan.to_dict(),
            "machine": {**machine_facts(self.session), "load_average": self.load_average},
            "pair": pair or {"name": self.session.pair},
            "suites": {
                s.name: [
                    {
                        "id": p.id,
                        "text": p.text,
                        **({"followups": list(p.followups)} if p.followups else {}),
                        **({"schema": p.constraint.source} if p.constraint else {}),
                    }
                    for p in s.prompts
                ]
                for s in self.plan.suites
            },
            "data": {s.name: s.description for s in self.plan.suites if s.name.split("/")[0] in DATASETS},
            "cost_curve": self.curve.to_dict() if self.curve else None,
            "ngram_proposal": self.ngram,
            "rows": scorecard.rows(self.runs),
            "off_spread": scorecard.off_spread(self.runs),
            "overall": scorecard.overall(self.runs),
            "break_even": scorecard.break_even(self.curve, self.runs) if self.curve else [],
            "runs": [r.to_dict() for r in self.runs],
        }


# --- the command ---------------------------------------------------------------------------------


class _Stopped(Exception):
    """Bench.stop asked the bench to end here."""


def open_bench_session(plan: Plan, load: LoadOptions) -> tuple[ChatSession, dict]:
    """Load the pair once: (session, pair facts for the report)."""
    from specchat.session.loader import open_session, pair_files

    label, t_path, d_path = pair_files(load.pair, load.target, load.draft)
    decode = DecodeOptions(
        OFF, plan.max_k, SamplingParams(temp=plan.temp), baseline_every=0, max_tokens=plan.max_tokens
    )
    session = open_session(load, decode)
    session.set_memory(False)  # no run drafts from the replies of the runs before it
    return session, {"name": label, "target": file_facts(t_path), "draft": file_facts(d_path)}


def run_command(
    *,
    load: LoadOptions,
    prompts: str | None = None,
    suites: str,
    drafters: str,
    ks: str,
    max_tokens: int,
    repeats: int,
    temp: float,
    json_file: str | None,
    sample: int | None = None,
    categories: str | None = None,
) -> int:
    """`specchat bench` (but `--suites memory`: memory.run_command); returns
    the exit code (130 when stopped with Ctrl-C)."""
    if json_file:
        checks.output_file(json_file, "--json", inputs=(prompts, *[s for s in items(suites) if s.endswith(".toml")]))
    plan = make_plan(suites, drafters, ks, max_tokens, repeats, temp, prompts, sample, categories)
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=WIDE)  # a file or pipe gets the whole table
    status = Console(stderr=True, highlight=False)
    with status.status("loading the pair"):
        session, pair_info = open_bench_session(plan, load)
    try:
        bench = Bench(session, plan, console=status)
        bench.run()
        report = bench.report(pair_info, command="specchat " + " ".join(sys.argv[1:]))
    finally:
        session.close()
    show(report, console)
    if json_file:
        write_json(report, json_file)
        console.print(Text(safe_text(f"wrote {json_file}"), style="dim"))
    return 130 if report["interrupted"] else 0
