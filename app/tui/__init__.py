"""The chat TUI. `run_chat` is what a bare `specchat` calls; Textual is
imported only here, so the other commands start fast."""

from __future__ import annotations


def run_chat(
    pair: str | None = None,
    drafter: str | None = None,
    k: int | None = None,
    theme: str | None = None,
    server: str | None = None,
    baseline: bool = False,
    baseline_server: str | None = None,
    *,
    target: str | None = None,
    draft: str | None = None,
) -> int:
    """Run the chat; returns the exit code (1 when the app crashed). With
    `server`, the chat talks to a llama.cpp server (specchat.server.session);
    with `target` (and `draft`), on those files."""
    from specchat import checks
    from specchat.config import read_settings
    from specchat.history import open_history
    from specchat.store.files import known_pair
    from specchat.tui.app import SpecchatApp
    from specchat.tui.models import Models, chat_models

    loaded = read_settings()
    settings = loaded.settings
    if theme:
        settings.theme = theme
    # A server is probed before the app starts: unreachable is one line, not an app with no model.
    server_models = chat_models(
        server, pair=pair, drafter=drafter, baseline=baseline, baseline_server=baseline_server, target=target
    )
    if drafter is not None and server_models is None:
        checks.drafter(drafter)
    if k is not None:
        checks.k(k)
    models = server_models or Models(target, draft)  # missing files are one line, before the app starts
    if pair is not None and target is None:
        known_pair(pair)  # an unknown --pair is one line, before the app starts
    if server_models is not None or target is not None:
        pair = models.default_pair()
    history, note = open_history()
    app = SpecchatApp(
        models,
        settings,
        pair=pair,
        drafter=drafter,
        k=k,
        history=history,
        config_errors=loaded.errors,
        history_note=note,
    )
    try:
        app.run()
    finally:
        if history is not None:
            history.close()
    return app.return_code or 0
