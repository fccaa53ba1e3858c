"""``gpuatlas unmapped | quality``: what the catalog does not know, and where sources disagree."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from service.cli.common import FormatOpt, UsageProblem, engine, handle_errors
from service.cli.output import Format, dumps, emit, text


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


@handle_errors
def quality(
    source: Annotated[str | None, typer.Option(help="only this source's offers")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="rows per list")] = 20,
    fmt: FormatOpt = Format.table,
) -> None:
    """The data-quality report of GET /v1/quality: offers without a GPU model or a country,
    totals, and identities whose sources disagree on the price (every figure kept)."""
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
