"""A conversation on a loaded pair: messages, prompt building with the
model's chat template, the engine, and the drafters.

This is the one object the TUI, `specchat run` and `specchat bench` drive.
Its methods block while generating; call them from a worker thread and use
`cancel` and `set_drafter`/`set_k` from any thread.
"""

from __future__ import annotations

import threading
from typing import Callable

from specchat.costmodel import CostModel
from specchat.drafters import K_MAX, K_MIN, Drafters
from specchat.engine import Engine, Turn
from specchat.errors import SpecchatError
from specchat.grammar import Constraint, Grammar, GrammarSpec
from specchat.sampling import SamplingParams
from specchat.stats import Round


class ChatSession:
    def __init__(
        self,
        target,
        load_draft_model: Callable[[], object] | None = None,
        *,
        drafter: str,
        k: int,
        sampling: SamplingParams = SamplingParams(),
        baseline_every: int = 8,
        system: str | None = None,
        max_tokens: int = 1024,
        pair: str = "",
        draft_cost_prior: float = 0.5,
    ) -> None:
        self.target = target
        self.pair = pair
        self.system = system
        self.max_tokens = max_tokens
        self.messages: list[dict] = []  # {"role", "content"}, system excluded
        # Where each model runs (llama.placement): the draft's once it has loaded.
        self.devices: dict[str, dict | None] = {"target": getattr(target, "device", None), "draft": None}
        self.costs = CostModel()
        self.constraint = Constraint()  # the grammar replies must match (off until set_constraint)
        self.drafters = Drafters(load_draft_model, sampling, self.costs, draft_cost_prior, self.constraint)
        self.engine = Engine(
            target, self.drafters.get(drafter), k=k, sampling=sampling, baseline_every=baseline_every, costs=self.costs,
            constraint=self.constraint
        )

    # --- knobs, safe from any thread -----------------------------------------

    @property
    def drafter_name(self) -> str:
        return self.engine.drafter.name

    def set_drafter(self, name: str) -> None:
        self.engine.switch_drafter(self.drafters.get(name))

    @property
    def k(self) -> int:
        return self.engine.k

    def set_k(self, k: int) -> None:
        self.engine.k = max(K_MIN, min(K_MAX, k))

    def set_constraint(self, spec: GrammarSpec | None) -> None:
        """Constrain the next replies to a grammar or JSON schema (None: free
        text again). A grammar llama.cpp cannot read is a SpecchatError."""
        self.constraint.set(None if spec is None else Grammar(spec, self.target))

    @property
    def constraint_label(self) -> str:
        """"JSON · person.json", "grammar · list.gbnf", or "" while replies are free."""
        return self.constraint.label

    @property
    def n_ctx(self) -> int:
        return self.target.n_ctx

    @property
    def context_used(self) -> int:
        return len(self.target.tokens)

    # --- turns --------------------------------------------------------------------

    def reply(
        self,
        user_text: str,
        on_round: Callable[[Round], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Turn:
        """Add a user message and generate the assistant's reply."""
        self.messages.append({"role": "user", "content": user_text})
        return self._generate(on_round, cancel)

    def regenerate(self, on_round=None, cancel=None) -> Turn:
        """Drop the last reply and generate it again."""
        if self.messages and self.messages[-1]["role"] == "assistant":
            self.messages.pop()
        if not self.messages:
            raise SpecchatError("nothing to regenerate", hint="send a message first")
        return self._generate(on_round, cancel)

    def edit_last(self, user_text: str, on_round=None, cancel=None) -> Turn:
        """Replace the last user message (and its reply) and generate again."""
        while self.messages and self.messages[-1]["role"] == "assistant":
            self.messages.pop()
        if self.messages:
            self.messages.pop()
        return self.reply(user_text, on_round, cancel)

    def clear(self) -> None:
        self.messages.clear()

    def _generate(self, on_round, cancel) -> Turn:
        prompt, dropped = self._prompt_that_fits()
        budget = min(self.max_tokens, self.n_ctx - len(prompt) - self.engine.k - 1)
        turn = self.engine.generate(prompt, budget, on_round=on_round, cancel=cancel)
        turn.dropped_turns = dropped
        turn.prompt = prompt
        self.messages.append({"role": "assistant", "content": turn.text})
        return turn

    def plain_reference(self, turn: Turn) -> list[int]:
        """Decode the prompt of `turn` again with drafting off: what the target alone says."""
        engine = self.engine
        saved = engine.drafter, engine.baseline_every
        engine.drafter, engine.baseline_every = self.drafters.get("off"), 0
        try:
            # One token more after an EOS ending, so the reference must stop there too.
            return engine.generate(turn.prompt, len(turn.tokens) + (turn.finish == "eos")).tokens
        finally:
            engine.drafter, engine.baseline_every = saved

    def prompt_tokens(self) -> list[int]:
        msgs = ([{"role": "system", "content": self.system}] if self.system else []) + self.messages
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
            if len(self.messages) <= 1:
                raise SpecchatError(
                    f"the prompt is {len(prompt)} tokens; the context holds {self.n_ctx}",
                    hint="shorten the message or raise --ctx",
                )
            # Drop the oldest user message and the replies that follow it.
            self.messages.pop(0)
            while self.messages and self.messages[0]["role"] != "user":
                self.messages.pop(0)
            dropped += 1

    def close(self) -> None:
        self.drafters.close()
        if hasattr(self.target, "close"):
            self.target.close()
