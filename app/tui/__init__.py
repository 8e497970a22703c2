"""The chat TUI. `run_chat` is what a bare `specchat` calls; Textual is
imported only here, so the other commands start fast."""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class ChatOptions:
    """What a bare `specchat` or `specchat chat` was given (cli/main.py declares
    and documents each option)."""

    pair: str | None
    target: str | None  # a pair by its files
    draft: str | None
    drafter: str | None
    k: int | None
    theme: str | None
    server: str | None  # a llama.cpp server instead of a local pair
    baseline: bool
    baseline_server: str | None
    conversation: int | None = None  # a stored conversation to reopen
    resume: bool = False  # reopen the last one (--continue)
    extra_bufts: str | None = None  # llama.cpp's extra CPU buffer types (session/options.py)


def reopened(history, note: str, conversation: int | None, resume: bool) -> int | None:
    """The id of the stored conversation to open at start: `conversation`, or
    with `resume` the one most recently updated; None for a new chat. One
    that is not there is a SpecchatError."""
    from specchat.errors import SpecchatError

    if conversation is None and not resume:
        return None
    if history is None:
        raise SpecchatError(f"cannot reopen a conversation: {note}", hint="see `specchat --help` for SPECCHAT_HOME")
    if conversation is not None:
        try:
            history.load(conversation)
        except KeyError:
            raise SpecchatError(
                f"no stored conversation has id {conversation}", hint="specchat history list shows them"
            ) from None
        return conversation
    stored = history.list()
    if not stored:
        raise SpecchatError("no conversation to continue yet", hint="specchat alone starts a new one")
    return stored[0].id


def run_chat(options: ChatOptions) -> int:
    """Run the chat; returns the exit code (1 when the app crashed). With
    `server`, the chat talks to a llama.cpp server (specchat.server.session);
    with `target` (and `draft`), on those files."""
    from specchat import checks
    from specchat.config import read_settings
    from specchat.history.database import open_history
    from specchat.store.pairs import known_pair
    from specchat.tui.app import SpecchatApp
    from specchat.tui.ending import Ending
    from specchat.tui.state.models import Models, chat_models

    o = options
    loaded = read_settings()
    settings = loaded.settings
    if o.theme:
        settings.theme = o.theme
    # A server is probed before the app starts: unreachable is one line, not an app with no model.
    server_models = chat_models(
        o.server,
        pair=o.pair,
        drafter=o.drafter,
        baseline=o.baseline,
        baseline_server=o.baseline_server,
        target=o.target,
        draft=o.draft,
    )
    if o.drafter is not None and server_models is None:
        checks.drafter(o.drafter)
    if o.k is not None:
        checks.k(o.k)
    if o.extra_bufts is not None:
        checks.extra_bufts(o.extra_bufts)  # a bad value is one line, before the app starts
    models = server_models or Models(o.target, o.draft, o.extra_bufts)  # missing files: one line, before the app
    pair = o.pair
    if pair is not None and o.target is None:
        known_pair(pair)  # an unknown --pair is one line, before the app starts
    if server_models is not None or o.target is not None:
        pair = models.default_pair()
    history, note = open_history()
    reopen = reopened(history, note, o.conversation, o.resume)  # one that is not there is one line, before the app
    app = SpecchatApp(
        models,
        settings,
        pair=pair,
        drafter=o.drafter,
        k=o.k,
        history=history,
        config_errors=loaded.errors,
        history_note=note,
        reopen=reopen,
    )
    # Signals, a terminal that hangs up, and the deadline that ends the process
    # whatever its threads still do (ending.py); a deadline saves what is queued first.
    app.ending = ending = Ending(lambda wait: app.conversation.close(wait=wait))
    try:
        app.run()
        ending.wait_closed(5.0)
    finally:
        unsaved = app.conversation.close(wait=5.0)  # the last reply's write may still be under way
        if history is not None:
            history.close()
    if unsaved:
        print(f"warning: {unsaved} message(s) could not be saved to the history (it stayed locked)", file=sys.stderr)
    ending.restore()
    return app.return_code or 0
