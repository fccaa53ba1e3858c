"""``gpuatlas coverage``: the coverage matrix of GET /v1/coverage, per provider."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from service.cli.common import engine, handle_errors
from service.cli.output import Format, dumps, emit


class CoverageFormat(StrEnum):
    table = "table"
    json = "json"
    md = "md"


@handle_errors
def coverage(
    provider: Annotated[str | None, typer.Option(help="only this provider (a slug)")] = None,
    fmt: Annotated[
        CoverageFormat,
        typer.Option("--format", "-f", help="table, json or md (the README's Markdown table)"),
    ] = CoverageFormat.table,
) -> None:
    """Which providers the catalog knows, through which sources, and how well: per provider
    its sources (API, page, peer) with their last good crawl, active offers by price kind,
    the share with a known GPU and location, certifications, first-party or peer-only prices."""
    from service.query.coverage import coverage_markdown, coverage_matrix, coverage_rows

    with engine().connect() as conn:
        document = coverage_matrix(conn, provider)
    if fmt is CoverageFormat.json:
        sys.stdout.write(dumps(document).decode() + "\n")
    elif fmt is CoverageFormat.md:
        sys.stdout.write(coverage_markdown(document))
    else:
        totals = document["totals"]
        emit(
            coverage_rows(document, joiner="\n"),
            Format.table,
            title=f"coverage at catalog version {document['catalog_version']}: "
            f"{totals['with_offers']} of {totals['providers']} providers with offers",
        )
