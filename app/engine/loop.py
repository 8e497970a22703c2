"""The speculative decoding loop: draft, verify in one target pass, accept,
commit, roll back, report.

The engine owns the target's KV cache and the committed tokens. Its model
is anything with the driver's shape (`TargetModel`: llama.py's `Model`;
tests use a numpy fake). Every round becomes a `Round` event; a turn ends with
`TurnStats`. Some rounds are plain single-token steps, timed on their own:
the do-nothing arm that measures the baseline on the same turn.

A baseline sample must cost what a step costs in an off-mode stream. On a
GPU it does not right after a batch of another shape: ggml-cuda keys its
CUDA graph by the compute graph and, when the shape changes, runs the next
step without a graph and captures one on the step after (see
`ggml_backend_cuda_graph_compute`, "execute directly until stable again").
So the arm takes its plain steps in runs, and only a plain step that
follows `costs.warmup_steps` plain steps in a row (the warm-up) is *steady*
and counts as a sample (costmodel.warmup_steps: 2 on a GPU, none on the CPU).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from specchat.decoding import kvcache
from specchat.decoding.constraint import Constraint
from specchat.decoding.costmodel import CostModel
from specchat.decoding.sampling import SamplingParams, accept_or_correct, probs, sample
from specchat.decoding.stats import Round, TurnStats, common_prefix, summarize
from specchat.decoding.target import TargetModel
from specchat.drafters import Name
from specchat.drafters.base import Draft, Drafter
from specchat.engine.pieces import PieceDecoder
from specchat.errors import SpecchatError

MIN_SAMPLES = 3  # at least this many baseline samples in a long enough turn
ARM_SAMPLES = 4  # steady samples a do-nothing run takes once it has warmed up


@dataclass
class Turn:
    """One generated reply."""

    tokens: list[int] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    stats: TurnStats = field(default_factory=TurnStats)
    finish: str = ""  # "eos" | "length" | "cancelled" | "context" ("cut": a server's stream ended mid-reply)
    error: str = ""  # why a reply was cut
    drafter_failed: str = ""  # one line: the drafter that failed in this turn and why (the turn went on plainly)
    dropped_turns: int = 0  # old turns dropped to fit the context
    prompt: list[int] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(r.forced_text + r.accepted_text + r.target_text for r in self.rounds)


# What a turn takes besides its text: each round as it is decoded, a flag that
# stops it, and a call while the source is silent (a server's stream).
OnRound = Callable[[Round], None] | None
Cancel = threading.Event | None
OnIdle = Callable[[], None] | None
OnPrefill = Callable[[int, int], None] | None  # (tokens read, of): as a long prompt is read
PREFILL_CHUNK = 256  # tokens a long prompt is read in, where its progress is followed


class Engine:
    """Speculative decoding on one target model."""

    def __init__(
        self,
        target: TargetModel,
        drafter: Drafter,
        *,
        k: int,
        sampling: SamplingParams = SamplingParams(),
        baseline_every: int = 8,
        costs: CostModel | None = None,
        constraint: Constraint | None = None,
        llama_clock: Callable[[], float] | None = None,
    ) -> None:
        self.target = target
        # Seconds spent inside llama.cpp so far, target and draft model: what
        # a turn's decode time leaves is specchat's own.
        self.llama_clock = llama_clock
        # The grammar the reply must match, if any: it masks the target's choice
        # at every verified position and follows the committed tokens.
        self.constraint = constraint or Constraint()
        self.costs = costs or CostModel()  # this machine's verify cost curve, refined every round
        self.drafter = drafter
        self.k = k
        self.sampling = sampling
        self.baseline_every = baseline_every
        self.rng = np.random.default_rng(sampling.seed)
        self._next_drafter: Drafter | None = None
        self._sitting_out: tuple[Drafter, Drafter] | None = None  # (a drafter that failed, the plain one standing in)
        self._lock = threading.Lock()
        self.on_prefill: OnPrefill = None  # told how a long prompt's reading goes (the chat's bar, run's stderr)
        self.failure = ""  # the current turn's drafter_failed

    # --- control from other threads -----------------------------------------

    def switch_drafter(self, drafter: Drafter) -> None:
        """Takes effect from the next round, also mid-reply."""
        with self._lock:
            self._next_drafter = drafter

    @property
    def next_drafter(self) -> Drafter:
        """The drafter the next round will use (a switch asked for, or the current one)."""
        with self._lock:
            return self._next_drafter or self.drafter

    def _take_switch(self, context: Sequence[int]) -> bool:
        """Apply a pending switch; True if the drafter changed (and has begun)."""
        with self._lock:
            new, self._next_drafter = self._next_drafter, None
        if new is None or new is self.drafter:
            return False
        self.drafter = new
        self._drafter_hook(new.begin, context)
        return True

    # --- the KV cache -----------------------------------------------------------

    def prefill(self, prompt: Sequence[int], cancel: Cancel = None) -> tuple[int, float]:
        """Make the target's KV hold prompt[:-1], reusing the common prefix.
        The last prompt token stays pending: the first round evaluates it.
        Returns (tokens evaluated, seconds)."""
        t0 = time.perf_counter()
        n = prefill(self.target, prompt, self.on_prefill, cancel)
        return n, time.perf_counter() - t0

    # --- one turn ---------------------------------------------------------------

    def generate(
        self,
        prompt: Sequence[int],
        max_tokens: int,
        on_round: OnRound = None,
        cancel: Cancel = None,
    ) -> Turn:
        # Greedy without a grammar reads only argmax tokens: a GPU then takes
        # them in llama.cpp's graph and copies no logits rows (llama.py).
        self.target.argmax_only(self.sampling.greedy and not self.constraint.on)
        n_prefill, t_prefill = self.prefill(prompt, cancel)
        context = list(prompt)  # committed tokens; the last one is pending (not in KV)
        self.constraint.begin()  # a constrained reply starts at the grammar's root
        # A switch asked for between turns and the drafter's own prefill both
        # happen here, before the decode clock starts. Nothing is measured
        # first: a cost curve not measured yet prices by its prior (costmodel).
        self.failure = ""
        self._back_from_sitting_out()  # a turn that failed after its drafter did (the target erred) ended without it
        if not self._take_switch(context):
            self._drafter_hook(self.drafter.begin, context)
        turn = Turn()
        pieces = PieceDecoder(self.target)
        arm = _Arm(self.baseline_every)
        i = 0
        clock = self.llama_clock
        llama_start = clock() if clock else None
        t_start = time.perf_counter()
        while len(turn.tokens) < max_tokens:
            if cancel is not None and cancel.is_set():
                turn.finish = "cancelled"
                break
            if len(context) + self.k + 1 > self.target.n_ctx:
                turn.finish = "context"
                break
            self._take_switch(context)
            started = time.perf_counter()
            arm_step = self.drafter.name != Name.OFF and arm.wants_step(i)
            r = self._round(context, max_tokens - len(turn.tokens), arm_step, arm.plain_run)
            arm.record(r)
            r.forced_text = pieces.feed(r.accepted[: r.forced])
            r.accepted_text = pieces.feed(r.accepted[r.forced :])
            r.target_text = pieces.feed([] if r.target is None else [r.target])
            r.rejected_text = self.target.detokenize(r.rejected)
            new = r.committed
            turn.tokens += new
            turn.rounds.append(r)
            context += new
            if new:
                self._drafter_hook(self.drafter.observe, new)
            if on_round is not None:
                on_round(r)
            r.t_round = time.perf_counter() - started
            i += 1
            if r.eos:
                turn.finish = "eos"
                break
        else:
            turn.finish = "length"
        turn.drafter_failed = self.failure
        self._back_from_sitting_out()
        if turn.rounds:  # the reply's last bytes, if they were held back
            last = turn.rounds[-1]
            if last.target is None:
                last.accepted_text += pieces.flush()
            else:
                last.target_text += pieces.flush()
        t_decode = time.perf_counter() - t_start
        t_llama = None if clock is None or llama_start is None else clock() - llama_start
        turn.stats = summarize(turn.rounds, t_decode, n_prefill, t_prefill, t_llama)
        return turn

    def _round(self, context: list[int], room: int, arm: bool, plain_run: int) -> Round:
        """Draft, verify [pending, d1..dk] in one pass, accept, commit, roll back.
        plain_run: how many plain steps came right before this round."""
        t0 = time.perf_counter()
        k = min(self.k, self.target.max_draft, room - 1)
        draft = Draft() if arm else self._drafter_hook(self.drafter.propose, context, k) or Draft()
        draft.tokens = draft.tokens[: max(0, room - 1)]
        priced = self.costs.step(len(draft.tokens) + 1) if draft.tokens else 0.0
        t1 = time.perf_counter()
        n_kv = len(context) - 1  # KV holds everything but the pending token
        self.target.eval([context[-1]] + draft.tokens, n_logits=len(draft.tokens) + 1)
        accepted, target, eos = self._accept(draft)
        # KV now holds pending + all drafts; keep pending + the accepted ones.
        self.target.truncate(n_kv + 1 + len(accepted))
        t2 = time.perf_counter()
        steady = not draft.tokens and plain_run >= self.costs.warmup_steps
        if draft.tokens or steady:
            self.costs.observe(len(draft.tokens) + 1, t2 - t1)
        else:
            self.costs.observe_warming(t2 - t1)
        if draft.tokens and not arm:
            self._drafter_hook(self.drafter.settle, draft, len(accepted))
        # Drafts after an end-of-generation token were never judged: drop them.
        rejected = draft.tokens[len(accepted) :] if target is not None else []
        return Round(
            accepted=accepted,
            rejected=rejected,
            target=None if eos else target,
            drafter=draft.source or self.drafter.name,
            mode=self.drafter.name,
            choice=self.drafter.choice,
            plain=not draft.tokens,
            forced=min(draft.forced, len(accepted)),
            arm=arm,
            steady=steady,
            t_draft=t1 - t0,
            t_verify=t2 - t1,
            priced=priced,
            eos=eos,
        )

    # --- a drafter that fails --------------------------------------------------

    def _drafter_hook(self, hook: Callable, *args):
        """hook(*args), one of the drafter's; where it raises, the drafter sits
        out the rest of the turn (plain steps stand in: the reply goes on) and
        the turn keeps one line naming it and the error. None then."""
        try:
            return hook(*args)
        except Exception as err:  # a drafter's bug must not take the reply with it
            failed = self.drafter
            why = err.one_line() if isinstance(err, SpecchatError) else f"{type(err).__name__}: {err}"
            self.failure = f"drafter {failed.name!r} failed ({why}); this reply went on without drafting"
            self.drafter = Drafter()
            self._sitting_out = (failed, self.drafter)
            return None

    def _back_from_sitting_out(self) -> None:
        """The turn is over: a drafter that failed in it drafts again from the
        next (its begin re-reads the conversation), unless the user switched since."""
        if self._sitting_out is not None:
            failed, stand_in = self._sitting_out
            self._sitting_out = None
            if self.drafter is stand_in:
                self.drafter = failed

    def _accept(self, draft: Draft) -> tuple[list[int], int | None, bool]:
        """Longest agreeing prefix (greedy) or exact rejection sampling.
        Returns (accepted drafts, target token or None, end of generation).
        Under a constraint the target chooses among the tokens the grammar
        allows at each position, and the grammar follows each accepted token."""
        sp = self.sampling
        accepted: list[int] = []
        for j, d in enumerate(draft.tokens):
            if sp.greedy:
                t = self._argmax(j)
                correction = None if t == d else t
            else:
                p = self._probs(j)
                q = draft.q[j] if draft.q is not None else None
                _, correction = accept_or_correct(p, d, q, self.rng)  # a correction exactly where d is refused
            if correction is not None:
                return accepted, self._commit(correction), self.target.is_eog(correction)
            if self.target.is_eog(d):  # the turn ends inside the draft
                return accepted, None, True
            accepted.append(self._commit(d))
        j = len(draft.tokens)  # full accept: the bonus token
        t = self._argmax(j) if sp.greedy else sample(self._probs(j), self.rng)
        return accepted, self._commit(t), self.target.is_eog(t)

    def _argmax(self, j: int) -> int:
        if self.constraint.on:
            return self.constraint.argmax(self.target.logits(j))
        return self.target.argmax(j)

    def _probs(self, j: int) -> np.ndarray:
        logits = self.target.logits(j)
        return probs(self.constraint.mask(logits) if self.constraint.on else logits, self.sampling)

    def _commit(self, t: int) -> int:
        """t joins the reply: the grammar moves past it."""
        if self.constraint.on:
            self.constraint.commit(t, self.target.piece(t), self.target.is_eog(t))
        return t


class _Arm:
    """When the do-nothing arm takes its forced plain steps.

    Steady plain steps are the baseline's samples, whoever took them (a
    drafter with nothing to propose takes plain steps too). When the turn has
    fewer than one sample per `every` rounds, or fewer than MIN_SAMPLES, a run
    of forced plain steps starts and lasts until it has taken ARM_SAMPLES
    steady ones (or the missing minimum), after its warm-up steps where needed."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.samples = 0  # steady plain steps so far
        self.plain_run = 0  # plain steps in a row right before the next round
        self.owed = 0  # steady samples the current forced run still has to take

    def wants_step(self, i: int) -> bool:
        if self.every <= 0:
            return False
        if not self.owed and i >= 2 and (self.samples < MIN_SAMPLES or self.samples * self.every < i):
            self.owed = MIN_SAMPLES - self.samples if self.samples < MIN_SAMPLES else ARM_SAMPLES
        return self.owed > 0

    def record(self, r: Round) -> None:
        self.plain_run = self.plain_run + 1 if r.plain else 0
        if r.steady:
            self.samples += 1
            if r.arm:
                self.owed -= 1


def prefill(model, prompt: Sequence[int], tell: OnPrefill = None, cancel: Cancel = None) -> int:
    """Make model's KV hold prompt[:-1] (the last token stays pending).
    With `tell`, a prompt with more than PREFILL_CHUNK tokens to read is
    read a chunk at a time, `tell(read, of)` after each, and a set `cancel`
    stops it between chunks. Returns how many tokens were evaluated."""
    wanted = prompt[:-1]
    start = common_prefix(model.tokens, wanted)
    if tell is None or len(wanted) - start <= PREFILL_CHUNK:
        return kvcache.sync(model, wanted, logits=False)
    fed = 0
    for end in range(start + PREFILL_CHUNK, len(wanted) + PREFILL_CHUNK, PREFILL_CHUNK):
        if cancel is not None and cancel.is_set():
            break
        fed += kvcache.sync(model, wanted[: min(end, len(wanted))], logits=False)
        tell(min(end, len(wanted)) - start, len(wanted) - start)
    return fed
