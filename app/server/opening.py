"""A ServerSession from a command's options: `specchat run --server` and
`specchat --server` refuse the same options, in the same words, before
anything is sent."""

from __future__ import annotations

from specchat.drafters import Name
from specchat.errors import SpecchatError
from specchat.server.client import SERVER_DRAFTER, check_url
from specchat.server.session import ServerSession


def check_server_options(
    local: dict[str, str | None], drafter: str | None, baseline: bool, baseline_server: str | None, *, instead: str
) -> None:
    """What `run --server` and `specchat --server` both refuse, one error line
    each: options for a local model, a drafter the server cannot run, and
    --baseline-server without --baseline. `instead` ends the local options' hint."""
    for flag, value in local.items():
        if value is not None:
            raise SpecchatError(
                f"{flag} cannot be used with --server: the server runs its own model",
                code=2,
                hint=f"drop it, or drop --server to {instead}",
            )
    if baseline_server and not baseline:
        raise SpecchatError("--baseline-server needs --baseline", code=2, hint="add --baseline")
    if drafter not in (None, Name.AUTO, SERVER_DRAFTER, Name.OFF):
        raise SpecchatError(
            f"--drafter {drafter} cannot run on a server",
            code=2,
            hint="with --server the drafter is the server's own, or off where it allows",
        )


def open_server_session(
    url: str | None,
    local: dict[str, str | None],
    *,
    drafter: str = "auto",
    baseline: bool = False,
    baseline_server: str | None = None,
    **kwargs,
) -> ServerSession:
    """A ServerSession from `run`'s options, their ranges checked by checks.py:
    the server runs its own model and drafter, so the local ones (`local`,
    flag → value) are refused."""
    if url is None:
        raise SpecchatError(
            "--baseline and --baseline-server need --server URL",
            code=2,
            hint='specchat run --server http://127.0.0.1:8080 --baseline "…"',
        )
    check_server_options(local, drafter, baseline, baseline_server, instead="run a local pair")
    session = ServerSession(
        check_url(url),
        with_baseline=baseline,
        baseline_url=check_url(baseline_server) if baseline_server else None,
        **kwargs,
    )
    try:
        session.set_drafter(SERVER_DRAFTER if drafter == Name.AUTO else drafter)
        if baseline:
            session.check_baseline()
    except SpecchatError:
        session.close()
        raise
    return session
