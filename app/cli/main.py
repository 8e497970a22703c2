"""The `specchat` command: the chat, `run` and `bench` here, the model
commands in models.py, the shared options and the one place a
SpecchatError becomes an error line in options.py. Each subcommand parses
its options and hands off to the module that owns the work; heavy imports (llama_cpp, Textual)
happen only inside the command that needs them, so `--help` stays fast."""

from __future__ import annotations

import inspect
import sys

import typer

from specchat.cli.history import history_app
from specchat.cli.models import models_app, pull, rm
from specchat.cli.options import (
    BASELINE,
    BASELINE_SERVER,
    CONTINUE,
    CONVERSATION,
    DRAFT,
    DRAFTER,
    DRAFTERS,
    EXTRA_BUFTS,
    PAIR,
    SERVER,
    TARGET,
    THEME,
    Commands,
    K,
)
from specchat.drafters import DEFAULT_K, MODEL_K, READS_MEMORY, k_defaults
from specchat.errors import SpecchatError

app = typer.Typer(
    cls=Commands,
    help="Chat with a local llama.cpp model and watch speculative decoding settle its bets.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _not_built(what: str) -> None:
    typer.echo(f"`specchat {what}` is not built yet.", err=True)
    raise typer.Exit(2)


@app.command()
def chat(
    pair: str | None = PAIR,
    target: str | None = TARGET,
    draft: str | None = DRAFT,
    drafter: str | None = DRAFTER,
    k: int | None = K,
    theme: str | None = THEME,
    server: str | None = SERVER,
    baseline: bool = BASELINE,
    baseline_server: str | None = BASELINE_SERVER,
    extra_bufts: str | None = EXTRA_BUFTS,
    resume: bool = CONTINUE,
    conversation: int | None = CONVERSATION,
) -> None:
    """Open the chat (the same as a bare `specchat`)."""
    try:
        from specchat.tui import ChatOptions, run_chat
    except ImportError:
        _not_built("chat")
    options = ChatOptions(
        pair, target, draft, drafter, k, theme, server, baseline, baseline_server, conversation, resume, extra_bufts
    )
    code = run_chat(options)
    raise typer.Exit(code)  # a crash inside the app is not a success


@app.callback(invoke_without_command=True)
def main_callback(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
    **options,
) -> None:
    """A bare `specchat` opens the chat."""
    if version:
        from specchat import __version__

        typer.echo(f"specchat {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        ctx.invoke(chat, **options)


# A bare `specchat` takes the chat's options: typer reads them from the callback's signature.
_ctx_and_version = list(inspect.signature(main_callback, eval_str=True).parameters.values())[:2]
main_callback.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [*_ctx_and_version, *inspect.signature(chat, eval_str=True).parameters.values()]
)


# --- models: pull / models / rm (models.py) ---------------------------------------

app.command()(pull)
app.add_typer(models_app, name="models")
app.command()(rm)
app.add_typer(history_app, name="history")


# --- run (owned by run.py) ---------------------------------------------------


@app.command()
def run(
    prompt: str | None = typer.Argument(
        None,
        help="The user message; `-`, or none with stdin not a terminal, reads it from stdin (one final line end dropped).",
    ),
    pair: str | None = typer.Option(None, "--pair", help="Model pair (default: the configured one)."),
    target: str | None = TARGET,
    draft: str | None = DRAFT,
    drafter: str = typer.Option("auto", "--drafter", help=f"{DRAFTERS}."),
    k: int | None = typer.Option(
        None,
        "--k",
        help=f"Most tokens a drafter may propose per round (default: {k_defaults()}).",
    ),
    files: list[str] | None = typer.Option(
        None,
        "--file",
        help="Attach a text file: its text goes before the message, fenced, under its name (repeatable).",
    ),
    max_tokens: int = typer.Option(256, "--max-tokens", help="Stop after this many tokens (at least 1)."),
    temp: float = typer.Option(0.0, "--temp", help="Temperature (0 = greedy)."),
    top_k: int = typer.Option(0, "--top-k", help="Top-k (0 = off)."),
    top_p: float = typer.Option(1.0, "--top-p", help="Top-p (1 = off)."),
    seed: int = typer.Option(
        0,
        "--seed",
        help="Sampling seed, 0 to 4294967295: the same seed, the same reply (no -1: specchat has no random seed).",
    ),
    system: str | None = typer.Option(None, "--system", help="System prompt."),
    baseline_every: int = typer.Option(
        8, "--baseline-every", help="One plain step in N rounds measures the baseline (0 = none, never negative)."
    ),
    check_identical: bool = typer.Option(
        False, "--check-identical", help="Also decode plainly and compare the output."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    no_history: bool = typer.Option(
        False, "--no-history", help="Neither draft from the stored replies nor record this turn in the history."
    ),
    threads: int | None = typer.Option(
        None, "--threads", help="CPU threads, 1 to 4 per core (default: physical cores)."
    ),
    ctx: int | None = typer.Option(None, "--ctx", help="Context size (default: min(8192, trained))."),
    n_gpu_layers: int = typer.Option(
        -1, "--n-gpu-layers", help="Target layers to offload to the GPU (-1 = all, 0 = none; no-op on a CPU build)."
    ),
    draft_n_gpu_layers: int = typer.Option(
        -1, "--draft-n-gpu-layers", help="Draft model layers to offload (-1 = all, 0 = none)."
    ),
    verbose: bool = typer.Option(False, "--verbose", help="Show llama.cpp's own log."),
    extra_bufts: str | None = EXTRA_BUFTS,
    json_schema: str | None = typer.Option(
        None, "--json-schema", help="Constrain the reply to JSON matching this schema file."
    ),
    grammar: str | None = typer.Option(
        None, "--grammar", help="Constrain the reply to this GBNF grammar file (llama.cpp's syntax)."
    ),
    server: str | None = typer.Option(
        None, "--server", help="A llama.cpp server's base URL: its model replies, its counters report."
    ),
    baseline: bool = typer.Option(
        False,
        "--baseline",
        help="With --server: decode the turn again with speculation off and show the measured speedup (twice the server's work).",
    ),
    baseline_server: str | None = typer.Option(
        None,
        "--baseline-server",
        help="With --baseline: a second server with the same model and no draft, for servers that take no per-request settings.",
    ),
    draft_min: int | None = typer.Option(
        None, "--draft-min", help="With --server: speculative.n_min per request, where the server takes it."
    ),
    draft_p_min: float | None = typer.Option(
        None, "--draft-p-min", help="With --server: speculative.p_min per request, where the server takes it."
    ),
    measure_for: float = typer.Option(
        3.0,
        "--measure-for",
        help="After the reply, measure what auto's cost curve still misses for up to this many seconds (0 = none).",
    ),
) -> None:
    """Generate one reply and show how speculation did. On a terminal the
    reply streams in colour; piped or redirected, stdout is the reply alone."""
    from specchat import checks, kept
    from specchat.cli.run import run_once
    from specchat.config import load_settings
    from specchat.decoding.sampling import SamplingParams
    from specchat.message.attach import read_attachment, with_files
    from specchat.session.loader import open_session
    from specchat.session.options import DecodeOptions, load_options

    settings = load_settings(warn=kept.warn)  # read once: the loading options, and whether the memory drafts
    load = load_options(  # a bad flag is one line before any file is read
        pair,
        target,
        draft,
        threads=threads,
        ctx=ctx,
        n_gpu_layers=n_gpu_layers,
        draft_n_gpu_layers=draft_n_gpu_layers,
        extra_bufts=extra_bufts,
        verbose=verbose,
        settings=settings,
    )
    attached = [read_attachment(path) for path in files or []]  # a bad file is one line before any model loads
    prompt = with_files(_prompt(prompt), attached)
    if system is not None:
        checks.prompt(system, "--system", empty_ok=True)
    sampling = SamplingParams(
        temp=checks.temperature(temp), top_k=checks.top_k(top_k), top_p=checks.top_p(top_p), seed=checks.seed(seed)
    )
    constraint = checks.constraint(json_schema, grammar, server)
    if server is not None or baseline or baseline_server:
        from specchat.cli.run_server import run_on_server
        from specchat.server.opening import open_server_session

        if check_identical:
            raise SpecchatError(
                "--check-identical cannot be used with --server",
                code=2,
                hint="--baseline decodes the turn again with speculation off and compares the text",
            )
        server_session = open_server_session(
            server,
            {"--pair": pair, "--target": target, "--draft": draft},
            drafter=drafter,
            k=None if k is None else checks.k(k),
            n_min=checks.draft_min(draft_min),
            p_min=checks.draft_p_min(draft_p_min),
            sampling=sampling,
            system=system,
            max_tokens=checks.max_tokens(max_tokens),
            baseline=baseline,
            baseline_server=baseline_server,
        )
        history = None if no_history else _history()
        try:
            raise typer.Exit(
                run_on_server(server_session, prompt, json_out=json_out, baseline=baseline, history=history)
            )
        finally:
            server_session.close()
    checks.drafter(drafter, constrained=constraint is not None)
    decode = DecodeOptions(
        drafter,
        None if k is None else checks.k(k),  # None: the drafter's own
        sampling,
        checks.baseline_every(baseline_every),
        system,
        checks.max_tokens(max_tokens),
    )
    session = open_session(load, decode)
    session.set_constraint(constraint)
    history = None if no_history else _history()
    # Only drafters that read the memory have it filled; memory = false in settings.toml: record only.
    remember = drafter in READS_MEMORY and settings.memory
    raise typer.Exit(
        run_once(
            session,
            prompt,
            json_out=json_out,
            identical=check_identical,
            history=history,
            remember=remember,
            measure_for=checks.measure_for(measure_for),
        )
    )


def _history():
    """The history `run` drafts from and records in; a note on stderr where it is not the usual one."""
    from specchat.history.database import open_history
    from specchat.textsafe import safe_text

    history, note = open_history(busy=5.0)  # one turn to record: waiting out another process's lock is fine
    if note:
        typer.secho(f"warning: {safe_text(note)}", fg="yellow", err=True)
    if history is not None:  # what it says later (a search index rebuilt) goes to stderr too
        history.on_note.append(lambda line: typer.secho(f"warning: {safe_text(line)}", fg="yellow", err=True))
    return history


def _prompt(arg: str | None) -> str:
    """The prompt: the argument, or stdin's text for `-` or for no argument
    when stdin is not a terminal (`echo hi | specchat run`). A final line end,
    which echo and editors add, is not part of the message."""
    from specchat import checks

    if arg is not None and arg != "-":
        return checks.prompt(arg)
    if arg is None and (sys.stdin is None or sys.stdin.isatty()):
        raise SpecchatError(
            "no prompt given",
            code=2,
            hint='specchat run "your message", or pipe it in: echo "your message" | specchat run',
        )
    from specchat.cli.run import stdin_prompt

    return checks.prompt(stdin_prompt(), "the prompt on stdin")


# --- bench (owned by bench.py) ----------------------------------------------------


@app.command()
def bench(
    pair: str | None = typer.Option(None, "--pair", help="Model pair."),
    target: str | None = TARGET,
    draft: str | None = DRAFT,
    prompts: str | None = typer.Option(
        None, "--prompts", help="Your own prompts as the suite: a folder of .txt files or a suite .toml."
    ),
    suites: str = typer.Option(
        "code-edit,summarize,code-gen,chat,math",
        "--suites",
        help="Comma-separated suites (public: mt-bench, humaneval).",
    ),
    sample: int | None = typer.Option(None, "--sample", help="A public suite's first N questions per category."),
    categories: str | None = typer.Option(None, "--categories", help="A public suite's categories, comma-separated."),
    drafters: str = typer.Option(
        "off,ngram,draft,hybrid,auto", "--drafters", help="Comma-separated drafters; NAME:K runs one at k=K only."
    ),
    ks: str = typer.Option(
        "",
        "--k",
        help=f"Comma-separated k values (default: each drafter's own, {DEFAULT_K} or {MODEL_K} for a draft model).",
    ),
    max_tokens: int = typer.Option(128, "--max-tokens", help="Tokens per reply."),
    repeats: int = typer.Option(1, "--repeats", help="Repeats per prompt."),
    temp: float = typer.Option(0.0, "--temp", help="Temperature."),
    json_file: str | None = typer.Option(None, "--json", help="Write every figure to this file."),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads (default: physical cores)."),
    n_gpu_layers: int = typer.Option(
        -1, "--n-gpu-layers", help="Target layers to offload to the GPU (-1 = all, 0 = none)."
    ),
    draft_n_gpu_layers: int = typer.Option(
        -1, "--draft-n-gpu-layers", help="Draft model layers to offload (-1 = all, 0 = none)."
    ),
    extra_bufts: str | None = EXTRA_BUFTS,
) -> None:
    """Measure every drafter against plain decoding on this machine."""
    from specchat import checks
    from specchat.bench import memory
    from specchat.bench.runner import run_command
    from specchat.session.options import load_options

    load = load_options(
        pair,
        target,
        draft,
        threads=threads,
        n_gpu_layers=n_gpu_layers,
        draft_n_gpu_layers=draft_n_gpu_layers,
        extra_bufts=extra_bufts,
    )
    checks.temperature(temp)
    checks.max_tokens(max_tokens)
    checks.repeats(repeats)
    checks.sample(sample)
    names = list(dict.fromkeys(s.strip() for s in suites.split(",") if s.strip()))
    if "memory" in names:  # questions asked again: a procedure of its own
        raise typer.Exit(memory.run_command(names, load, prompts, max_tokens, json_file))
    code = run_command(
        load=load,
        prompts=prompts,
        suites=suites,
        sample=sample,
        categories=categories,
        drafters=drafters,
        ks=ks,
        max_tokens=max_tokens,
        repeats=repeats,
        temp=temp,
        json_file=json_file,
    )
    raise typer.Exit(code)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
