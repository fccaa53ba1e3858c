"""``gpuatlas export``: every matching offer streamed to a file, by the API's own writers.

Exit codes as in docs/cli.md: 0 ok, 1 error (file exists, not a regular file, no such
directory), 2 usage (a bad option value). The progress bar goes to stderr.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from service.cli.common import CliError, UsageProblem, engine, err, handle_errors
from service.cli.filters import FilterArgs, build_listing, filter_options

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from service.api.params import Listing


class ExportFormat(StrEnum):
    csv = "csv"
    jsonl = "jsonl"
    parquet = "parquet"


@handle_errors
@filter_options
def export_cmd(
    filters: FilterArgs,
    output: Annotated[Path, typer.Option("--output", "-o", help="file to write")],
    fmt: Annotated[
        ExportFormat | None,
        typer.Option("--format", "-f", help="csv, jsonl or parquet (default: from -o)"),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite FILE")] = False,
) -> None:
    """Every matching offer (same filters as offers) streamed to a file, like /v1/export."""
    fmt = fmt or _export_format(output, UsageProblem)
    if output.exists() and not output.is_file():  # renamed over, a folder, FIFO or device
        raise CliError(f"{output} is not a regular file: export writes a file")
    if output.exists() and not force:
        raise CliError(f"{output} exists: use --force to overwrite it")
    if not output.parent.is_dir():
        raise CliError(f"no such directory: {output.parent}")
    eng = engine()
    with eng.connect() as probe:
        listing = build_listing(probe, filters, UsageProblem, CliError)
    written = _export(eng, listing, fmt, output, err)
    err.print(
        f"wrote {written} offers (catalog version {listing.version}) to {output}",
        highlight=False,
    )


def _export_format(output: Path, usage: type[Exception]) -> ExportFormat:
    suffix = output.suffix.lower().lstrip(".")
    if suffix in ExportFormat.__members__:
        return ExportFormat(suffix)
    raise usage("--format: csv, jsonl or parquet (or name -o FILE with that suffix)")


def _counted(batches: Iterator[Any], seen: Callable[[int], None]) -> Iterator[Any]:
    """Pass batches through, reporting each row as the writer consumes it."""
    for batch in batches:
        if isinstance(batch, list):  # the Parquet writer reads a batch once per column
            yield batch
            seen(len(batch))
        else:
            yield _each(batch, seen)


def _each(rows: Iterator[Any], seen: Callable[[int], None]) -> Iterator[Any]:
    for row in rows:
        yield row
        seen(1)


def export_chunks(
    eng: Engine, listing: Listing, fmt: ExportFormat, seen: Callable[[int], None]
) -> Iterator[bytes]:
    """The bytes ``GET /v1/export`` streams for this listing, built by the API's own writers."""
    from service.api.routes import export as api

    filters, compliance, version = listing.filters, listing.compliance, listing.pinned_version
    if fmt is ExportFormat.parquet:
        return api._parquet(_counted(api._rows(eng, filters, compliance, version), seen))
    jsonl = fmt is ExportFormat.jsonl
    batches = _counted(api._raw(eng, filters, compliance, version, jsonl=jsonl), seen)
    return api._jsonl(batches) if jsonl else api._csv(batches)


def _matching(eng: Engine, listing: Listing) -> int:
    from sqlalchemy import func, select

    from service.query.offers import base_query
    from service.query.sql import OFFER

    with eng.connect() as conn:
        ids = base_query(
            (OFFER.c.id,),
            listing.filters,
            conn.dialect.name,
            listing.pinned_version,
            listing.compliance,
        ).subquery()
        return int(conn.execute(select(func.count()).select_from(ids)).scalar() or 0)


def _export(eng: Engine, listing: Listing, fmt: ExportFormat, output: Path, console: Any) -> int:
    """Stream the offers into ``output`` (a hidden temp file until complete, then renamed).

    A bar over the matching offer count goes to ``console`` (stderr).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # a name of its own (two exports to one file each write their own, the last renamed
    # wins whole); created exclusively, with the umask's usual mode
    partial = output.with_name(f".{output.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
    written = 0
    progress = Progress(
        TextColumn(f"export {fmt.value}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    task = progress.add_task("offers", total=_matching(eng, listing))

    def seen(rows: int) -> None:
        nonlocal written
        written += rows
        if written % 1000 < rows:
            progress.update(task, completed=written)

    try:
        created = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with progress, os.fdopen(created, "wb") as handle:
            for chunk in export_chunks(eng, listing, fmt, seen):
                handle.write(chunk)
            progress.update(task, completed=written, total=max(written, 1))
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
    return written
