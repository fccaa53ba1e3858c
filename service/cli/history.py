"""``gpuatlas versions | history | diff``: the catalog through time.

Exit codes as in docs/cli.md: 0 ok, 1 error (unknown offer or version), 2 usage (a bad
option value).
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

import typer

from service.cli.chart import render_chart
from service.cli.common import CliError, FormatOpt, UsageProblem, engine, err, handle_errors
from service.cli.output import Format, emit, text


class Resolution(StrEnum):
    raw = "raw"
    day = "day"
    week = "week"


DIFF_COLUMNS = (
    "kind",
    "offer_id",
    "provider",
    "sku",
    "region",
    "price_kind",
    "gpu_slug",
    "gpu_count",
    "unit",
    "old_amount",
    "old_currency",
    "new_amount",
    "new_currency",
    "old_gpu_hour_usd",
    "new_gpu_hour_usd",
    "change_pct",
)
"""The columns of ``diff -f json|jsonl|csv``, the same with no change (a CSV keeps its header)."""

DIFF_TABLE = (
    "kind",
    "offer",
    "provider",
    "sku",
    "region",
    "price kind",
    "gpu",
    "old",
    "new",
    "change",
)


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


@handle_errors
def history(
    offer_id: Annotated[int, typer.Argument(help="offer id")],
    resolution: Annotated[
        Resolution, typer.Option(help="raw (every observation), day or week buckets")
    ] = Resolution.raw,
    fmt: FormatOpt = Format.table,
) -> None:
    """An offer's price history, oldest first, with provenance, and a chart under it."""
    from schema.types import utcnow
    from service.query.history import Resolution as BucketSize
    from service.query.history import TooManyBuckets, offer_buckets, offer_history
    from service.query.sql import MAX_ROW_ID, NotFound

    if not 1 <= offer_id <= MAX_ROW_ID:  # as the API's path (an INTEGER column's range)
        raise UsageProblem(f"OFFER_ID: an offer id is a number from 1 to {MAX_ROW_ID}")
    bucket: BucketSize = "week" if resolution is Resolution.week else "day"
    with engine().connect() as conn:
        try:
            if resolution is Resolution.raw:
                rows = offer_history(conn, offer_id)
            else:
                rows = offer_buckets(conn, offer_id, bucket, None, utcnow())
        except NotFound as exc:
            raise CliError(str(exc)) from None
        except TooManyBuckets as exc:  # never cut short: the oldest alone would mislead
            raise CliError(f"{exc}: use --resolution week (or raw)") from None
    if resolution is Resolution.raw:
        columns = [
            "valid_from",
            "valid_to",
            "amount",
            "currency",
            "gpu_hour_usd",
            "fx_rate",
            "version_from",
            "version_to",
            "crawl_run_id",
        ]
        points = rows
        price = "amount"
        when = "valid_from"
    else:
        columns = [
            "start",
            "currency",
            "min",
            "max",
            "last",
            "min_price_per_gpu_hour_usd",
            "max_price_per_gpu_hour_usd",
            "last_price_per_gpu_hour_usd",
            "observations",
        ]
        points = rows
        price = "last"
        when = "start"
    emit(rows, fmt, columns, title=f"offer {offer_id} ({resolution.value})")
    if fmt is not Format.table or not points:
        return
    currencies = {p["currency"] for p in points}
    if len(currencies) == 1:
        values = [p[price] for p in points]
        unit = f"price in {currencies.pop()}"
    else:  # the quote changed currency: compare in USD per GPU-hour
        usd = "gpu_hour_usd" if resolution is Resolution.raw else "last_price_per_gpu_hour_usd"
        values = [p[usd] for p in points if p[usd] is not None]
        unit = "USD per GPU-hour"
    if not values:
        return
    first, last = (text(points[i][when])[:10] for i in (0, -1))
    per = "observation" if resolution is Resolution.raw else resolution.value
    lines = render_chart(values, first, last, f"{unit}, one bar per {per}")
    typer.echo("\n".join(lines))


@handle_errors
def diff(
    old: Annotated[int, typer.Argument(help="from catalog version")],
    new: Annotated[int | None, typer.Argument(help="to catalog version (default latest)")] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Offers added, changed (old and new price) or withdrawn between two versions."""
    from service.query.versions import current_version, diff_versions

    for name, value in (("V", old), ("W", new)):
        if value is not None and not 0 <= value <= 2**31 - 1:
            raise UsageProblem(f"{name}: a catalog version is a number >= 0")
    changes: list[dict[str, Any]] = []
    with engine().connect() as conn:
        latest = current_version(conn)
        new = latest if new is None else new
        for value in (old, new):
            if value > latest:
                raise CliError(f"catalog version {value} does not exist (latest {latest})")
        after = 0
        while True:
            page, last = diff_versions(conn, old, new, after_offer=after)
            changes += page
            if last is None:
                break
            after = last
    rows = []
    for c in changes:
        o, a, b = c["offer"], c["old"] or {}, c["new"] or {}
        change = None
        if a.get("amount") and b.get("amount") and a["currency"] == b["currency"]:
            change = ((b["amount"] - a["amount"]) * 100 / a["amount"]).quantize(Decimal("0.1"))
        values = (
            c["kind"],
            o["id"],
            o["provider"],
            o["sku"],
            o["region"],
            o["price_kind"],
            o["gpu_slug"],
            o["gpu_count"],
            o["unit"],
            a.get("amount"),
            a.get("currency"),
            b.get("amount"),
            b.get("currency"),
            a.get("price_per_gpu_hour_usd"),
            b.get("price_per_gpu_hour_usd"),
            change,
        )
        rows.append(dict(zip(DIFF_COLUMNS, values, strict=True)))  # one list of names
    counts = {k: sum(r["kind"] == k for r in rows) for k in ("added", "changed", "withdrawn")}
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    if fmt is not Format.table:
        emit(rows, fmt, DIFF_COLUMNS)
        err.print(f"v{old} → v{new}: {summary}", highlight=False)
        return

    def money(amount: Any, currency: Any) -> str:
        return f"{text(amount)} {currency}" if amount is not None else ""

    emit(
        [
            {
                "kind": r["kind"],
                "offer": r["offer_id"],
                "provider": r["provider"],
                "sku": r["sku"],
                "region": r["region"],
                "price kind": r["price_kind"],
                "gpu": r["gpu_slug"],
                "old": money(r["old_amount"], r["old_currency"]),
                "new": money(r["new_amount"], r["new_currency"]),
                "change": f"{r['change_pct']:+}%" if r["change_pct"] is not None else "",
            }
            for r in rows
        ],
        fmt,
        DIFF_TABLE,
        title=f"catalog v{old} → v{new}: {summary}",
    )
