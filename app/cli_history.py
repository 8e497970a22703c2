"""`specchat history search TEXT`: every stored message that holds the
text (its words, in order), best match first, with the conversation it
belongs to; F3 in the chat searches the same way (s) and opens one."""

from __future__ import annotations

import typer

history_app = typer.Typer(
    help="Search the conversations the chat and `run` stored.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@history_app.command("search")
def history_search(
    text: str = typer.Argument(..., help="Words to find, in this order (case does not matter)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Find every stored message that holds TEXT."""
    import sqlite3

    from specchat.errors import SpecchatError
    from specchat.history import open_history
    from specchat.textsafe import safe_json, safe_text

    history, note = open_history()
    if history is None:
        raise SpecchatError(f"cannot open the history: {note}", hint="see `specchat --help` for SPECCHAT_HOME")
    if note:
        typer.echo(safe_text(f"note: {note}"), err=True)
    history.on_note.append(lambda line: typer.echo(safe_text(f"note: {line}"), err=True))  # an index rebuilt
    try:
        found = history.search(text)  # a SpecchatError where search is off
    except sqlite3.Error as err:
        raise SpecchatError(
            f"cannot search the history ({err})", hint="another program may be writing to it; try again in a moment"
        ) from None
    finally:
        history.close()
    if json_out:
        typer.echo(safe_json([f.__dict__ for f in found], indent=2))
        return
    if not found:
        typer.echo(safe_text(f"no stored message holds “{' '.join(text.split())}”"))
        raise typer.Exit(1)
    for f in found:
        typer.echo(safe_text(f"{f.conversation:>5}  {f.title} · {f.role}: {f.snippet}"))
    typer.echo("open one in the chat: F3, then s to search there", err=True)
