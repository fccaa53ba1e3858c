"""``gpuatlas offers | eligible``: the current (or ``--as-of``) catalog for people.

Exit codes as in docs/cli.md: 0 ok, 1 error (unknown version), 2 usage (a bad option
value). Progress goes to stderr; stdout carries only the answer.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any

import typer

from service.cli.common import CliError, FormatOpt, UsageProblem, engine, err, handle_errors
from service.cli.filters import FilterArgs, api_problems, build_listing, filter_options
from service.cli.output import Format, emit, emit_documents, text

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from service.api.params import Listing


SORTS = (
    "price_per_gpu_hour",
    "price",
    "price_per_pflop_hour",
    "gpu_count",
    "provider",
)


def _also_from_text(reports: list[dict[str, Any]]) -> str:
    """``skypilot:lambda 2.49, gpuhunt:lambdalabs 2.5`` (USD per GPU-hour) for tables and CSV."""
    return ", ".join(f"{o['source']} {text(o['price_per_gpu_hour_usd'])}".strip() for o in reports)


def shown_region(row: dict[str, Any]) -> str:
    """The region column: the quoted region, and for an offer quoted for several places
    the location it is shown at (``global → FIN-01``), or that none is published."""
    region = str(row["region"])
    if row.get("location_region"):
        return f"{region} → {row['location_region']}"
    if region == "global":  # service.catalog.locations.GLOBAL_REGION (not imported: CLI start-up)
        return f"{region} (location not published)"
    return region


def _display_rate(
    conn: Connection, listing: Listing, currency: str | None, usage: type[Exception]
) -> tuple[str, Decimal] | None:
    from service.api.routes.offers import display_rate

    if currency is not None and (len(currency) != 3 or not currency.isalpha()):
        raise usage("--currency: use an ISO 4217 code, e.g. EUR")
    with api_problems(usage, usage):
        return display_rate(conn, currency, listing.today)


@handle_errors
@filter_options
def offers(
    filters: FilterArgs,
    sort: Annotated[
        str,
        typer.Option(help=f"{', '.join(SORTS)}; prefix '-' (or use --desc) to reverse"),
    ] = "price_per_gpu_hour",
    desc: Annotated[bool, typer.Option("--desc", help="descending")] = False,
    currency: Annotated[
        str | None, typer.Option(help="also show prices in this ISO 4217 currency")
    ] = None,
    limit: Annotated[int, typer.Option(help="at most N rows (1-100000)")] = 50,
    fmt: FormatOpt = Format.table,
) -> None:
    """Current offers (or --as-of a version or time), cheapest USD per GPU-hour first."""
    from service.core.units import q
    from service.query.facts import offer_context
    from service.query.offers import also_from, list_offers

    key = sort.removeprefix("-")
    if key not in SORTS:
        raise UsageProblem(f"--sort: one of {', '.join(SORTS)} (prefix '-' to reverse)")
    if not 1 <= limit <= 100_000:
        raise UsageProblem("--limit: between 1 and 100000")
    descending = desc or sort.startswith("-")
    with engine().connect() as conn:
        listing = build_listing(conn, filters, UsageProblem, CliError)
        display = _display_rate(conn, listing, currency, UsageProblem)
        rows = list_offers(
            conn,
            listing.filters,
            limit,
            version=listing.pinned_version,
            compliance=listing.compliance,
            sort=key,
            descending=descending,
        )
        others = also_from(conn, rows, version=listing.pinned_version)
        facts = offer_context(conn, rows, listing.today)
    if fmt is not Format.table:
        from schema.api import OfferDetail
        from service.api.serialize import offer_json

        documents = [offer_json(r, facts, display, others[r["id"]]) for r in rows]
        emit_documents(documents, fmt, OfferDetail)
        return
    for r in rows:
        r["gpu_label"] = facts.gpu_label(r)
        r["also_from"] = others[r["id"]]
        if display is not None:
            r["display_gpu_hour"] = (
                q(r["gpu_hour_usd"] * display[1]) if r["gpu_hour_usd"] is not None else None
            )
    display_rows = []
    for r in rows:
        row = {
            "id": r["id"],
            "provider": r["provider"],
            "sku": r["sku"],
            "region": shown_region(r),
            "cc": r["country"],
            "gpu": r["gpu_label"] or "—",
            "gpus": r["gpu_count"],
            "kind": r["price_kind"],
            "price": f"{text(r['amount'])} {r['currency']}/{r['unit']}",
            "usd/gpu-h": r["gpu_hour_usd"],
        }
        if display is not None:
            row[f"{display[0].lower()}/gpu-h"] = r["display_gpu_hour"]
        row["source"] = r["source"]
        row["also from (usd/gpu-h)"] = _also_from_text(r["also_from"])
        display_rows.append(row)
    if key == "price_per_gpu_hour" and not descending:
        title = "offers (USD per GPU-hour ascending)"
    else:
        title = f"offers (by {key}{', descending' if descending else ''})"
    if listing.as_of:
        title += f" at catalog version {listing.version}"
    emit(display_rows, fmt, title=title)
    if not rows:
        err.print("no offers match these filters", highlight=False)
    elif len(rows) == limit:
        err.print(f"first {limit} offers shown; --limit N shows more", highlight=False)


@handle_errors
@filter_options
def eligible(
    filters: FilterArgs,
    explain: Annotated[
        bool, typer.Option("--explain", help="also say why every other provider is out")
    ] = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Providers with a matching offer, each with its cheapest one (USD per GPU-hour)."""
    from service.query.eligibility import eligible_providers, explain_exclusions
    from service.query.facts import catalog_facts

    with engine().connect() as conn:
        listing = build_listing(conn, filters, UsageProblem, CliError)
        rows = eligible_providers(
            conn, listing.filters, version=listing.pinned_version, compliance=listing.compliance
        )
        facts = catalog_facts(conn, listing.today)
        reasons: dict[str, list[str]] = {}
        if explain:
            reasons = explain_exclusions(
                conn,
                listing.filters,
                {r["provider"] for r in rows},
                version=listing.pinned_version,
                compliance=listing.compliance,
            )
    if fmt is not Format.table:
        from schema.api import EligibleRow
        from service.api.serialize import eligible_json

        body = eligible_json(rows, facts.gpu_names, listing.version, reasons if explain else None)
        if fmt is Format.json:
            emit_documents(body, fmt)
        else:  # one line (row) per provider: eligible ones, then the excluded ones
            excluded = body["excluded"] or []
            emit_documents([*body["data"], *excluded], fmt, EligibleRow)
        return
    out: list[dict[str, Any]] = [
        {
            "provider": r["provider"],
            "offer_count": r["offer_count"],
            "offer_id": r["id"],
            "sku": r["sku"],
            "region": r["region"],
            "country": r["country"],
            "location_region": r.get("location_region"),
            "gpu_label": facts.gpu_label(r),
            "gpu_count": r["gpu_count"],
            "price_kind": r["price_kind"],
            "gpu_hour_usd": r["gpu_hour_usd"],
        }
        for r in rows
    ]
    emit(
        [
            {
                "provider": r["provider"],
                "offers": r["offer_count"],
                "cheapest": r["offer_id"],
                "sku": r["sku"],
                "region": shown_region(r),
                "cc": r["country"],
                "gpu": r["gpu_label"] or "—",
                "gpus": r["gpu_count"],
                "kind": r["price_kind"],
                "usd/gpu-h": r["gpu_hour_usd"],
            }
            for r in out
        ],
        fmt,
        title=f"eligible providers (catalog version {listing.version})",
    )
    if explain:
        emit(
            [{"provider": p, "excluded by": "; ".join(why)} for p, why in sorted(reasons.items())],
            fmt,
            ["provider", "excluded by"],
            title="excluded providers",
        )
