"""The ``gpuatlas`` command: thin Typer wrappers over the same functions the API uses.

Exit codes: 0 ok, 1 error, 2 usage, 3 partial failure (some crawls failed).
Errors print one line on stderr; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from service.cli.output import Format, emit, emit_jsonl, text
from service.core.config import REFERENCE_DIR, Settings, get_settings
from service.core.db import DatabaseConfigError, make_engine

app = typer.Typer(
    name="gpuatlas",
    help="GPU cloud pricing and compliance catalog.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)
reference_app = typer.Typer(help="Reviewed reference data.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(reference_app, name="reference")

err = Console(stderr=True, soft_wrap=True)
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3
_state: dict[str, Any] = {"debug": False}
F = TypeVar("F", bound=Callable[..., Any])

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table, json, jsonl or csv")]


class CliError(Exception):
    """A failure meant for people: printed as one line."""


class UsageProblem(Exception):
    """The command was called wrongly: one line, exit code 2."""


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, DBAPIError):
        message = str(exc.orig) if exc.orig is not None else str(exc)
        return f"database error: {message.strip().splitlines()[0]}"
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def handle_errors(func: F) -> F:
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except UsageProblem as exc:
            err.print(f"[red]usage error:[/red] {exc}", markup=True, highlight=False)
            raise typer.Exit(EXIT_USAGE) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None
        except Exception as exc:
            if _state["debug"]:
                traceback.print_exc()
            err.print(f"[red]error:[/red] {_one_line(exc)}", markup=True, highlight=False)
            raise typer.Exit(EXIT_ERROR) from None
        finally:
            opened = _state.pop("engine", None)
            if opened is not None:
                opened.dispose()

    return wrapper  # type: ignore[return-value]


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
) -> None:
    _state["debug"] = debug
    from service.alerts.listeners import install  # every ingest writes its alert events

    install()


def settings() -> Settings:
    return get_settings()


def engine(*, migrated: bool = True) -> Engine:
    """The process's one engine (disposed when the command ends)."""
    if _state.get("engine") is not None:
        return _state["engine"]  # type: ignore[no-any-return]
    try:
        eng = make_engine(settings().database_url)
        _state["engine"] = eng
        if migrated:
            from service.core.migrate import is_migrated

            if not is_migrated(eng):
                raise CliError("the database is not migrated: run `gpuatlas db upgrade`")
    except OperationalError as exc:
        raise CliError(
            f"cannot open database {settings().database_url}: {_one_line(exc)}"
        ) from None
    except DatabaseConfigError as exc:
        raise CliError(str(exc)) from None
    return eng


# ----------------------------------------------------------------------------- db


@db_app.command("upgrade")
@handle_errors
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Migrate the database to REVISION (default: head)."""
    from service.core.migrate import upgrade

    upgrade(settings().database_url, revision)
    if revision == "head":
        from service.crawl.sources import sync_sources

        sync_sources(engine())
    err.print(f"database at {revision}")


@db_app.command("downgrade")
@handle_errors
def db_downgrade(revision: Annotated[str, typer.Argument()]) -> None:
    """Migrate the database down to REVISION ('base' empties it)."""
    from service.core.migrate import downgrade

    downgrade(settings().database_url, revision)
    err.print(f"database at {revision}")


# ----------------------------------------------------------------------------- reference


@reference_app.command("load")
@handle_errors
def reference_load(
    directory: Annotated[Path, typer.Option("--dir", help="reference folder")] = REFERENCE_DIR,
    fmt: FormatOpt = Format.table,
) -> None:
    """Load providers, regions and GPU models (idempotent)."""
    from service.compliance.reference_load import load_reference

    report = load_reference(engine(), directory)
    rows = [
        {"dataset": name, "rows": getattr(report, name), "written": report.changed.get(name, 0)}
        for name in ("providers", "regions", "gpus", "aliases")
    ] + [
        {"dataset": name, "rows": None, "written": written}
        for name, written in report.changed.items()
        if name not in ("providers", "regions", "gpus", "aliases")
    ]
    emit(rows, fmt, title="reference data")


# ----------------------------------------------------------------------------- ingest


@app.command()
@handle_errors
def ingest(
    source: Annotated[str, typer.Argument(help="source name (may be new, e.g. 'mytool')")],
    file: Annotated[Path, typer.Option("--file", help="OfferRecords as JSON Lines")],
    complete: Annotated[
        bool, typer.Option(help="withdraw offers of SOURCE missing from FILE")
    ] = True,
    fmt: FormatOpt = Format.table,
) -> None:
    """Ingest OfferRecords (JSON Lines) as one crawl of SOURCE."""
    from schema.records import SOURCE_RE
    from service.catalog.snapshot import ingest_jsonl

    if not SOURCE_RE.match(source):
        raise CliError(f"invalid source name {source!r}: use lowercase letters, digits, '-', ':'")
    if not file.is_file():
        raise CliError(f"no such file: {file}")
    result = ingest_jsonl(engine(), settings(), file, source, complete=complete)
    _print_result(
        source, result.status.value, result.reason, result.catalog_version, result.counts, fmt
    )
    for rejection in result.rejections[:20]:
        err.print(f"rejected record {rejection.position}: {rejection.reason}", highlight=False)
    if result.status.value != "ok":
        raise typer.Exit(EXIT_PARTIAL)


def _print_result(
    source: str,
    status: str,
    reason: str | None,
    version: int | None,
    counts: dict[str, int],
    fmt: Format,
) -> None:
    row = {
        "source": source,
        "status": f"{status}: {reason}" if reason else status,
        "version": version,
        **counts,
    }
    emit([row], fmt, title="ingest")


# ----------------------------------------------------------------------------- crawl


@app.command()
@handle_errors
def crawl(
    sources: Annotated[list[str] | None, typer.Argument(help="source names")] = None,
    all_sources: Annotated[bool, typer.Option("--all", help="every source")] = False,
    from_file: Annotated[
        list[Path] | None, typer.Option("--from-file", help="saved responses to parse")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print records; no network, no database")
    ] = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Fetch (or parse saved files) and ingest one source, several, or --all."""
    from crawlers.registry import all_sources as registry
    from service.crawl.run import crawl_source

    names = list(registry()) if all_sources else list(sources or [])
    if not names:
        raise UsageProblem("name a SOURCE or use --all")
    unknown = [n for n in names if n not in registry()]
    if unknown:
        raise CliError(f"unknown source {unknown[0]!r}; `gpuatlas sources` lists them")
    if from_file and len(names) != 1:
        raise UsageProblem("--from-file takes exactly one SOURCE")
    for path in from_file or []:
        if not path.is_file():
            raise CliError(f"no such file: {path}")
    if dry_run and not from_file:
        raise UsageProblem("--dry-run needs --from-file (it never touches the network)")
    eng = None if dry_run else engine()
    reports = []
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("{task.description:<24}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
        disable=fmt is not Format.table,
    )
    with progress:
        for name in names:
            task = progress.add_task(name, total=None, info="")

            def on_page(pages: int, records: int, task: Any = task) -> None:
                progress.update(task, info=f"{pages} pages, {records} records")

            report = crawl_source(
                eng, settings(), name, from_files=from_file, dry_run=dry_run, on_page=on_page
            )
            progress.update(task, total=1, completed=1, info=report.label)
            reports.append(report)
    if dry_run:
        rows = [r.model_dump(mode="json") for rep in reports for r in rep.records]
        if fmt in (Format.jsonl, Format.table):
            emit_jsonl(rows)
        else:
            emit(rows, fmt)
        for rep in reports:
            for rejection in rep.rejections[:20]:
                err.print(f"rejected {rejection.position}: {rejection.reason}", highlight=False)
    else:
        columns = [
            "source",
            "status",
            "version",
            "seen",
            "added",
            "changed",
            "withdrawn",
            "rejected",
            "unmapped",
            "seconds",
        ]
        rows = [
            {
                "source": r.source,
                "status": r.label,
                "version": r.catalog_version,
                **r.counts,
                "seconds": round(r.seconds, 2),
            }
            for r in reports
        ]
        emit(rows, Format.table if fmt is Format.jsonl else fmt, columns, title="crawl summary")
    if any(r.status.value in ("failed", "quarantined") for r in reports):
        raise typer.Exit(EXIT_PARTIAL)


@app.command("sources")
@handle_errors
def sources_cmd(fmt: FormatOpt = Format.table) -> None:
    """Every source: provider, kind, schedule, last run and when the next one is due."""
    from crawlers.registry import all_sources as registry
    from service.crawl.schedules import next_runs
    from service.query.runs import last_runs

    with engine().connect() as conn:
        runs = last_runs(conn)
    defaults = {name: getattr(cls, "schedule", "6h") for name, cls in registry().items()}
    schedule = next_runs(settings(), defaults, {n: r["started_at"] for n, r in runs.items()})
    rows = []
    for name, cls in registry().items():
        last = runs.get(name)
        rows.append(
            {
                "source": name,
                "provider": getattr(cls, "provider", None),
                "kind": getattr(cls, "kind", None),
                "every_s": schedule[name]["interval_seconds"] or "off",
                "last_run": last["started_at"] if last else None,
                "status": (
                    f"{last['status']}: {last['reason']}"
                    if last and last["reason"]
                    else last["status"]
                    if last
                    else None
                ),
                "next_due": schedule[name]["next_run_due"],
                "credential": getattr(cls, "credential", None),
            }
        )
    emit(rows, fmt, title="sources")


# ----------------------------------------------------------------------------- queries


@app.command()
@handle_errors
def versions(
    limit: Annotated[int, typer.Option(min=1, max=10000)] = 20, fmt: FormatOpt = Format.table
) -> None:
    """Catalog versions, newest first."""
    from service.query.versions import list_versions

    with engine().connect() as conn:
        rows = list_versions(conn, limit)
    emit(
        rows,
        fmt,
        ["id", "created_at", "source", "added", "changed", "withdrawn", "updated", "crawl_run_id"],
        title="catalog versions",
    )


@app.command()
@handle_errors
def runs(
    source: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option(min=1, max=10000)] = 20,
    fmt: FormatOpt = Format.table,
) -> None:
    """Crawl runs, newest first, with status and counts."""
    from service.query.runs import list_crawl_runs

    with engine().connect() as conn:
        rows = list_crawl_runs(conn, source, limit)
    emit(rows, fmt, title="crawl runs")


@app.command()
@handle_errors
def unmapped(
    kind: Annotated[str | None, typer.Option(help="gpu, region or provider")] = None,
    source: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option(min=1, max=10000)] = 50,
    fmt: FormatOpt = Format.table,
) -> None:
    """Names crawls reported that reference data does not know (add aliases for them)."""
    from service.query.quality import list_unmapped

    if kind and kind not in ("gpu", "region", "provider"):
        raise UsageProblem("--kind: one of gpu, region, provider")
    with engine().connect() as conn:
        rows = list_unmapped(conn, kind, source, limit)
    if fmt in (Format.table, Format.csv):
        rows = [{**r, "example_skus": ", ".join(r["example_skus"])} for r in rows]
    emit(
        rows,
        fmt,
        ["kind", "source", "value", "occurrences", "offers", "example_skus", "last_seen_at"],
        title="unmapped names (offers: active offers carrying the name now)",
    )


@app.command()
@handle_errors
def quality(
    source: Annotated[str | None, typer.Option(help="only this source's offers")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="rows per list")] = 20,
    fmt: FormatOpt = Format.table,
) -> None:
    """The data-quality report of GET /v1/quality: offers without a GPU model or a country,
    totals, and identities whose sources disagree on the price (every figure kept)."""
    from service.cli.output import dumps
    from service.query.quality import quality_report

    if fmt not in (Format.table, Format.json):
        raise UsageProblem("--format: table or json (the report is one document)")
    with engine().connect() as conn:
        report = quality_report(conn, source, limit)
    if fmt is Format.json:
        sys.stdout.write(dumps(report).decode() + "\n")
        return
    totals = report["totals"]
    emit(
        [
            {"measure": "active offers", "count": totals["active_offers"], "share": ""},
            {
                "measure": "without a GPU model",
                "count": totals["without_gpu"],
                "share": f"{totals['without_gpu_share']:.1%}",
            },
            {
                "measure": "without a country",
                "count": totals["without_country"],
                "share": f"{totals['without_country_share']:.1%}",
            },
            {
                "measure": "price disagreements",
                "count": totals["price_disagreements"],
                "share": "",
            },
        ],
        fmt,
        title=f"data quality at catalog version {report['catalog_version']}"
        + (f", source {source}" if source else ""),
    )
    emit(
        [{**g, "example_skus": ", ".join(g["example_skus"])} for g in report["unmapped_gpus"]],
        fmt,
        ["name", "source", "offers", "example_skus"],
        title="GPU names without a model",
    )
    emit(
        [
            {**g, "sources": ", ".join(g["sources"]), "example_skus": ", ".join(g["example_skus"])}
            for g in report["unmapped_regions"]
        ],
        fmt,
        ["provider", "region", "sources", "offers", "example_skus"],
        title="regions without a country",
    )
    emit(
        [
            {
                "provider": d["provider"],
                "sku": d["sku"],
                "region": d["region"],
                "kind": d["price_kind"],
                "usd/gpu-h by source": ", ".join(
                    f"{r['source']} {text(r['price_per_gpu_hour_usd'])}" for r in d["reports"]
                ),
            }
            for d in report["price_disagreements"]
        ],
        fmt,
        ["provider", "sku", "region", "kind", "usd/gpu-h by source"],
        title="price disagreements (widest spread first)",
    )


# ----------------------------------------------------------------------------- seed & serve


@app.command()
@handle_errors
def seed(fmt: FormatOpt = Format.table) -> None:
    """Load reference data and replay every source's bundled fixtures into the catalog."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from service.crawl.seed import seed_catalog

    with Progress(
        TextColumn("seeding {task.description:<26}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("", total=None)

        def on_source(name: str, done: int, total: int) -> None:
            progress.update(task, description=name, completed=done, total=total)

        reports = seed_catalog(engine(), settings(), on_source)
    rows = [
        {"source": r.source, "status": r.label, "version": r.catalog_version, **r.counts}
        for r in reports
    ]
    emit(
        rows,
        fmt,
        ["source", "status", "version", "seen", "added", "changed", "rejected"],
        title="seed",
    )


@app.command()
@handle_errors
def serve(
    host: Annotated[str | None, typer.Option(help="bind address")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535)] = None,
) -> None:
    """Serve the API (and, unless disabled, the scheduler)."""
    import uvicorn

    engine()
    config = settings()
    uvicorn.run(
        "service.api.main:create_app",
        factory=True,
        host=host or config.host,
        port=port or config.port,
        log_level="info",
        proxy_headers=False,
    )


@app.command()
@handle_errors
def scheduler() -> None:
    """Run the scheduler alone (no API): crawls each source on its schedule."""
    import logging
    import signal
    import threading

    from service.crawl.scheduler import Leader

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    leader = Leader(engine(), settings())
    leader.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    err.print("scheduler running; Ctrl-C stops it")
    done.wait()
    leader.stop()


from service.cli.compliance import register as register_compliance  # noqa: E402

register_compliance(app)


from service.cli.alerts import register as register_alerts  # noqa: E402

register_alerts(app)


from service.cli.query import register as register_query  # noqa: E402

register_query(app)


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
