"""The chat TUI. `run_chat` is what a bare `specchat` calls; Textual is
imported only here, so the other commands start fast."""

from __future__ import annotations


def run_chat(pair: str | None = None, drafter: str | None = None, k: int | None = None,
             theme: str | None = None) -> None:
    from specchat.config import read_settings
    from specchat.drafters import NAMES
    from specchat.errors import SpecchatError
    from specchat.history import History
    from specchat.tui.app import SpecchatApp
    from specchat.tui.models import Models

    loaded = read_settings()
    settings = loaded.settings
    if theme:
        settings.theme = theme
    if drafter is not None and drafter not in NAMES:
        raise SpecchatError(f"unknown drafter {drafter!r}", hint=f"choose one of: {', '.join(NAMES)}", code=2)
    if k is not None and not 1 <= k <= 32:
        raise SpecchatError(f"--k {k} is out of range", hint="use 1 to 32", code=2)
    history = History()
    try:
        SpecchatApp(Models(), settings, pair=pair, drafter=drafter, k=k, history=history,
                    config_errors=loaded.errors).run()
    finally:
        history.close()
