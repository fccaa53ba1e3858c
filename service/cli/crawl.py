"""``gpuatlas ingest | crawl | sources | runs | seed``: filling the catalog from sources,
and what the crawls did."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from service.cli.common import (
    EXIT_PARTIAL,
    CliError,
    FormatOpt,
    UsageProblem,
    engine,
    err,
    handle_errors,
    settings,
)
from service.cli.output import Format, emit, emit_jsonl

if TYPE_CHECKING:
    from service.catalog.ingest import Progress
    from service.catalog.results import Rejection


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
    _regular_file(file)
    with _lines_progress(file, enabled=fmt is Format.table) as on_progress:
        result = ingest_jsonl(
            engine(), settings(), file, source, complete=complete, on_progress=on_progress
        )
    _print_result(
        source, result.status.value, result.reason, result.catalog_version, result.counts, fmt
    )
    # the file's first rejected lines (unreadable lines come first in the result)
    for rejection in heapq.nsmallest(SHOWN_REJECTIONS, result.rejections, key=_position):
        line = f"line {rejection.position + 1}"  # a file's rejections are at their lines
        reason = rejection.reason.removeprefix(f"{line}: ")
        err.print(f"rejected {line}: {reason}", highlight=False)
    if len(result.rejections) > SHOWN_REJECTIONS:
        more = len(result.rejections) - SHOWN_REJECTIONS
        err.print(
            f"{more} more rejected lines not shown: gpuatlas rejections {result.crawl_run_id}",
            highlight=False,
        )
    if result.status.value != "ok":
        raise typer.Exit(EXIT_PARTIAL)


def _regular_file(path: Path) -> None:
    """An input file is read more than once (hashed, then parsed): a pipe cannot be."""
    if not path.exists():
        raise CliError(f"no such file: {path}")
    if not path.is_file():
        raise CliError(f"{path} is not a regular file (a folder, FIFO or device)")


SHOWN_REJECTIONS = 20


def _position(rejection: Rejection) -> int:
    return rejection.position


@contextmanager
def _lines_progress(file: Path, *, enabled: bool) -> Iterator[Progress | None]:
    """A bar on stderr over the file's lines while they are ingested (for the table
    format, as ``crawl`` has), then ``finishing`` while the load ends (indexes rebuilt,
    the run recorded); nothing when the file turns out unchanged (confirmed unread)."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    from service.catalog.snapshot import read_jsonl

    bar = Bar(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
        refresh_per_second=2,
    )
    task: Any = None

    def on_progress(read: int, finishing: bool) -> None:
        nonlocal task
        if task is None:  # the first batch: the file is being read, not confirmed
            bar.start()
            task = bar.add_task("lines", total=read_jsonl(file, "").expected())
        total = bar.tasks[0].total or read
        bar.update(
            task,
            completed=min(read, total) if not finishing else total,
            description="finishing" if finishing else "lines",
        )

    try:
        yield on_progress
    finally:
        if task is not None:
            bar.stop()


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
    from crawlers.registry import find_source
    from service.crawl.run import crawl_source
    from service.crawl.scratch import own_scratch

    names = list(registry()) if all_sources else list(sources or [])
    if not names:
        raise UsageProblem("name a SOURCE or use --all")
    unknown = [n for n in names if find_source(n) is None]
    if unknown:
        raise CliError(f"unknown source {unknown[0]!r}; `gpuatlas sources` lists them")
    if from_file and len(names) != 1:
        raise UsageProblem("--from-file takes exactly one SOURCE")
    for path in from_file or []:
        _regular_file(path)
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
    with progress, own_scratch():  # what it spools is swept if this process is killed
        for name in names:
            task = progress.add_task(name, total=None, info="")

            def on_page(pages: int, records: int, task: Any = task) -> None:
                progress.update(task, info=f"{pages} pages, {records} records")

            def on_ingest(read: int, finishing: bool, task: Any = task) -> None:
                info = "finishing" if finishing else f"ingesting: {read:,} records read"
                progress.update(task, info=info)

            report = crawl_source(
                eng,
                settings(),
                name,
                from_files=from_file,
                dry_run=dry_run,
                on_page=on_page,
                on_ingest=on_ingest,
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
    for report in reports:
        if report.detail is not None:  # the summary has the reason; this says what failed
            err.print(f"{report.source} failed: {report.detail}", highlight=False)
    if any(r.status.value in ("failed", "quarantined") for r in reports):
        raise typer.Exit(EXIT_PARTIAL)


@handle_errors
def sources_cmd(fmt: FormatOpt = Format.table) -> None:
    """Every source: provider, kind, schedule, last run and when the next one is due."""
    from crawlers.registry import all_sources as registry
    from service.crawl.schedules import check_source_settings, next_runs
    from service.query.runs import last_runs

    with engine().connect() as conn:
        runs = last_runs(conn)
    defaults = {name: getattr(cls, "schedule", "6h") for name, cls in registry().items()}
    try:
        check_source_settings(settings(), defaults)
    except ValueError as exc:  # listed all the same: this is where the names are read
        err.print(f"[yellow]warning:[/yellow] {exc}", markup=True, highlight=False)
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


@handle_errors
def rejections(
    run_id: Annotated[int, typer.Argument(help="crawl run id (gpuatlas runs)")],
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 1000,
    fmt: FormatOpt = Format.table,
) -> None:
    """The records a crawl run rejected, by line, each with its reason and an excerpt."""
    import orjson

    from service.catalog.runs import MAX_STORED_REJECTIONS
    from service.query.runs import count_rejections, list_rejections
    from service.query.sql import MAX_ROW_ID, NotFound

    if not 1 <= run_id <= MAX_ROW_ID:  # as the API's ids (an INTEGER column's range)
        raise UsageProblem(f"RUN_ID: a crawl run id is a number from 1 to {MAX_ROW_ID}")
    with engine().connect() as conn:
        try:
            run, rows = list_rejections(conn, run_id, limit)
        except NotFound as exc:
            raise CliError(str(exc)) from None
        stored = count_rejections(conn, run_id)
    listed = [
        {
            "line": row["position"] + 1,
            "reason": row["reason"].removeprefix(f"line {row['position'] + 1}: "),
            "record": row["record"]
            if fmt is not Format.table
            else orjson.dumps(row["record"]).decode()[:120]
            if row["record"] is not None
            else "",
        }
        for row in rows
    ]
    emit(listed, fmt, ["line", "reason", "record"], title=f"run {run_id} rejections")
    total = run["rejected"] or 0
    note = f"run {run_id} ({run['source']}, {run['status']}): {total} rejected"
    if total > stored:  # the first ones of a run are stored, each with its reason
        note += f", the first {stored} stored (at most {MAX_STORED_REJECTIONS} a run)"
    if len(rows) < stored:
        note += f", {len(rows)} shown (--limit)"
    err.print(note, highlight=False)


@handle_errors
def runs(
    source: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option(min=1, max=10000)] = 20,
    fmt: FormatOpt = Format.table,
) -> None:
    """Crawl runs, newest first, with status and counts."""
    from service.query.runs import RUN_SUMMARY_COLUMNS, list_crawl_runs

    with engine().connect() as conn:
        rows = list_crawl_runs(conn, source, limit)
    columns = [column.key for column in RUN_SUMMARY_COLUMNS]  # a CSV's header when none ran
    emit(rows, fmt, columns, title="crawl runs")


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
