"""What every `specchat` command shares: the group that turns a
SpecchatError into one error line, and the options several commands take."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from specchat.drafters import NAMES
from specchat.errors import SpecchatError

DRAFTERS = "|".join(NAMES)


class Commands(TyperGroup):
    """Every command runs inside this group: a SpecchatError (a user's
    mistake, a missing model) ends it as one error line and a hint, here
    and only here."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except SpecchatError as err:
            fail(err)


def fail(err: SpecchatError) -> None:
    from specchat.textsafe import safe_text  # a message may quote a path or a name the user typed

    typer.secho(f"error: {safe_text(err.message)}", fg="red", err=True)
    if err.hint:
        typer.echo(f"hint: {safe_text(err.hint)}", err=True)
    raise typer.Exit(err.code)


# The chat's options: a bare `specchat` and `specchat chat` take the same ones.
PAIR = typer.Option(None, "--pair", help="Model pair to open (see `specchat models`).")
# A pair given by its files: the chat, run, bench and models check take the same two options.
TARGET = typer.Option(None, "--target", help="Target GGUF path (instead of --pair).")
DRAFT = typer.Option(None, "--draft", help="Draft GGUF path (with --target).")
DRAFTER = typer.Option(None, "--drafter", help=f"Drafter to start with: {DRAFTERS}.")
K = typer.Option(None, "--k", help="Most tokens a drafter may propose per round (default: each drafter's own).")
THEME = typer.Option(None, "--theme", help="Theme: dark | light | colorblind | high-contrast | a user theme.")
SERVER = typer.Option(None, "--server", help="Chat with a llama.cpp server (its base URL) instead of a local pair.")
CONTINUE = typer.Option(False, "--continue", help="Reopen the last conversation (the one most recently updated).")
CONVERSATION = typer.Option(
    None, "--conversation", help="Reopen the stored conversation with this id (`specchat history list`)."
)
# llama.cpp's extra CPU buffer types: the chat, run, bench and models check take it.
EXTRA_BUFTS = typer.Option(
    None,
    "--extra-bufts",
    help="llama.cpp's repacked and AMX CPU buffers: auto (off on AMX CPUs, else probed once) | on | off.",
)
BASELINE = typer.Option(
    False,
    "--baseline",
    help="With --server: decode every reply again with speculation off and show the measured speedup.",
)
BASELINE_SERVER = typer.Option(
    None, "--baseline-server", help="With --baseline: a second server, same model, no draft."
)
