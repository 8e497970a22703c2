"""`specchat history`: `list` the stored conversations (an id each), `show
ID` one as Markdown, `search TEXT` every stored message that holds the
text (its words, in order), best match first, with the conversation it
belongs to. F3 in the chat lists and searches the same way and opens one;
`specchat --continue` reopens the last one, `specchat --conversation ID`
any of them."""

from __future__ import annotations

from datetime import datetime

import typer

history_app = typer.Typer(
    help="List, show and search the conversations the chat and `run` stored.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _opened():
    """The history, opened for reading: a SpecchatError where it cannot be."""
    from specchat.errors import SpecchatError
    from specchat.history.database import open_history
    from specchat.textsafe import safe_text

    history, note = open_history()
    if history is None:
        raise SpecchatError(  # the chat goes on without one: the note says so, which is not this command's case
            note.removesuffix("; chatting without saving"),
            hint="check that the data folder (SPECCHAT_HOME=DIR moves it) is a folder this user can write",
        )
    if note:
        typer.echo(safe_text(f"note: {note}"), err=True)
    return history


@history_app.command("list")
def history_list(
    limit: int = typer.Option(20, "--limit", help="Show this many, most recently updated first (0 = all)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the stored conversations, most recently updated first, with the id each opens by."""
    from specchat.textsafe import safe_json, safe_text

    history = _opened()
    try:
        conversations = history.list()
    finally:
        history.close()
    shown = conversations[:limit] if limit > 0 else conversations
    if json_out:
        fields = ("id", "title", "pair", "updated", "n_messages", "parent")
        typer.echo(safe_json([{f: getattr(c, f) for f in fields} for c in shown], indent=2))
        return
    if not conversations:
        typer.echo("no stored conversation yet: the chat and `specchat run` store theirs")
        return
    for c in shown:
        when = datetime.fromtimestamp(c.updated).strftime("%Y-%m-%d %H:%M")
        branch = f" · branch of {c.parent}" if c.parent is not None else ""
        typer.echo(safe_text(f"{c.id:>5}  {when}  {c.title} · {c.n_messages} messages · {c.pair or '?'}{branch}"))
    more = f" ({len(conversations) - len(shown)} more: --limit 0)" if len(shown) < len(conversations) else ""
    typer.echo(f"open one: specchat --conversation ID; the last one: specchat --continue{more}", err=True)


@history_app.command("show")
def history_show(
    conversation: int = typer.Argument(..., help="The conversation's id (history list shows them)."),
) -> None:
    """Print one stored conversation as Markdown, with each reply's numbers."""
    from specchat.errors import SpecchatError
    from specchat.textsafe import safe_text

    history = _opened()
    try:
        text = history.export_markdown(conversation)
    except KeyError:
        raise SpecchatError(
            f"no stored conversation has id {conversation}", hint="specchat history list shows them"
        ) from None
    finally:
        history.close()
    typer.echo(safe_text(text))


@history_app.command("search")
def history_search(
    text: str = typer.Argument(..., help="Words to find, in this order (case does not matter)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Find every stored message that holds TEXT."""
    import sqlite3

    from specchat.errors import SpecchatError
    from specchat.textsafe import safe_json, safe_text

    history = _opened()
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
    typer.echo("open one: specchat --conversation ID (or F3 in the chat, then s to search there)", err=True)
