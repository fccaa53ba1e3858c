"""``gpuatlas apikey ...`` and ``gpuatlas alerts dispatch``: thin wrappers over service.alerts."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import (
    CliError,
    FormatOpt,
    UsageProblem,
    engine,
    err,
    handle_errors,
    settings,
)
from service.cli.output import Format, emit

apikey_app = typer.Typer(help="API keys for write endpoints.", no_args_is_help=True)
alerts_app = typer.Typer(help="Alert delivery.", no_args_is_help=True)


@apikey_app.command("create")
@handle_errors
def apikey_create(
    name: Annotated[str, typer.Argument(help="who or what uses the key")],
) -> None:
    """Create a key and print it once (only its hash is stored)."""
    from service.alerts.keys import create_api_key

    try:
        new = create_api_key(engine(), name)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    typer.echo(new.key)
    err.print(
        f"API key {new.prefix} ({new.name}) created; it is shown only now. "
        "Send it as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'."
    )


@apikey_app.command("revoke")
@handle_errors
def apikey_revoke(prefix: Annotated[str, typer.Argument(help="the key's prefix")]) -> None:
    """Revoke a key by its prefix (e.g. gpa_1a2b3c4d)."""
    from service.alerts.keys import revoke_api_key

    if not revoke_api_key(engine(), prefix):
        raise CliError(f"no live API key with prefix {prefix}")
    typer.echo(f"revoked {prefix}")


@apikey_app.command("list")
@handle_errors
def apikey_list(fmt: FormatOpt = Format.table) -> None:
    """Keys by prefix and name (never the keys themselves)."""
    from service.alerts.keys import list_api_keys

    with engine().connect() as conn:
        rows = list_api_keys(conn)
    emit(rows, fmt)


@alerts_app.command("dispatch")
@handle_errors
def alerts_dispatch() -> None:
    """Raise due certification expiry events, deliver due webhook events (the scheduler
    does this every few seconds)."""
    from service.alerts.dispatch import run_dispatcher_once

    report = run_dispatcher_once(engine(), settings())
    typer.echo(
        f"claimed {report.claimed}, delivered {report.delivered}, "
        f"retrying {report.retrying}, dead {report.dead}, waiting {report.released}"
        + (f", certification events raised {report.raised}" if report.raised else "")
        + (f", taken back from a dead dispatcher {report.reclaimed}" if report.reclaimed else "")
    )
