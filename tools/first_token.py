"""The chat's first reply on a fresh data folder, as a new user meets it.

Each round starts `specchat` in tmux on a new, empty data folder (the
pulled models are read where they are, through SPECCHAT_MODELS), waits
until the status bar shows the model, types one message and times Enter
to the reply's first text on screen, and to its stats line; then ctrl+q
ends the chat and the round checks it ended. off and auto take turns, so
a slow minute lands on both.

    python -m tools.first_token [--pair NAME] [--rounds 3] [--message TEXT]

Needs tmux and a pulled pair. Screen polling every 50 ms bounds the
resolution; compare medians, not single rounds.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time

SESSION = "specchat-first-token"
POLL = 0.05  # seconds between two looks at the screen
WAIT = 300.0  # seconds a chat may take to load or to reply before the round gives up


def screen() -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", SESSION], capture_output=True, text=True).stdout


def until(predicate, limit: float = WAIT) -> float | None:
    """Seconds until predicate(screen) holds; None past the limit."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if predicate(screen()):
            return time.monotonic() - start
        time.sleep(POLL)
    return None


def reply_area(text: str, message: str) -> str:
    """The lines under the message sent, above the prompt box and status bar."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if message in line), None)
    return "" if at is None else "\n".join(lines[at + 1 : -4])


def one_round(pair: str, drafter: str, message: str, models: str) -> dict[str, float | None]:
    home = tempfile.mkdtemp(prefix="specchat-first-")
    env = f"SPECCHAT_HOME={shlex.quote(home)} SPECCHAT_MODELS={shlex.quote(models)}"
    try:
        subprocess.run(["tmux", "new", "-d", "-s", SESSION, "-x", "120", "-y", "40",
                        f"{env} specchat --pair {shlex.quote(pair)} --drafter {drafter}"], check=True)  # fmt: skip
        ready = until(lambda s: "Type a message" in s and "ctx 0/" in s)
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "-l", message], check=True)
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "Enter"], check=True)
        first = until(lambda s: any(c.isalpha() for c in reply_area(s, message)))
        ended = until(lambda s: "tok/s" in reply_area(s, message))
        return {"ready": ready, "first": first, "ended": None if ended is None or first is None else first + ended}
    finally:
        subprocess.run(["tmux", "send-keys", "-t", SESSION, "C-q"], capture_output=True)
        gone = until(lambda _: subprocess.run(["tmux", "has-session", "-t", SESSION], capture_output=True).returncode,
                     10.0)  # fmt: skip
        if gone is None:
            print("the chat did not end on ctrl+q: killed")
            subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="qwen2.5-coder-1.5b")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--message", default="Say hi in five words.")
    args = ap.parse_args()
    from specchat import paths

    models = os.environ.get("SPECCHAT_MODELS") or str(paths.models_dir())
    seen: dict[str, list[dict]] = {"off": [], "auto": []}
    for r in range(args.rounds):
        for drafter in ("off", "auto") if r % 2 == 0 else ("auto", "off"):
            got = one_round(args.pair, drafter, args.message, models)
            seen[drafter].append(got)
            print(drafter, {k: None if v is None else round(v, 2) for k, v in got.items()}, flush=True)
    for drafter, rounds in seen.items():
        medians = {k: round(statistics.median(v), 2) if (v := [x[k] for x in rounds if x[k] is not None]) else None
                   for k in ("ready", "first", "ended")}  # fmt: skip
        print(
            f"{drafter}: median seconds to ready {medians['ready']}, to the first text {medians['first']}, "
            f"to the stats line {medians['ended']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
