"""Auto: before each round, pick the drafter and draft length that maximise
expected tokens per second — a plain step (k = 0) included.

Expected tokens come from live acceptance estimates (decayed): per position
for the draft model; for n-gram and memory copies one rate per match length,
shared by every position, because a copied span goes on agreeing until the copy ends, so
what short drafts learn also prices long ones (a match in the reply's own
words has rates of its own: a reply parts from itself far sooner than from
the question or an earlier turn). A reply that has copied one
place since its first token (a function or a file returned whole) has a
rate of its own, taken where it is the higher: each longer match would
otherwise start again from its length's prior. And where this reply's
copies miss more often than they were priced to, every copy's chance of a
miss is raised to match (`CopyTrust`): a reply that restates another in
new words parts from what it copies every few words, whatever the match
length. Costs come from the
engine's measured cost curve and each drafter's measured cost per token.
So on a CPU where a verify of k+1 positions costs ~k+1 steps, auto drafts
only on strong evidence; where the curve is flat, it drafts freely.

Everything a draft costs is priced, not just its tokens: the draft model's
catch-up on tokens it has not seen (it falls behind while auto takes plain
steps or copies) and, after plain steps, the warm-up steps the stream needs
again after a batch (costmodel's `warming`; CUDA graphs on a GPU). The draft model
is loaded and prefilled in `begin`, before the turn's clock starts, and only
when it could pay here at all; an unloaded model is never an option.
"""

from __future__ import annotations

from collections.abc import Sequence

from specchat.decoding.costmodel import CostModel
from specchat.drafters.base import Draft, Drafter, DraftModelPart, GrammarPart, MemoryPart, NgramPart
from specchat.drafters.memory import MAX_MATCH

EXPLORE_EVERY = 32  # where no option pays, one round in this many tries the best optimistically: one token
MAX_BUCKET = 16  # n-gram matches this long or longer share one estimate
WEAK_MATCH = 3  # a token match shorter than this: the n-gram drafter's text copy is an option too
LINE_PRIOR = 0.9  # a text copy from a line's start that matched one sentence's start
WHOLE_REPLY = 8  # a reply copied from one place since its first token, this long or longer,
WHOLE_PRIOR = 0.97  # is priced on a rate of its own: a function or a file returned whole goes on
# CopyTrust starts from this many misses expected and seen, so a reply's
# first miss where few were expected more than doubles the next copy's
# chance of a miss; the factor stays within TRUST_RANGE (never below 1).
TRUST_WEIGHT = 0.5
TRUST_RANGE = (1.0, 10.0)
# A draft is taken only where it beats a plain step by this much: a plain
# step's price is known, a draft's rests on an estimate (at first, a prior),
# and on a short reply one wrong guess costs more than the reply can win back.
PLAIN_EDGE = 1.1


class Acceptance:
    """Decayed estimates of P(token i accepted | tokens before it accepted)."""

    def __init__(self, prior: float, weight: float = 2.0, decay: float = 0.9, size: int = 64) -> None:
        self.hits = [prior * weight] * size
        self.trials = [weight] * size
        self.decay = decay

    def rate(self, i: int) -> float:
        i = min(i, len(self.hits) - 1)
        return self.hits[i] / self.trials[i]

    def expected_tokens(self, n: int, optimism: float = 0.0, distrust: float = 1.0) -> list[float]:
        """Expected tokens per round for draft lengths 0..n (the +1 is the
        target's own), each position's chance of a miss times `distrust`."""
        out, survive = [1.0], 1.0
        for i in range(n):
            a = 1.0 - min(1.0, (1.0 - self.rate(i)) * distrust)
            survive *= a + optimism * (1.0 - a)
            out.append(out[-1] + survive)
        return out

    def update(self, drafted: int, accepted: int) -> None:
        """Positions up to the first rejection were judged; later ones were not."""
        for i in range(min(accepted + 1, drafted, len(self.hits))):
            self.trials[i] = self.decay * self.trials[i] + 1.0
            self.hits[i] = self.decay * self.hits[i] + (1.0 if i < accepted else 0.0)


class CopyRate(Acceptance):
    """One decayed rate for every position: P(the next drafted token agrees)."""

    def __init__(self, prior: float, weight: float = 4.0, decay: float = 0.9) -> None:
        super().__init__(prior, weight, decay, size=1)

    def update(self, drafted: int, accepted: int) -> None:
        judged = min(accepted + 1, drafted)
        self.trials[0] = self.decay * self.trials[0] + judged
        self.hits[0] = self.decay * self.hits[0] + accepted


class CopyTrust:
    """How this reply's copies fare against the rates they were priced at:
    the factor on every copy's chance of a miss, misses seen over misses
    expected (decayed; TRUST_WEIGHT of each at first, so 1), never below 1.
    The copy rates are one per match length. A copy that agrees goes on to
    longer matches, whose rates learn from it; a copy that misses sends the
    next one to another length, whose rate knows nothing of it. So a reply
    that restates an earlier one for a new question ("As an AI language
    model, I don't have personal opinions" again, then "preferences")
    misses at every length in turn, and this learns it from the first miss.
    Agreement earns no trust beyond the rates': a factor below 1 counted
    the same tokens twice, and a run of agreement ends sooner or later (in
    replays of MT-Bench's replies it drafted 63 tokens after one 15-token
    copy, and 10 agreed)."""

    def __init__(self, weight: float = TRUST_WEIGHT, decay: float = 0.9) -> None:
        self.missed = self.expected = weight
        self.decay = decay

    def factor(self) -> float:
        low, high = TRUST_RANGE
        return min(high, max(low, self.missed / self.expected))

    def update(self, rate: float, drafted: int, accepted: int) -> None:
        """A copy priced at `rate` a token: the positions judged, and whether one missed."""
        judged = min(accepted + 1, drafted)
        self.expected = self.decay * self.expected + judged * (1.0 - rate)
        self.missed = self.decay * self.missed + (1.0 if accepted < drafted else 0.0)


def copy_rates(longest: int = MAX_BUCKET) -> dict[int, CopyRate]:
    """A copy's rate per match length (matches `longest` or longer share one).
    The prior follows how often a copy's first token agreed, by match
    length, on greedy replies of the default pair (tools/copy_agreement.py;
    docs/auto.md): a two-token match is a coin toss, each token more of
    match takes a fifth off the chance of a miss."""
    return {b: CopyRate(prior=1.0 - 0.8125 * 0.8**b) for b in range(1, longest + 1)}


def self_copy_rates() -> dict[int, CopyRate]:
    """copy_rates for a match in the reply itself: a reply that repeats its
    own words (a formula's terms, a list's openings, a phrase it used a
    line before) parts from them far sooner than one that copies the
    question or an earlier turn, at every match length. The prior sits a
    little under that count (tools/copy_agreement.py counts them apart;
    docs/auto.md): a two-token match of the reply's own agrees about a
    third of the time, and each token more of match takes a tenth off the
    chance of a miss."""
    return {b: CopyRate(prior=1.0 - 0.8 * 0.9**b) for b in range(1, MAX_BUCKET + 1)}


def text_rates() -> dict[int, CopyRate]:
    """copy_rates for text copies, and length 0: a line that starts as one
    sentence of the text does (a quote, a bullet) goes on as it, likely."""
    return {0: CopyRate(prior=LINE_PRIOR), **copy_rates()}


class AutoDrafter(Drafter):
    name = "auto"
    needs_costs = True  # the engine calibrates its cost model for us

    def __init__(
        self,
        ngram: NgramPart,
        model: DraftModelPart | None,
        costs: CostModel,
        draft_cost_prior: float = 0.5,  # draft step / target step, before measuring
        grammar: GrammarPart | None = None,
        memory: MemoryPart | None = None,
    ) -> None:
        super().__init__()
        self.ngram, self.model, self.costs, self.grammar = ngram, model, costs, grammar
        self.memory = memory
        # Forced tokens disagree only where the target picks another tokenization
        # of the same text: a high prior, per position like the draft model's.
        self.grammar_acc = Acceptance(prior=0.9)
        self.ngram_acc = copy_rates()  # copies of the question and the turns before it
        self.self_acc = self_copy_rates()  # copies of the reply's own words
        self.text_acc = text_rates()  # the n-gram drafter's text copies (textcopy), on their own
        self.whole_acc = CopyRate(prior=WHOLE_PRIOR)  # token copies whose match reaches the reply's start
        self.memory_acc = copy_rates(MAX_MATCH)  # a question asked again matches all its prompt's tail
        self.model_acc = Acceptance(prior=0.6)
        self.trust = CopyTrust()  # this reply's copies against their prices (every copy family at once)
        self.draft_cost_prior = draft_cost_prior
        self.draft_step: float | None = None  # measured seconds per drafted token
        self.rounds = 0
        self.choice = "off"  # the last decision, for the status bar
        self.chosen: dict[str, int] = {}  # how often each option won
        self.k_hint = 16  # the k of the last proposal (begin has none)
        self.reply_start = 0  # where this turn's reply starts in the context
        self._last: Acceptance | None = None

    # --- keeping the inner drafters in sync -------------------------------------------

    def begin(self, context: Sequence[int]) -> None:
        self.ngram.begin(context)
        if self.memory is not None:
            self.memory.absorb()
        if self.model is not None and (self.model.loaded or self._model_may_pay()):
            self.model.begin(context)  # load and prefill now, not inside a timed round
        self.chosen = {}  # counted per turn
        self.reply_start = len(context)
        self.trust = CopyTrust()  # how copies fare is a reply's own

    def _model_may_pay(self) -> bool:
        """Could the draft model beat a plain step here, judged optimistically?"""
        length, rate = self._best_length(self.model_acc, self.k_hint, self._draft_step(), 0.5)
        return length > 0 and rate > 1.0 / self.costs.step(1)

    def observe(self, committed: Sequence[int]) -> None:
        self.ngram.observe(committed)

    # --- the decision ---------------------------------------------------------------------

    def propose(self, context: Sequence[int], k: int) -> Draft:
        self.rounds += 1
        self.k_hint = max(1, k)
        best = self._best(context, k, 0.0, PLAIN_EDGE)
        trial = best is None and self.rounds % EXPLORE_EVERY == 0
        if trial:
            best = self._best(context, k, 0.5, 1.0)  # a trial is a bet: judged optimistically, with no edge
        if best is None or k <= 0:
            return self._decide("off", None, Draft(source="off"))
        _, source, length, acc, candidate = best
        if trial:
            length = 1  # one judged token updates the estimate, at the cheapest verify
        if source in ("ngram", "grammar", "memory"):
            return self._decide(f"{source} k={length}", acc, Draft(candidate[:length], source=source))
        assert self.model is not None  # _options offers a draft only from a loaded model
        draft = self.model.propose(context, length)
        self._measure_draft(self.model.seconds_per_token)
        return self._decide(f"{self.model.name} k={length}", acc, draft)

    def _best(self, context: Sequence[int], k: int, optimism: float, edge: float):
        """The option that beats a plain step by most, and by `edge` (a factor) at least, or None."""
        best_rate, best = edge / self.costs.step(1), None  # a plain step, and the edge over it
        for option in self._options(context, k, optimism):
            if option[0] > best_rate:
                best_rate, best = option[0], option
        return best

    def _options(self, context: Sequence[int], k: int, optimism: float):
        """(tokens/s, source, length, estimator, candidate tokens) for the best length of each drafter."""
        self.ngram.catch_up(context)
        # Leaving a run of plain steps costs the warm-up steps after the batch.
        warmup = self.costs.warmup_steps * self.costs.warming if self.choice == "off" else 0.0
        distrust = self.trust.factor()  # on every copy's misses
        if self.grammar is not None:
            # The forced run is found before pricing, so its cost is spent either
            # way (it lands in t_draft); a draft of it costs only its verify.
            candidate = self.grammar.propose(context, k).tokens
            length, rate = self._best_length(self.grammar_acc, len(candidate), 0.0, optimism, warmup)
            if length:
                yield rate, "grammar", length, self.grammar_acc, candidate
        hit = self.ngram.lookup(context)
        if hit is not None:
            start, match, _ = hit
            candidate = self.ngram.continuation(start, k)
            if self.ngram.before_edit is not None:
                match = self.ngram.before_edit  # an edit learned just now is priced as a guess
            rates = self.self_acc if start >= self.reply_start else self.ngram_acc
            acc = rates[min(match, MAX_BUCKET)]
            if self._copies_whole(context, match) and self.whole_acc.rate(0) > acc.rate(0):
                acc = self.whole_acc
            length, rate = self._best_length(acc, len(candidate), 0.0, optimism, warmup, distrust)
            if length:
                yield rate, "ngram", length, acc, candidate
        copied = self.ngram.text_copy(context, k) if hit is None or hit[1] < WEAK_MATCH else None
        if copied is not None:  # where the reply spells the text with other tokens
            match, candidate = copied
            acc = self.text_acc[min(match, MAX_BUCKET)]
            length, rate = self._best_length(acc, len(candidate), 0.0, optimism, warmup, distrust)
            if length:
                yield rate, "ngram", length, acc, candidate
        found = self.memory.candidate(context, k) if self.memory is not None else None
        if found is not None:
            match, candidate = found
            acc = self.memory_acc[min(match, MAX_MATCH)]
            length, rate = self._best_length(acc, len(candidate), 0.0, optimism, warmup, distrust)
            if length:
                yield rate, "memory", length, acc, candidate
        if self.model is not None and self.model.loaded:
            fixed = warmup + self.model.catch_up_cost(context)
            length, rate = self._best_length(self.model_acc, k, self._draft_step(), optimism, fixed)
            if length:
                yield rate, self.model.name, length, self.model_acc, None

    def _copies_whole(self, context: Sequence[int], match: int) -> bool:
        """Whether the reply has copied one place since its first token, for
        WHOLE_REPLY tokens or more. The n-gram drafter follows a match back
        36 tokens at most, so past 32 a match that long counts as the whole."""
        written = len(context) - self.reply_start
        return written >= WHOLE_REPLY and match >= min(written, 2 * MAX_BUCKET)

    def _best_length(
        self, acc: Acceptance, n: int, per_token: float, optimism: float, fixed: float = 0.0, distrust: float = 1.0
    ) -> tuple[int, float]:
        """(length, tokens per second) of the best draft of 1..n tokens whose
        verify size was measured, each costing per_token to draft, plus
        `fixed` seconds per round, its misses `distrust` times acc's."""
        expected = acc.expected_tokens(n, optimism, distrust)
        best = (0, 0.0)
        for length in range(1, n + 1):
            if not self.costs.priced(length + 1):
                continue  # an interpolated price: this size was never measured
            rate = expected[length] / (self.costs.step(length + 1) + per_token * length + fixed)
            if rate > best[1]:
                best = (length, rate)
        return best

    def _draft_step(self) -> float:
        if self.draft_step is not None:
            return self.draft_step
        return self.costs.step(1) * self.draft_cost_prior

    def _measure_draft(self, per: float | None) -> None:
        if per is not None:
            self.draft_step = per if self.draft_step is None else self.draft_step + 0.2 * (per - self.draft_step)

    def _decide(self, choice: str, acc: Acceptance | None, draft: Draft) -> Draft:
        self.choice, self._last = choice, acc
        kind = choice.split()[0]
        self.chosen[kind] = self.chosen.get(kind, 0) + 1
        return draft

    def settle(self, draft: Draft, n_accepted: int) -> None:
        super().settle(draft, n_accepted)
        if isinstance(self._last, CopyRate) and len(draft):  # at the rate it was priced at, before it learns
            self.trust.update(self._last.rate(0), len(draft), n_accepted)
        if self._last is not None:
            self._last.update(len(draft), n_accepted)

    def close(self) -> None:
        if self.model is not None:
            self.model.close()
