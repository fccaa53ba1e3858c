"""``gpuatlas tco``: what a workload costs per provider and price kind, instance and hidden
costs (egress, transfer between regions, storage), as ``GET /v1/tco`` computes it.

Exit codes as in docs/cli.md: 0 ok, 1 error (unknown version), 2 usage (a bad option
value). Progress goes to stderr; stdout carries only the answer.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

import typer

from service.cli.common import CliError, FormatOpt, UsageProblem, engine, err, handle_errors
from service.cli.filters import FilterArgs, build_listing, filter_options
from service.cli.output import Format, emit, text

MAX_TB = Decimal(1_000_000)
COLUMNS = [
    "provider",
    "price_kind",
    "offer_id",
    "region",
    "price_per_gpu_hour_usd",
    "instance_usd",
    "egress_usd",
    "inter_region_usd",
    "storage_usd",
    "total_usd",
    "unknown_costs",
    "break_even_month",
]


def _number(option: str, value: str, low: Decimal, high: Decimal, *, zero: bool) -> Decimal:
    """A decimal option in [low, high] (``low`` itself allowed only when ``zero``)."""
    try:
        number = Decimal(value.strip())
    except InvalidOperation:
        raise UsageProblem(f"{option}: not a number: {value[:40]!r}") from None
    if not number.is_finite() or number > high or number < low or (number == low and not zero):
        bound = "at least" if zero else "more than"
        raise UsageProblem(f"{option}: {bound} {low} and at most {high}")
    return number


@handle_errors
@filter_options
def tco(
    filters: FilterArgs,
    gpu_count: Annotated[str, typer.Option("--gpu-count", help="GPUs in use")] = "8",
    hours_per_month: Annotated[
        str, typer.Option("--hours-per-month", help="hours used a month (at most 730)")
    ] = "730",
    months: Annotated[int, typer.Option(help="months (1-120)")] = 12,
    egress_tb_per_month: Annotated[
        str, typer.Option("--egress-tb-per-month", help="TB sent to the internet a month")
    ] = "0",
    inter_region_tb_per_month: Annotated[
        str,
        typer.Option("--inter-region-tb-per-month", help="TB sent to other regions a month"),
    ] = "0",
    storage_tb: Annotated[str, typer.Option("--storage-tb", help="TB stored")] = "0",
    storage_class: Annotated[
        str, typer.Option("--storage-class", help="block (volumes) or object (buckets)")
    ] = "block",
    fmt: FormatOpt = Format.table,
) -> None:
    """Total cost per provider and price kind: the instance, and egress, transfer and
    storage at each provider's published rates (1 TB = 1,024 GB)."""
    from service.core.units import HOURS_PER_MONTH
    from service.query.tco import Workload
    from service.query.tco import tco as total_cost

    if not 1 <= months <= 120:
        raise UsageProblem("--months: between 1 and 120")
    if storage_class not in ("block", "object"):
        raise UsageProblem("--storage-class: block or object")
    zero = Decimal(0)
    work = Workload(
        gpu_count=_number("--gpu-count", gpu_count, zero, Decimal(100_000), zero=False),
        hours_per_month=_number(
            "--hours-per-month", hours_per_month, zero, HOURS_PER_MONTH, zero=False
        ),
        months=months,
        egress_tb_per_month=_number(
            "--egress-tb-per-month", egress_tb_per_month, zero, MAX_TB, zero=True
        ),
        inter_region_tb_per_month=_number(
            "--inter-region-tb-per-month", inter_region_tb_per_month, zero, MAX_TB, zero=True
        ),
        storage_tb=_number("--storage-tb", storage_tb, zero, MAX_TB, zero=True),
        storage_class=storage_class,  # type: ignore[arg-type]
    )
    with engine().connect() as conn:
        listing = build_listing(conn, filters, UsageProblem, CliError)
        data = total_cost(
            conn,
            listing.filters,
            work,
            on=listing.today,
            version=listing.pinned_version,
            compliance=listing.compliance,
        )
    rows = [{"provider": p["provider"], **o} for p in data for o in p["options"]]
    if fmt is not Format.table:
        if fmt is Format.csv:
            for row in rows:
                row["unknown_costs"] = "; ".join(row["unknown_costs"])
        emit(rows, fmt, COLUMNS)
        return
    emit(
        [
            {
                "provider": r["provider"],
                "kind": r["price_kind"],
                "region": r["region"],
                "usd/gpu-h": r["price_per_gpu_hour_usd"],
                "instance": _usd(r["instance_usd"]),
                "egress": _usd(r["egress_usd"]),
                "inter-region": _usd(r["inter_region_usd"]),
                "storage": _usd(r["storage_usd"]),
                "total": _usd(r["total_usd"]) + (" *" if r["unknown_costs"] else ""),
                "break-even": r["break_even_month"],
            }
            for r in rows
        ],
        fmt,
        title=f"{text(work.gpu_count)} GPUs × {text(work.hours_per_month)} h/month × "
        f"{months} months (USD)",
    )
    if not rows:
        err.print("no offers match these filters", highlight=False)
        return
    if any(r["unknown_costs"] for r in rows):
        err.print("* leaves out a hidden cost whose price is not known:", highlight=False)
        for reason in sorted({u for r in rows for u in r["unknown_costs"]}):
            err.print(f"  {reason}", highlight=False)
    rates = {
        (r["provider"], r["kind"], r["region"]): r for p in data for r in p["hidden_cost_rates"]
    }
    for (provider, kind, region), rate in sorted(rates.items(), key=lambda i: str(i[0])):
        err.print(
            f"{provider} {kind}{' in ' + region if region else ''}: {_tiers(rate)} "
            f"(source: {rate['source_url']}, checked {rate['checked']})",
            highlight=False,
        )


def _usd(value: Decimal | None) -> str:
    return "unknown" if value is None else f"{value:,.2f}"


def _tiers(rate: dict[str, Any]) -> str:
    unit = "GB-month" if rate["kind"].endswith("_storage") else "GB"
    parts = [f"from {text(t['from_gb'])} GB {text(t['price'])}" for t in rate["tiers"]]
    return f"{rate['currency']}/{unit} " + ", ".join(parts)
