"""What applying a grammar costs, position by position, on real replies.

    python tools/grammar_cost.py                       # the json suite on the default pair
    python tools/grammar_cost.py --prompts person,job  # some of its prompts

For each prompt of the `json` bench suite, the target decodes its reply
under the prompt's schema (drafting off, greedy). The reply is then decoded
again in one batch with logits at every position, and at each position,
with the grammar state the reply had there, this times:

- mask: llama.cpp's grammar over the whole vocabulary (what exact sampling
  needs, and what a naive constrained argmax would do);
- argmax: the engine's greedy route (the argmax alone, then the next most
  likely candidates only when the grammar refuses it), and whether it chose
  the reply's token (it does, but where the batch's logits flip a near-tie
  against the single steps' the position is printed);
- probe: the grammar drafter's forced-text probe (256 single-byte tokens and
  EOS, a byte at a time), with no cache;
- step: one plain decode step of the target, for scale.

It also counts the positions where the full mask leaves exactly one token
(forced in the strict, token-level sense) beside the tokens that lie inside
forced text, which is what the grammar drafter proposes. A measurement,
printed; never a test.
"""

from __future__ import annotations

import argparse
import statistics
import time

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", default=None)
    ap.add_argument("--prompts", default="", help="comma-separated prompt ids of the json suite (default: all)")
    ap.add_argument("--max-tokens", type=int, default=200)
    args = ap.parse_args()

    import numpy as np

    from specchat.decoding.costmodel import time_decodes
    from specchat.llamacpp.grammar import Grammar
    from specchat.session.loader import open_session
    from specchat.session.options import DecodeOptions, LoadOptions
    from specchat.bench.suites import load_suite

    wanted = set(filter(None, args.prompts.split(",")))
    session = open_session(
        LoadOptions(args.pair),
        DecodeOptions(drafter="off", k=4, baseline_every=0, max_tokens=args.max_tokens),
    )
    target = session.target
    rows = []
    for prompt in load_suite("json").prompts:
        if wanted and prompt.id not in wanted:
            continue
        session.set_constraint(prompt.constraint)
        session.clear()
        turn = session.reply(prompt.text)
        reply = turn.tokens + ([target.eos] if turn.finish == "eos" else [])
        # The reply again, in one batch, with logits at every position.
        n_kv = len(turn.prompt) - 1
        target.truncate(n_kv)
        target.argmax_only(False)  # every row is read whole
        target.eval([turn.prompt[-1]] + reply[:-1], n_logits=len(reply))
        logits = [np.array(target.logits(j)) for j in range(len(reply))]
        target.truncate(n_kv)
        # One plain step at this context: the median of 5, after an untimed one.
        step = statistics.median(time_decodes(target, [1], 5, filler=turn.prompt[-1:] * 2)[1])

        state = Grammar(prompt.constraint, target).start()
        mask, argmax, probe, strict, refused, flips = [], [], [], 0, 0, []
        for j, t in enumerate(reply):
            a = time.perf_counter()
            masked = state.mask(logits[j])
            b = time.perf_counter()
            chosen = state.argmax(logits[j])
            c = time.perf_counter()
            state.forced_text()
            d = time.perf_counter()
            mask.append(b - a), argmax.append(c - b), probe.append(d - c)
            if chosen != t:  # batched logits can flip a near-tie (llama.cpp's batch kernels): note it
                flips.append(j)
            strict += int(np.isfinite(masked).sum()) == 1
            refused += int(np.argmax(logits[j])) != t
            if not target.is_eog(t):
                state.accept(t)
        forced = forced_tokens(prompt.constraint, target, reply)
        rows.append((prompt.id, len(reply), step, mask, argmax, probe, strict, forced, refused))
        print(f"{prompt.id}: {len(reply)} tokens, finish {turn.finish}, valid={session.constraint.check(turn.text) is None}"
              f"{f', batched logits chose another token at {flips}' if flips else ''}: {turn.text}")

    print()
    print("per position, median (max) in ms; share of a plain step in brackets")
    print("prompt    tokens  step    mask              argmax          probe           strictly forced  in forced text  argmax refused")
    for pid, n, step, mask, argmax, probe, strict, forced, refused in rows:
        def cell(xs):
            return f"{1e3 * statistics.median(xs):6.2f} ({1e3 * max(xs):6.1f}) [{statistics.median(xs) / step:5.1%}]"
        print(f"{pid:9} {n:6}  {1e3 * step:5.0f}  {cell(mask)}  {cell(argmax)}  {cell(probe)}  "
              f"{strict:5} ({strict / n:4.0%})     {forced:5} ({forced / n:4.0%})   {refused:5} ({refused / n:4.0%})")
    session.close()


def forced_tokens(spec, model, reply: list[int]) -> int:
    """Tokens of the reply that the grammar drafter would have drafted: those
    inside the forced text ahead of the state they were decoded from."""
    from specchat.decoding.constraint import Constraint
    from specchat.llamacpp.grammar import Grammar

    c = Constraint()
    c.set(Grammar(spec, model))
    c.begin()
    n = 0
    for t in reply:
        ahead = c.forced(64)
        text = b"".join(model.piece(a) for a in ahead)
        n += bool(ahead) and (text.startswith(model.piece(t)) if not model.is_eog(t) else ahead[-1] == t)
        c.commit(t, model.piece(t), model.is_eog(t))
    return n


if __name__ == "__main__":
    main()
