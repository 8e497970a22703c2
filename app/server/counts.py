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

from specchat.decoding.stats import TurnStats
from specchat.display import SERVER_TOTALS, round_spans
from specchat.server.answers import Fields, inconsistent
from specchat.server.client import SERVER_DRAFTER

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
    """Turns the running totals of successive chunks into per-chunk counts.
    The totals are read through answers.Fields (a wrong type is one line), and
    totals that cannot be true (going backwards, more accepted than drafted)
    are refused: answers.inconsistent."""

    def __init__(self, server: str = "?") -> None:
        self.server = server  # its URL, for the error line
        self.predicted = self.drafted = self.accepted = 0
        self.pending = 0  # accepted drafts announced but not yet streamed
        self.rounds = 0  # chunks where draft_n grew
        self.exact = True  # every chunk brought at most one token, so every round was seen
        self.counters = False  # the server sent draft_n at least once
        self.timings: dict | None = None  # the latest timings as the server sent them

    def chunk(self, text: str, timings: dict | Fields | None) -> Chunk:
        if timings is None:
            return Chunk(text, None)
        t = timings if isinstance(timings, Fields) else Fields(timings, self.server, "stream event", "timings")
        if not t.value:
            return Chunk(text, None)
        predicted = t.count_or("predicted_n", self.predicted)
        drafted = t.count_or("draft_n", self.drafted)
        accepted = t.count_or("draft_n_accepted", self.accepted)
        self._check(predicted, drafted, accepted)
        read_clock(t, self.server)
        self.timings = t.value
        self.counters |= "draft_n" in t
        new, grew = predicted - self.predicted, drafted - self.drafted
        self.pending += accepted - self.accepted
        self.predicted, self.drafted, self.accepted = predicted, drafted, accepted
        self.rounds += grew > 0
        self.exact &= new <= 1
        mine = min(self.pending, new)
        self.pending -= mine
        return Chunk(text, new, mine, grew)

    def _check(self, predicted: int, drafted: int, accepted: int) -> None:
        """Running totals only grow, and no more drafts are accepted than were drafted."""
        for name, before, now in (
            ("predicted_n", self.predicted, predicted),
            ("draft_n", self.drafted, drafted),
            ("draft_n_accepted", self.accepted, accepted),
        ):
            if now < before:
                raise inconsistent(self.server, f"{name} went from {before} back to {now}")
        if accepted > drafted:
            raise inconsistent(self.server, f"{accepted} accepted of {drafted} drafted")


def _context(timings: dict | None, server: str = "?") -> int:
    if not timings:
        return 0
    t = Fields(timings, server, "stream event", "timings")
    return sum(t.count_or(key, 0) for key in ("cache_n", "prompt_n", "predicted_n"))


@dataclass
class ServerStats(TurnStats):
    """TurnStats from a server's counters, and what it sent: to_dict() carries
    these too, so the stats line (display.server_fields) says what is known."""

    source: str = "server"
    timings_sent: bool = False  # the server sent timings at all
    counters: bool = False  # it sent draft_n / draft_n_accepted
    alpha_exact: bool = True  # every chunk brought at most one token, so α counts every verify round
    baseline_error: str = ""  # why --baseline gave no figure


def read_clock(t: Fields, server: str) -> tuple[float, float]:
    """Every other figure of a timings object, read as its type: the decode's
    and the prompt's tok/s (clock_rate), and the cached tokens."""
    t.count("cache_n")
    return clock_rate(t, "predicted", server), clock_rate(t, "prompt", server)


def server_stats(totals: Totals, wall: float) -> ServerStats:
    """A turn's stats from the server's final counters; nothing estimated,
    and a clock that contradicts its own counters is refused (clock_rate)."""
    s = ServerStats(timings_sent=totals.timings is not None, counters=totals.counters, alpha_exact=totals.exact)
    t = Fields(totals.timings or {}, totals.server, "stream event", "timings")
    s.tokens = totals.predicted
    s.t_decode = ((t.number("predicted_ms") or 0.0) / 1000) if totals.timings else wall
    s.tok_s, s.prefill_tok_s = read_clock(t, totals.server)
    s.spec_tok_s = s.tok_s
    s.prefill_tokens = t.count_or("prompt_n", 0)
    if totals.counters:
        s.drafted, s.accepted = totals.drafted, totals.accepted
        s.acceptance_rate = s.accepted / s.drafted if s.drafted else 0.0
        s.verify_rounds = totals.rounds
        s.plain_steps = max(0, s.tokens - s.accepted - s.verify_rounds)
        if totals.exact and totals.rounds:
            s.alpha = (s.accepted + totals.rounds) / totals.rounds
    return s


def clock_rate(t: Fields, kind: str, server: str) -> float:
    """The server's tok/s for `kind` ("predicted" or "prompt"): its
    `<kind>_per_second`, which llama.cpp computes as n / ms, or (n - 1) / ms
    for decoding where it counts the first token as free of a step; one that
    contradicts its own `<kind>_n` and `<kind>_ms` both ways is refused."""
    rate = t.number(f"{kind}_per_second")
    n, ms = t.count(f"{kind}_n"), t.number(f"{kind}_ms")
    if rate is not None and n is not None and ms:
        agrees = [abs(rate - steps * 1000 / ms) <= 0.01 * steps * 1000 / ms + 0.01 for steps in (n, max(0, n - 1))]
        if not any(agrees):
            raise inconsistent(server, f"{rate:g} tok/s for {n} tokens in {ms:g} ms ({kind})")
    return rate or 0.0


def check_clock(t: Fields, wall: float, server: str) -> None:
    """The server's clock for a reply (predicted_ms, or predicted_n at its
    tok/s) cannot exceed the time the reply took to arrive."""
    ms, n, rate = t.number("predicted_ms"), t.count("predicted_n"), t.number("predicted_per_second")
    seconds = ms / 1000 if ms else (n / rate if n and rate else 0.0)
    if seconds > wall * 1.05 + 0.5:
        raise inconsistent(
            server, f"{n or 0} tokens took {seconds:g} s by the server's clock, in a reply that came in {wall:.1f} s"
        )
