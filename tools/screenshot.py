"""Regenerate the README screenshot: a real colour-coded reply and its stats line.

    python tools/screenshot.py docs/screenshot.svg
    python tools/screenshot.py OUT.svg --pair smollm2-135m --drafter draft --k 4 --prompt "..."
    python tools/screenshot.py OUT.svg --file app.py --prompt "Rename x to count."   # a file attached
    python tools/screenshot.py OUT.svg --branch      # then the reply asked again in a branch (ctrl+b)

It runs the real app headless on a pulled pair, sends one prompt, waits for
the reply and saves Textual's own SVG screenshot. History and settings go to
a temporary folder, so your own are untouched.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PROMPT = ("Rename the function `compute` to `total_price` and change nothing else:\n\n"
          "def compute(items):\n    return sum(item.price for item in items)\n")


async def _reply_done(pilot) -> None:
    await pilot.pause(0.2)
    while pilot.app.chat.generating:
        await pilot.pause(0.1)


async def _drive(pilot, prompt: str, out: Path, stats_panel: bool, branch: bool = False) -> None:
    from textual.widgets import OptionList

    from specchat.tui.chat.widgets import PromptInput

    app = pilot.app
    while app.chat.session is None:
        if "could not load" in app.query_one("StatusBar").status.note:
            app.exit(message=app.query_one("StatusBar").status.note)
            return
        await pilot.pause(0.1)
    box = app.query_one(PromptInput)
    box.cursor_blink = False
    box.text = prompt
    await pilot.press("enter")
    await _reply_done(pilot)
    if branch:  # ask the reply again in a branch of its own: it drafts from its sibling
        await pilot.press("ctrl+b")
        await pilot.pause(0.3)
        app.screen.query_one(OptionList).highlighted = 1
        await pilot.press("enter")
        await _reply_done(pilot)
    if stats_panel:
        await pilot.press("f2")
    await pilot.pause(0.3)
    app.save_screenshot(filename=out.name, path=str(out.parent.resolve()))
    app.exit()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/screenshot.py", description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="SVG file to write")
    ap.add_argument("--pair", default=None, help="pulled pair (default: the catalog default)")
    ap.add_argument("--drafter", default="hybrid")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--theme", default="specchat-dark")
    ap.add_argument("--size", default="110x32", help="columns x rows")
    ap.add_argument("--stats-panel", action="store_true", help="open the stats panel too")
    ap.add_argument("--file", help="attach this file to the message (/file PATH)")
    ap.add_argument("--branch", action="store_true", help="then ask the reply again in a branch (ctrl+b)")
    args = ap.parse_args(argv)

    from specchat.config import load_settings

    settings = load_settings()  # threads, ctx, system prompt as configured
    settings.theme = args.theme
    from specchat.tui.state.models import Models

    models = Models()
    pair = args.pair or models.default_pair()
    if not models.is_pulled(pair):
        print(f"pair '{pair}' is not pulled; run `specchat pull {pair}` first", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        from specchat.history.database import History
        from specchat.tui.app import SpecchatApp

        history = History(Path(tmp) / "history.sqlite3")
        app = SpecchatApp(models, settings, pair=pair, drafter=args.drafter, k=args.k,
                          history=history, save_settings=False)
        cols, rows = (int(n) for n in args.size.lower().split("x"))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        prompt = f"/file {args.file} {args.prompt}" if args.file else args.prompt
        result = app.run(headless=True, size=(cols, rows),
                         auto_pilot=lambda pilot: _drive(pilot, prompt, args.out, args.stats_panel, args.branch))
        history.close()
    if not args.out.is_file():
        print(f"no screenshot written: {result or 'the pair did not load'}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
