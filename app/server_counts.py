"""A llama.cpp server's speculation, from its own counters only.

Speculation is reported from the server's own counters only. Every
streamed chunk asked with `timings_per_token: true` carries the running
totals `draft_n` (tokens drafted) and `draft_n_accepted` (drafts the target
accepted) and `predicted_n` (tokens generated). Their differences between
chunks say how many of the new tokens were accepted drafts; nothing finer
(which token, what was rejected) is known, so nothing finer is claimed:

- a chunk all of whose new tokens are accepted drafts is coloured as
  accepted, with the provenance SERVER_TOTALS; a chunk that mixes them with
  the target's own tokens stays plain (its count still goes into the stats);
- the counters of a verify round come with its first token, and llama.cpp
  sends the round's accepted drafts before the target's own token, so the
  accepted count is spent on the tokens from that chunk on;
- α needs the number of verify rounds, which is the number of chunks where
  `draft_n` grew; that is exact only when every chunk brought at most one
  token, otherwise α is not given;
- a server that sends no counters gets "no speculation data from this
  server", never zeros.
"""

from __future__ import annotations

from dataclasses import dataclass

from specchat.server import SERVER_DRAFTER
from specchat.stats import SERVER_TOTALS, TurnStats, round_spans

# --- the counters, chunk by chunk -------------------------------------------------------


@dataclass
class Chunk:
    """The text of one streamed chunk, and what the server's totals say about
    it. It reads like a Round where the chat's stream reads one (its text by
    kind, mode, n_tokens), so the same spans, colours and pacing apply."""

    text: str
    tokens: int | None  # new tokens by predicted_n; None without counters
    accepted: int = 0  # of them, accepted drafts (by draft_n_accepted)
    drafted: int = 0  # draft_n grew by this much at this chunk: a verify round began here

    mode = SERVER_DRAFTER  # the drafter that ran it: the server's own setting
    drafter = SERVER_TOTALS  # the provenance of its accepted text
    choice = ""
    forced_text = rejected_text = ""  # the server sends no rejected drafts
    t_draft = t_verify = 0.0

    @property
    def kind(self) -> str:
        return "accepted" if self.tokens and self.accepted == self.tokens else "target"

    @property
    def accepted_text(self) -> str:
        return self.text if self.kind == "accepted" else ""

    @property
    def target_text(self) -> str:
        return self.text if self.kind == "target" else ""

    @property
    def n_tokens(self) -> int:
        return self.tokens or 0

    def spans(self) -> list[dict]:
        return round_spans(self)


class Totals:
    """Turns the running totals of successive chunks into per-chunk counts."""

    def __init__(self) -> None:
        self.predicted = self.drafted = self.accepted = 0
        self.pending = 0  # accepted drafts announced but not yet streamed
        self.rounds = 0  # chunks where draft_n grew
        self.exact = True  # every chunk brought at most one token, so every round was seen
        self.counters = False  # the server sent draft_n at least once
        self.timings: dict | None = None  # the latest timings as the server sent them

    def chunk(self, text: str, timings: dict | None) -> Chunk:
        if not timings:
            return Chunk(text, None)
        self.timings = timings
        predicted = int(timings.get("predicted_n", self.predicted))
        drafted = int(timings.get("draft_n", self.drafted))
        accepted = int(timings.get("draft_n_accepted", self.accepted))
        self.counters |= "draft_n" in timings
        new, grew = predicted - self.predicted, drafted - self.drafted
        self.pending += accepted - self.accepted
        self.predicted, self.drafted, self.accepted = predicted, drafted, accepted
        self.rounds += grew > 0
        self.exact &= new <= 1
        mine = min(self.pending, max(new, 0))
        self.pending -= mine
        return Chunk(text, new, mine, grew)


def _context(timings: dict | None) -> int:
    if not timings:
        return 0
    return int(timings.get("cache_n", 0)) + int(timings.get("prompt_n", 0)) + int(timings.get("predicted_n", 0))


@dataclass
class ServerStats(TurnStats):
    """TurnStats from a server's counters, and what it sent: to_dict() carries
    these too, so the stats line (stats.server_fields) says what is known."""

    source: str = "server"
    timings_sent: bool = False  # the server sent timings at all
    counters: bool = False  # it sent draft_n / draft_n_accepted
    alpha_exact: bool = True  # every chunk brought at most one token, so α counts every verify round
    baseline_error: str = ""  # why --baseline gave no figure


def server_stats(totals: Totals, wall: float) -> ServerStats:
    """A turn's stats from the server's final counters; nothing estimated."""
    s = ServerStats(timings_sent=totals.timings is not None, counters=totals.counters, alpha_exact=totals.exact)
    t = totals.timings or {}
    s.tokens = int(t.get("predicted_n", 0))
    s.t_decode = float(t.get("predicted_ms", 0.0)) / 1000 if t else wall
    s.tok_s = s.spec_tok_s = float(t.get("predicted_per_second", 0.0))
    s.prefill_tokens = int(t.get("prompt_n", 0))
    s.prefill_tok_s = float(t.get("prompt_per_second", 0.0))
    if totals.counters:
        s.drafted, s.accepted = totals.drafted, totals.accepted
        s.acceptance_rate = s.accepted / s.drafted if s.drafted else 0.0
        s.verify_rounds = totals.rounds
        s.plain_steps = max(0, s.tokens - s.accepted - s.verify_rounds)
        if totals.exact and totals.rounds:
            s.alpha = (s.accepted + totals.rounds) / totals.rounds
    return s
