"""A conversation on a loaded pair: messages, prompt building with the
model's chat template, the engine, and the drafters.

This is the one object the TUI, `specchat run` and `specchat bench` drive,
through its public operations only: turns (reply, regenerate, edit_last),
knobs (set_drafter, set_k), history edits (replace_messages, clear), the
memory (remember, forget, set_memory), a `status()` snapshot, and
`using(...)` for a measured run with other settings. Its methods block while generating; call them from a worker
thread and use `cancel` and `set_drafter`/`set_k` from any thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from specchat.decoding.constraint import Constraint
from specchat.decoding.costmodel import CostModel, Measuring, calibration_sizes, warmup_steps
from specchat.decoding.keptcurve import KeptCurve
from specchat.decoding.sampling import SamplingParams
from specchat.decoding.schema import GrammarSpec
from specchat.decoding.target import K_MAX, K_MIN, MtpHeadModel, TargetModel
from specchat.drafters import NAMES, Name, default_k
from specchat.drafters.memory import PROMPT_TAIL, Memory
from specchat.drafters.registry import Drafters
from specchat.engine.loop import Engine, OnPrefill, Turn
from specchat.errors import SpecchatError
from specchat.llamacpp.grammar import Grammar
from specchat.session.dialogue import Dialogue, SessionStatus
from specchat.session.options import DecodeOptions
from specchat.session.tokencache import TokenCache


def no_drafting(target: TargetModel, pair: str) -> str:
    """Why this pair decodes plainly whatever drafter is asked for ("" where it can draft)."""
    if target.can_roll_back:
        return ""
    return (
        f"{pair or 'the target'} keeps a recurrent state that llama.cpp cannot roll back, "
        "so it cannot take back rejected drafts: decoding plainly"
    )


class TargetSpelling:
    """What the drafters read of the target's tokenizer (drafters.textcopy.Spelling),
    remembered per token: a token's text, and the spaced token the n-gram
    drafter writes where it has seen replies join lines."""

    def __init__(self, target: TargetModel) -> None:
        self.target = target
        self._pieces: dict[int, str] = {}
        self._spaced: dict[int, int | None] = {}

    def piece(self, token: int) -> str:
        if token not in self._pieces:
            self._pieces[token] = self.target.piece(token).decode("utf-8", errors="replace")
        return self._pieces[token]

    def tokenize(self, text: str) -> list[int]:
        return self.target.tokenize(text, special=False)

    def respace(self, token: int) -> int | None:
        """The one token that reads as a space and this token's text (None
        where none does, or the token starts with white space)."""
        if token not in self._spaced:
            text = self.piece(token)
            spaced = self.tokenize(" " + text) if text and not text[0].isspace() else []
            self._spaced[token] = spaced[0] if len(spaced) == 1 else None
        return self._spaced[token]


class ChatSession(Dialogue[Turn]):
    def __init__(
        self,
        target: TargetModel,
        load_draft_model: Callable[[], TargetModel] | None = None,
        decode: DecodeOptions = DecodeOptions(),
        *,
        pair: str = "",
        draft_cost_prior: float = 0.5,
        load_mtp_head: Callable[[], MtpHeadModel] | None = None,
    ) -> None:
        self.target = target
        self.pair = pair
        self.no_drafting = no_drafting(target, pair)
        drafter = Name.OFF if self.no_drafting else decode.drafter
        sampling = decode.sampling
        self.system = decode.system
        self.max_tokens = decode.max_tokens
        self.n_ctx = target.n_ctx
        self.cpu_bound = target.cpu_bound  # decoding keeps every core busy: the chat waits for each batch to show
        super().__init__()
        # Where each model runs (llamacpp.placement): the draft's once it has loaded.
        self.devices: dict[str, dict | None] = {"target": target.device, "draft": None}  # and "mtp" where shipped
        device = self.devices["target"]
        self.costs = CostModel(warmup_steps(device), calibration_sizes(device))  # a GPU: 2 warm-up steps, every size
        self.cost_key = target.cost_key  # what the kept curve and tokens belong to (None: keep none)
        # The curve measured by an earlier session on this model and settings: auto
        # then prices its first round without measuring anything first.
        self.curve = KeptCurve(self.costs, self.cost_key)
        # The target decodes for one caller at a time: a reply, or a measurement
        # between replies (measure_ahead). A reply or closing stops a
        # measurement in progress between two sizes.
        self._decoding = threading.RLock()
        self._refresh_stop = threading.Event()
        self._closing = threading.Event()
        self._context_before: int | None = None  # the chat's context while a measurement decodes junk after it
        self._on_measure: Callable[[Measuring], None] | None = None
        self.constraint = Constraint()  # the grammar replies must match (off until set_constraint)
        # This user's earlier replies, tokenized as this pair reads them; each
        # turn's reply joins it, owned by `memory_owner` (the chat's conversation id).
        self.memory = Memory(lambda text: target.tokenize(text, special=False))
        self.memory_owner: object = None
        self._remembering = threading.Lock()  # held while a fill tokenizes: close waits for it
        shared = (self.costs, draft_cost_prior, self.constraint, self.memory, load_mtp_head, TargetSpelling(target))
        self.drafters = Drafters(load_draft_model, sampling, *shared)
        self.engine = Engine(
            target,
            self.drafters.get(drafter),
            k=own_k(drafter, decode.k),
            sampling=sampling,
            baseline_every=decode.baseline_every,
            costs=self.costs,
            constraint=self.constraint,
            llama_clock=None if target.llama_seconds is None else self._llama_seconds,
        )

    def cost_curve(self) -> dict:
        """Where auto's cost curve came from, and what measuring it took (KeptCurve.report)."""
        return self.curve.report()

    def on_prefill(self, tell: OnPrefill) -> None:
        self.engine.on_prefill = tell

    def on_measure(self, tell: Callable[[Measuring], None] | None) -> None:
        """Be told how a measurement of the cost curve goes (it takes seconds):
        as it starts, after each size, and as it ends."""
        self._on_measure = tell

    def curve_due(self) -> str | None:
        """Why the cost curve should be measured before the next round:
        "missing", "old" (measured over MAX_AGE_S ago) or "drifted" (live
        rounds moved a size past costmodel.DRIFT); None when it need not be,
        or when the next drafter prices nothing by it."""
        if self.no_drafting or not self.engine.next_drafter.needs_costs:
            return None
        return self.curve.due()

    def measure_ahead(self, budget_s: float | None = None) -> str | None:
        """Measure the cost curve now, between replies, if it is due: the chat
        calls this once the pair has loaded and after each reply, while the
        user reads or types; `run` after its reply, for `budget_s` seconds at
        most. Sizes are measured one at a time into the curve auto prices by,
        and a reply sent meanwhile stops it between two sizes, keeping those
        timed: the next pause goes on with the rest, and until then a size
        not measured is priced by what live rounds saw of it, or by the
        prior. A curve due again ("old", "drifted") has every size measured
        afresh the same way. Returns why it measured (curve_due), or None."""
        with self._decoding:
            why = None if self._closing.is_set() else self.curve_due()
            if why is None:
                return None
            until = None if budget_s is None else time.perf_counter() + budget_s
            self._context_before = len(self.target.tokens)
            try:
                self.curve.measure(self.target, self._refresh_stop, until, self._on_measure, afresh=why != "missing")
            finally:
                self._context_before = None
            return why

    def _llama_seconds(self) -> float:
        """Seconds inside llama.cpp so far: the target's and, once loaded, the
        draft model's and the MTP head's (a model that keeps no such clock adds none)."""
        return sum((m.llama_seconds or 0.0 for m in [self.target, *self.drafters.loaded_models()]), 0.0)

    # --- knobs, safe from any thread -----------------------------------------

    @property
    def drafter_name(self) -> str:
        return self.engine.drafter.name

    def set_drafter(self, name: str) -> None:
        if self.no_drafting and name != Name.OFF:
            raise SpecchatError(self.no_drafting, hint="this model decodes with --drafter off only")
        self.engine.switch_drafter(self.drafters.get(name))

    def drafter_names(self) -> list[str]:
        """What ctrl+d cycles through (set_drafter refuses those this pair cannot run)."""
        return [Name.OFF] if self.no_drafting else list(NAMES)

    @property
    def k(self) -> int:
        return self.engine.k

    def set_k(self, k: int | None) -> None:
        """The most a drafter proposes a round; None: the own k of the drafter
        chosen last (it runs from the next round)."""
        self.engine.k = own_k(self.engine.next_drafter.name, k)

    def set_constraint(self, spec: GrammarSpec | None) -> None:
        """Constrain the next replies to a grammar or JSON schema (None: free
        text again). A grammar llama.cpp cannot read is a SpecchatError."""
        self.constraint.set(None if spec is None else Grammar(spec, self.target))

    @property
    def constraint_spec(self) -> GrammarSpec | None:
        """What replies must match (None: free text), to carry over to another pair."""
        return self.constraint.grammar.spec if self.constraint.grammar is not None else None

    @property
    def constraint_label(self) -> str:
        """ "JSON · person.json", "grammar · list.gbnf", or "" while replies are free."""
        return self.constraint.label

    @property
    def context_used(self) -> int:
        """Tokens of the conversation in the target's context (not the junk a
        measurement decodes after them and rolls back)."""
        before = self._context_before
        return len(self.target.tokens) if before is None else before

    @property
    def sampling(self) -> SamplingParams:
        return self.engine.sampling

    def set_sampling(self, temp: float, top_p: float) -> None:
        """Sample the next replies at this temperature and top-p (0: greedy)."""
        self.engine.sampling = replace(self.engine.sampling, temp=temp, top_p=top_p)

    @property
    def draft_model_loaded(self) -> bool:
        return self.drafters.draft_model_loaded

    def status(self) -> SessionStatus:
        drafter, sampling = self.engine.drafter, self.engine.sampling
        return SessionStatus(
            self.pair,
            drafter.name,
            self.k,
            sampling.temp,
            sampling.greedy,
            self.context_used,
            self.n_ctx,
            drafter.choice,
            drafter.chosen,
            self.constraint.label,
            self.memory.held if self.memory.on else None,
        )

    @contextmanager
    def using(
        self, drafter: str, k: int | None = None, baseline_every: int | None = None, temp: float | None = None
    ) -> Iterator[None]:
        """Run turns with another drafter (set now, begun by the next turn
        before its clock starts), k (None: the drafter's own), baseline rate
        and temperature; restore them after."""
        engine = self.engine
        saved = engine.drafter, engine.k, engine.baseline_every, engine.sampling
        engine.drafter = self.drafters.get(drafter)
        engine.k = own_k(drafter, k)
        engine.baseline_every = saved[2] if baseline_every is None else baseline_every
        engine.sampling = saved[3] if temp is None else replace(saved[3], temp=temp)
        try:
            yield
        finally:
            engine.drafter, engine.k, engine.baseline_every, engine.sampling = saved

    def prompt_for(self, user_text: str, history: Iterable[dict] = ()) -> list[int]:
        """The prompt a chat holding `history` would send for this message (for measuring)."""
        return self._tokens_of([*history, {"role": "user", "content": user_text}])

    # --- the memory: this user's earlier replies ----------------------------------------

    def remember(self, replies: Iterable[tuple[object, str, str]], ticket: int | None = None) -> None:
        """Offer stored replies (owner, the user's message, the reply) to the
        memory, tokenized here: call it from any thread; the next turn takes
        them in. `ticket` (memory.ticket(), taken before the replies were
        read): a conversation forgotten since, or a clear, drops the rest.
        Replies tokenized by an earlier run on this model come from the
        token cache (tokencache.py): only new ones are tokenized."""
        cache = TokenCache(self.cost_key, self.system, self.target.n_vocab) if self.cost_key else None
        try:
            with self._remembering:
                for owner, user_text, reply in replies:
                    if not self.memory.on or self.memory.cleared_since(ticket):
                        return
                    tokens = (
                        cache.tokens(user_text, reply, self._reply_tokens)
                        if cache
                        else self._reply_tokens(user_text, reply)
                    )
                    self.memory.offer(tokens, owner, ticket)
        finally:
            if cache is not None:
                cache.close()

    def _reply_tokens(self, user_text: str, reply: str) -> list[int]:
        """A stored reply as the memory holds it: its prompt's tail, then its tokens."""
        return [*self.prompt_for(user_text)[-PROMPT_TAIL:], *self.memory.tokenize(reply)]

    def set_memory(self, on: bool) -> None:
        """Draft from the memory, or not; off empties it."""
        self.memory.set_on(on)

    def _generate(self, on_round, cancel, on_idle) -> Turn:
        self._refresh_stop.set()  # a measurement of the curve in progress gives way...
        with self._decoding:
            self._refresh_stop.clear()  # ...and the next one may run after this reply
            return self._decode_turn(on_round, cancel)

    def _decode_turn(self, on_round, cancel) -> Turn:
        prompt, dropped = self._prompt_that_fits()
        budget = min(self.max_tokens, self.n_ctx - len(prompt) - self.engine.k - 1)
        turn = self.engine.generate(prompt, budget, on_round=on_round, cancel=cancel)
        self.curve.keep()  # refined by this turn's rounds
        if turn.finish == "length" and budget < self.max_tokens:
            turn.finish = "context"  # the context, not --max-tokens, ended the reply: it says so
        turn.dropped_turns = dropped
        turn.prompt = prompt
        self._messages.append({"role": "assistant", "content": turn.text})
        self.memory.offer([*prompt[-PROMPT_TAIL:], *turn.tokens], self.memory_owner)
        self.memory.absorb()  # this thread drafts: the reply is there for the next turn, ^r's included
        turn.stats.memory_held = self.memory.held if self.memory.on else None
        return turn

    def plain_reference(self, turn: Turn) -> list[int]:
        """Decode the prompt of `turn` again with drafting off: what the target alone says."""
        with self._decoding, self.using(Name.OFF, baseline_every=0):
            # One token more after an EOS ending, so the reference must stop there too.
            return self.engine.generate(turn.prompt, len(turn.tokens) + (turn.finish == "eos")).tokens

    def prompt_tokens(self) -> list[int]:
        return self._tokens_of(self._messages)

    def _tokens_of(self, messages: list[dict]) -> list[int]:
        msgs = ([{"role": "system", "content": self.system}] if self.system else []) + messages
        return self.target.tokenize(self.target.apply_template(msgs), special=True)

    def _prompt_that_fits(self) -> tuple[list[int], int]:
        """Drop the oldest turns (never the system prompt or the new message)
        until the prompt leaves room for a reply."""
        room = min(self.max_tokens, self.n_ctx // 4)
        dropped = 0
        while True:
            prompt = self.prompt_tokens()
            if len(prompt) + room <= self.n_ctx:
                return prompt, dropped
            if len(self._messages) <= 1:
                system = len(self.target.tokenize(self.system, special=False)) if self.system else 0
                raise too_long(len(prompt), system, room, self.n_ctx)
            self.drop_oldest()
            dropped += 1

    def close(self) -> None:
        self._closing.set()  # a measurement between replies stops at its next decode...
        self._refresh_stop.set()
        self.memory.on = False  # a fill still tokenizing stops at its next reply...
        with self._decoding, self._remembering:  # ...and the models are freed after both
            self.drafters.close()
            self.target.close()


def own_k(drafter: str, k: int | None) -> int:
    """The k a session runs `drafter` at: `k` within K_MIN..K_MAX, or where
    None the drafter's own (the one place a drafter's own k is looked up)."""
    return default_k(drafter) if k is None else max(K_MIN, min(K_MAX, k))


def too_long(prompt: int, system: int, room: int, n_ctx: int) -> SpecchatError:
    """Why a new message cannot be answered (token counts): the system
    prompt, where it alone leaves no room for a reply; else the prompt."""
    if system + room > n_ctx:
        return SpecchatError(
            f"the system prompt alone is {system} tokens of the context's {n_ctx}",
            hint="shorten it (/system in the chat, --system for run) or raise the context (ctx in settings.toml, --ctx for run)",
        )
    return SpecchatError(
        f"the prompt is {prompt} tokens; the context holds {n_ctx}",
        hint="shorten the message or raise the context (ctx in settings.toml, --ctx for run)",
    )
