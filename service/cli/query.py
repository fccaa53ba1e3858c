"""``gpuatlas offers | eligible | history | diff | export``: the catalog queries for people.

Registered on the main Typer app by :func:`register`. The listing filters are the API's:
every option of :func:`filter_options` is a parameter of ``GET /v1/offers`` under the same
name (``--min-gpus`` is ``min_gpus``), and they are parsed by the API's own
:func:`service.api.params.listing`, so the CLI and the API cannot drift apart.

Exit codes as in docs/cli.md: 0 ok, 1 error (unknown offer or version, file exists),
2 usage (a bad option value). Progress goes to stderr; stdout carries only the answer.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from service.cli.output import Format, emit, text

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from service.api.params import Listing

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table, json, jsonl or csv")]
MAX_NUMBER = Decimal(1_000_000)
GDPR_ZONES = ("eu_eea", "adequacy", "any")
CHART_HEIGHT = 8
CHART_MAX_POINTS = 120
BLOCKS = " ▁▂▃▄▅▆▇█"


class Resolution(StrEnum):
    raw = "raw"
    day = "day"
    week = "week"


class ExportFormat(StrEnum):
    csv = "csv"
    jsonl = "jsonl"
    parquet = "parquet"


# --------------------------------------------------------------------------- the filters


@dataclass(frozen=True)
class FilterArgs:
    """The listing filters as typed on the command line (unchecked strings)."""

    gpu: str | None = None
    min_gpus: str | None = None
    max_gpus: str | None = None
    min_gpu_memory_gb: str | None = None
    provider: list[str] | None = None
    price_kind: str | None = None
    region: str | None = None
    country: str | None = None
    not_country: list[str] | None = None
    gdpr: str | None = None
    cert: list[str] | None = None
    provider_hq_not_in: list[str] | None = None
    export_destination: str | None = None
    bare_metal: bool | None = None
    max_price_per_gpu_hour: str | None = None
    source: str | None = None
    include_peers: bool = False
    as_of: str | None = None


_FILTER_OPTIONS: list[tuple[str, Any]] = [
    ("gpu", Annotated[str | None, typer.Option(help="GPU slug or family, e.g. h100")]),
    ("min_gpus", Annotated[str | None, typer.Option("--min-gpus", help="at least N GPUs")]),
    ("max_gpus", Annotated[str | None, typer.Option("--max-gpus", help="at most N GPUs")]),
    (
        "min_gpu_memory_gb",
        Annotated[str | None, typer.Option("--min-gpu-memory-gb", help="GB per GPU")],
    ),
    (
        "provider",
        Annotated[
            list[str] | None, typer.Option(help="provider slug (repeatable or comma-separated)")
        ],
    ),
    ("price_kind", Annotated[str | None, typer.Option("--price-kind", help="e.g. on_demand")]),
    ("region", Annotated[str | None, typer.Option(help="provider region code")]),
    ("country", Annotated[str | None, typer.Option(help="ISO 3166 alpha-2, e.g. DE")]),
    (
        "not_country",
        Annotated[
            list[str] | None,
            typer.Option("--not-country", help="exclude regions in these countries"),
        ],
    ),
    (
        "gdpr",
        Annotated[
            str | None,
            typer.Option(help="eu_eea, adequacy or any: where EU personal data may go"),
        ],
    ),
    (
        "cert",
        Annotated[
            list[str] | None,
            typer.Option(help="certification the provider must hold today (repeatable)"),
        ],
    ),
    (
        "provider_hq_not_in",
        Annotated[
            list[str] | None,
            typer.Option(
                "--provider-hq-not-in", help="exclude providers headquartered in these countries"
            ),
        ],
    ),
    (
        "export_destination",
        Annotated[
            str | None,
            typer.Option(
                "--export-destination",
                help="drop GPUs needing an export licence for this country",
            ),
        ],
    ),
    (
        "bare_metal",
        Annotated[bool | None, typer.Option("--bare-metal/--no-bare-metal", help="bare metal")],
    ),
    (
        "max_price_per_gpu_hour",
        Annotated[str | None, typer.Option("--max-price-per-gpu-hour", help="USD")],
    ),
    ("source", Annotated[str | None, typer.Option(help="crawl source name")]),
    (
        "include_peers",
        Annotated[
            bool,
            typer.Option(
                "--include-peers",
                help="every source's copy of an offer, not only the most authoritative one",
            ),
        ],
    ),
    (
        "as_of",
        Annotated[str | None, typer.Option("--as-of", help="catalog version or ISO 8601 time")],
    ),
]


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command every listing filter option; it receives them as ``filters: FilterArgs``.

    One list of options for ``offers``, ``eligible`` and ``export``, so they cannot differ.
    """
    own = inspect.signature(func, eval_str=True)
    params = [p for p in own.parameters.values() if p.name != "filters"]
    extra = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=annotation,
            default=getattr(FilterArgs, name),
        )
        for name, annotation in _FILTER_OPTIONS
    ]
    names = {name for name, _ in _FILTER_OPTIONS}

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        picked = {name: kwargs.pop(name) for name in list(kwargs) if name in names}
        return func(*args, filters=FilterArgs(**picked), **kwargs)

    keyword_only = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
    wrapper.__signature__ = own.replace(parameters=[*keyword_only, *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in (*keyword_only, *extra)}
    del wrapper.__wrapped__  # typer must read the new signature, not the original's
    return wrapper


def _number(name: str, value: str | None, usage: type[Exception]) -> Decimal | None:
    if value is None:
        return None
    try:
        number = Decimal(value.strip())
    except InvalidOperation:
        raise usage(f"--{name}: {value!r} is not a number") from None
    if not number.is_finite() or not Decimal(0) <= number <= MAX_NUMBER:
        raise usage(f"--{name}: must be between 0 and {MAX_NUMBER}")
    return number


def _country(name: str, value: str | None, usage: type[Exception]) -> str | None:
    if value is None:
        return None
    if len(value) != 2 or not value.isascii() or not value.isalpha():
        raise usage(f"--{name}: use an ISO 3166 alpha-2 code, e.g. DE")
    return value


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@contextmanager
def _api_problems(usage: type[Exception], error: type[Exception]) -> Iterator[None]:
    """The API's validation errors (RFC 9457 problems) as CLI errors: 422 is a usage error."""
    from service.api.problems import Problem

    try:
        yield
    except Problem as exc:
        message = exc.detail or exc.title
        for param in exc.invalid_params or []:
            name = param.get("name", "")
            if message.startswith(f"{name}:"):
                message = _flag(name) + message[len(name) :]
        raise (usage if exc.status == 422 else error)(message) from None


def build_listing(
    conn: Connection, args: FilterArgs, usage: type[Exception], error: type[Exception]
) -> Listing:
    """Check the options as the API's Query() declarations do, then parse them as it does."""
    from schema.enums import PriceKind
    from service.api.params import listing

    for name, limit in (("gpu", 64), ("region", 100), ("source", 100), ("as_of", 40)):
        value = getattr(args, name)
        if value is not None and len(value) > limit:
            raise usage(f"{_flag(name)}: longer than {limit} characters")
    kind = None
    if args.price_kind is not None:
        if args.price_kind not in PriceKind.__members__:
            known = ", ".join(PriceKind.__members__)
            raise usage(f"--price-kind: unknown {args.price_kind!r} (one of {known})")
        kind = PriceKind(args.price_kind)
    if args.gdpr is not None and args.gdpr not in GDPR_ZONES:
        raise usage(f"--gdpr: one of {', '.join(GDPR_ZONES)}")
    with _api_problems(usage, error):
        return listing(
            conn,
            gpu=args.gpu,
            min_gpus=_number("min-gpus", args.min_gpus, usage),
            max_gpus=_number("max-gpus", args.max_gpus, usage),
            min_gpu_memory_gb=_number("min-gpu-memory-gb", args.min_gpu_memory_gb, usage),
            provider=args.provider,
            price_kind=kind,
            region=args.region,
            country=_country("country", args.country, usage),
            not_country=args.not_country,
            gdpr=args.gdpr,  # type: ignore[arg-type]
            cert=args.cert,
            provider_hq_not_in=args.provider_hq_not_in,
            export_destination=_country("export-destination", args.export_destination, usage),
            bare_metal=args.bare_metal,
            max_price_per_gpu_hour=_number(
                "max-price-per-gpu-hour", args.max_price_per_gpu_hour, usage
            ),
            source=args.source,
            include_peers=args.include_peers,
            as_of=args.as_of,
        )


# --------------------------------------------------------------------------- the chart


def chart(values: Sequence[Decimal], height: int = CHART_HEIGHT) -> list[str]:
    """A bar chart in unicode blocks, one column per value, ``height`` rows, lowest at 1/8.

    Exact: the scaling is done in Decimal. The bottom row has a block for every value.
    """
    if not values:
        return []
    low, high = min(values), max(values)
    steps = height * 8
    span = high - low
    levels = [steps // 2 if not span else 1 + int((v - low) * (steps - 1) / span) for v in values]
    rows = []
    for row in range(height - 1, -1, -1):
        rows.append("".join(BLOCKS[max(0, min(8, level - row * 8))] for level in levels))
    return rows


def render_chart(
    values: Sequence[Decimal], first: str, last: str, unit: str, *, height: int = CHART_HEIGHT
) -> list[str]:
    """The chart with its y-axis (max at the top, min at the bottom) and the first/last dates."""
    note = ""
    if len(values) > CHART_MAX_POINTS:
        note = f"  (last {CHART_MAX_POINTS} of {len(values)} points)"
        values = values[-CHART_MAX_POINTS:]
    rows = chart(values, height)
    high, low = text(max(values)), text(min(values))
    width = max(len(high), len(low))
    out = [f"{unit}{note}"]
    for index, row in enumerate(rows):
        label = low if index == len(rows) - 1 else high if index == 0 and high != low else ""
        out.append(f"{label:>{width}} ┤{row}")
    out.append(" " * width + " └" + "─" * len(values))
    gap = max(1, len(values) - len(first) - len(last) + 2)
    out.append(" " * (width + 1) + first + (" " * gap + last if last != first else ""))
    return out


# --------------------------------------------------------------------------- commands

OFFER_COLUMNS = [
    "id",
    "provider",
    "sku",
    "region",
    "country",
    "gpu_slug",
    "gpu_name",
    "gpu_name_raw",
    "gpu_inferred",
    "gpu_count",
    "gpu_memory_gb",
    "bare_metal",
    "price_kind",
    "amount",
    "currency",
    "unit",
    "gpu_hour_usd",
    "hourly_usd",
    "amount_usd",
    "fx_rate",
    "fx_date",
    "source",
    "also_from",
    "last_changed_at",
    "crawl_run_id",
    "raw_sha256",
    "location_region",
    "locations",
]
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
    with _api_problems(usage, usage):
        return display_rate(conn, currency, listing.today)


def register(app: typer.Typer) -> None:
    from service.cli.app import CliError, UsageProblem, engine, err, handle_errors

    @app.command()
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
        from service.query.facts import catalog_facts
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
            facts = catalog_facts(conn, listing.today)
        for r in rows:
            r["gpu_name"] = facts.gpu_names.get(r["gpu_slug"]) if r["gpu_slug"] else None
            r["gpu_label"] = facts.gpu_label(r)
            r["also_from"] = others[r["id"]]
            if fmt is Format.csv:
                r["also_from"] = _also_from_text(r["also_from"])
        columns = list(OFFER_COLUMNS)
        if display is not None:
            code, per_usd = display
            columns += ["display_currency", "display_amount", "display_gpu_hour"]
            for r in rows:
                r["display_currency"] = code
                r["display_amount"] = q(r["amount_usd"] * per_usd) if r["amount_usd"] else None
                r["display_gpu_hour"] = (
                    q(r["gpu_hour_usd"] * per_usd) if r["gpu_hour_usd"] is not None else None
                )
        if fmt is not Format.table:
            if fmt is Format.csv:
                from service.catalog.locations import locations_text

                for r in rows:
                    r["locations"] = locations_text(r["locations"])
            emit(rows, fmt, columns)
            return
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

    @app.command()
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
        out: list[dict[str, Any]] = [
            {
                "provider": r["provider"],
                "eligible": True,
                "offer_count": r["offer_count"],
                "offer_id": r["id"],
                "sku": r["sku"],
                "region": r["region"],
                "country": r["country"],
                "location_region": r.get("location_region"),
                "gpu_slug": r["gpu_slug"],
                "gpu_name": facts.gpu_names.get(r["gpu_slug"]) if r["gpu_slug"] else None,
                "gpu_label": facts.gpu_label(r),
                "gpu_count": r["gpu_count"],
                "price_kind": r["price_kind"],
                "amount": r["amount"],
                "currency": r["currency"],
                "unit": r["unit"],
                "gpu_hour_usd": r["gpu_hour_usd"],
                "excluded_by": None,
            }
            for r in rows
        ]
        out += [
            {"provider": p, "eligible": False, "offer_count": 0, "excluded_by": "; ".join(why)}
            for p, why in sorted(reasons.items())
        ]
        if fmt is not Format.table:
            emit(out, fmt, list(out[0]) if out else ["provider", "eligible"])
            return
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
                if r["eligible"]
            ],
            fmt,
            title=f"eligible providers (catalog version {listing.version})",
        )
        if explain:
            emit(
                [
                    {"provider": r["provider"], "excluded by": r["excluded_by"]}
                    for r in out
                    if not r["eligible"]
                ],
                fmt,
                ["provider", "excluded by"],
                title="excluded providers",
            )

    @app.command()
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
        from service.query.history import history_buckets, offer_history
        from service.query.sql import NotFound

        with engine().connect() as conn:
            try:
                rows = offer_history(conn, offer_id)
            except NotFound as exc:
                raise CliError(str(exc)) from None
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
            bucket: BucketSize = "week" if resolution is Resolution.week else "day"
            rows = history_buckets(rows, bucket, None, utcnow())
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

    @app.command()
    @handle_errors
    def diff(
        old: Annotated[int, typer.Argument(help="from catalog version")],
        new: Annotated[
            int | None, typer.Argument(help="to catalog version (default latest)")
        ] = None,
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
            rows.append(
                {
                    "kind": c["kind"],
                    "offer_id": o["id"],
                    "provider": o["provider"],
                    "sku": o["sku"],
                    "region": o["region"],
                    "price_kind": o["price_kind"],
                    "gpu_slug": o["gpu_slug"],
                    "gpu_count": o["gpu_count"],
                    "unit": o["unit"],
                    "old_amount": a.get("amount"),
                    "old_currency": a.get("currency"),
                    "new_amount": b.get("amount"),
                    "new_currency": b.get("currency"),
                    "old_gpu_hour_usd": a.get("price_per_gpu_hour_usd"),
                    "new_gpu_hour_usd": b.get("price_per_gpu_hour_usd"),
                    "change_pct": change,
                }
            )
        counts = {k: sum(r["kind"] == k for r in rows) for k in ("added", "changed", "withdrawn")}
        summary = ", ".join(f"{n} {k}" for k, n in counts.items())
        if fmt is not Format.table:
            emit(rows, fmt, list(rows[0]) if rows else ["kind", "offer_id"])
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

    @app.command("export")
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

    partial = output.with_name(f".{output.name}.partial")
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
        with progress, partial.open("wb") as handle:
            for chunk in export_chunks(eng, listing, fmt, seen):
                handle.write(chunk)
            progress.update(task, completed=written, total=max(written, 1))
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
    return written
