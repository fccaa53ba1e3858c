"""The ``gpuatlas`` command: the Typer app, and every command and group registered on it.

Each command lives in the module of its group; the modules share ``common`` (errors, exit
codes, the settings and the engine) and ``output`` (table, json, jsonl, csv) and never
import this one. Commands are thin wrappers over the same functions the API uses.

Exit codes: 0 ok, 1 error, 2 usage, 3 partial failure (some crawls failed).
Errors print one line on stderr; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from service.cli import (
    alerts,
    compliance,
    coverage,
    crawl,
    db,
    export,
    history,
    offers,
    quality,
    reference,
    serve,
    tco,
)
from service.cli.common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, err, set_debug

app = typer.Typer(
    name="gpuatlas",
    help="GPU cloud pricing and compliance catalog.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def main(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
) -> None:
    set_debug(debug)
    if ctx.invoked_subcommand != "serve":  # a batch command (service.core.memory)
        from service.core.memory import tune_allocator

        tune_allocator()
    from service.alerts.listeners import install  # every ingest writes its alert events

    install()


# The commands, in the order ``gpuatlas --help`` lists them, then the groups of subcommands.
app.command("ingest")(crawl.ingest)
app.command("crawl")(crawl.crawl)
app.command("sources")(crawl.sources_cmd)
app.command("versions")(history.versions)
app.command("runs")(crawl.runs)
app.command("rejections")(crawl.rejections)
app.command("unmapped")(quality.unmapped)
app.command("quality")(quality.quality)
app.command("coverage")(coverage.coverage)
app.command("seed")(crawl.seed)
app.command("serve")(serve.serve)
app.command("scheduler")(serve.scheduler)
app.command("export-control")(compliance.export_control_cmd)
app.command("offers")(offers.offers)
app.command("eligible")(offers.eligible)
app.command("tco")(tco.tco)
app.command("history")(history.history)
app.command("diff")(history.diff)
app.command("export")(export.export_cmd)

app.add_typer(db.app, name="db")
app.add_typer(reference.app, name="reference")
app.add_typer(alerts.apikey_app, name="apikey")
app.add_typer(alerts.alerts_app, name="alerts")


_CLICK_ERROR: type[Exception] = typer.BadParameter.__mro__[2]  # the ClickException base


def run() -> None:
    """The console script: like ``app()``, but a usage error is one line (exit 2)."""
    try:
        code = app(standalone_mode=False)  # returns an Exit's code instead of raising it
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(EXIT_ERROR)
    except _CLICK_ERROR as exc:
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err.print(f"[red]usage error:[/red] {message}", markup=True, highlight=False)
        sys.exit(getattr(exc, "exit_code", EXIT_USAGE))
    sys.exit(code if isinstance(code, int) else EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    run()
