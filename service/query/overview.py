"""The GPU overview: per GPU model, the cheapest current price of each price kind, who
offers it, a 90-day trend and a compliance summary; per GPU, the provider x price kind
matrix and each provider's daily cheapest price (never writes).

Cost, whatever the catalog size (docs/web.md, docs/benchmarks.md):

* **one grouped aggregate** over the current offers, ``GROUP BY gpu_slug, price_kind,
  provider``: the cheapest integer price key (``offer.gpu_hour_usd_e10``, exact: USD per
  GPU-hour x 10^10), whether an EU/EEA place is among them, and the cheapest on-demand key
  of the offers unchanged since the trend's window opened (the flat part of the trend);
* **the winners**: the offers holding each cell's cheapest key, one statement over
  ``ix_offer_gpu_slug_status_gpu_hour``; a winner that a more authoritative source
  outranks (:func:`service.query.sql.outranked`: the listing shows that source's row
  instead) is replaced by the listing's own first row for that cell, so the overview and
  ``/offers?gpu=…&price_kind=…`` agree;
* **the trend**: the observations opened or closed since the window opened (found along
  ``ix_price_observation_version_from`` / ``_version_to`` from the catalog version in
  force then), grouped in SQL by (GPU, first day, last day) with their cheapest key, then
  swept day by day in Python (a heap): a day's figure is the cheapest price in force at
  any time that day. Bounded by the window (91 days) and the number of GPUs, not offers.

The trend reads every source's observations (peers included) and offers withdrawn since;
the filters apply to the offers' attributes as they are today.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, case, exists, func, literal_column, or_, select

from schema.enums import OfferStatus
from schema.text import ascii_digits
from service.compliance.queries import ComplianceError, export_control
from service.core.in_list import among
from service.query.facts import catalog_facts
from service.query.filters import ComplianceSets, OfferFilters, apply_filters
from service.query.offers import get_offer, list_offers, live_gpu_slugs
from service.query.sql import (
    GPU,
    LOCATION,
    MAX_ROW_ID,
    OBS,
    OBS_VALID_FROM,
    OBS_VALID_TO,
    OFFER,
    PROVIDER,
    VERSION,
    gpu_hour_key,
    outranked,
    unix_seconds,
    with_versions,
)

OVERVIEW_KINDS: tuple[str, ...] = ("on_demand", "spot", "reserved_1y", "reserved_3y")
"""The price kinds the overview has a column for (the GPU page shows every kind offered)."""
TREND_DAYS = 90
WINNER_ROUNDS = 3
"""Offers at a cell's cheapest price tested for peer precedence before asking the listing."""
TREND_KIND = "on_demand"
E10 = Decimal(10) ** 10


def from_key(key: int | None) -> Decimal | None:
    """USD per GPU-hour from its exact integer key (x 10^10), at most 10 decimals."""
    if key is None:
        return None
    return Decimal(format((Decimal(int(key)) / E10).normalize(), "f"))  # never 1E+2


@dataclass
class Cell:
    """The cheapest current offer of one (GPU, price kind) or (provider, price kind)."""

    key: int
    provider: str
    offer_id: int | None = None


@dataclass
class Overview:
    gpus: list[dict[str, Any]] = field(default_factory=list)
    trend_start: date | None = None
    trend_end: date | None = None


def _day(column: Any, dialect: str) -> Any:
    """An observation time's UTC day as 'YYYY-MM-DD' text (SQLite keeps microseconds
    since 1970: ``schema.types.UTCMicros``)."""
    if dialect == "sqlite":
        return func.date(unix_seconds(column), "unixepoch")
    return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD")


def version_at_start(conn: Connection, start: datetime) -> int:
    """The catalog version in force at ``start`` (0: none yet)."""
    stmt = select(func.max(VERSION.c.id)).where(VERSION.c.created_at <= start)
    return int(conn.execute(stmt).scalar() or 0)


def trend_window(today: date) -> tuple[date, date, datetime]:
    first = today - timedelta(days=TREND_DAYS - 1)
    return first, today, datetime(first.year, first.month, first.day, tzinfo=UTC)


def _current(
    filters: OfferFilters,
    dialect: str,
    compliance: ComplianceSets | None,
    *,
    status_scan: bool = False,
    keys: Sequence[int] | None = None,
) -> Any:
    """Current offers of a known GPU with a price per GPU-hour, filtered (no statement yet)."""
    status: Any = OFFER.c.status == OfferStatus.active.value
    known: Any = OFFER.c.gpu_slug.is_not(None)
    if status_scan:
        # exactly the predicate of the partial ix_offer_gpu_kind_provider, a literal so the
        # planners can prove it (on SQLite unseekable: schema.prices.ACTIVE_KNOWN_GPU)
        active: Any = literal_column(f"'{OfferStatus.active.value}'")
        sqlite = dialect == "sqlite"
        status = (literal_column("+offer.status") if sqlite else OFFER.c.status) == active
        if sqlite:
            known = literal_column("+offer.gpu_slug").is_not(None)
    key = OFFER.c.gpu_hour_usd_e10
    # with ``keys``: IN (…), seeks on the price indexes (IS NOT NULL would be taken as a
    # range, walking every price of the GPU)
    priced = key.is_not(None) if keys is None else key.in_(keys)
    stmt = select(OFFER.c.id).where(status, known, priced)
    return apply_filters(stmt, filters, dialect, compliance)


def _eu_flag(eu: Sequence[str]) -> Any:
    if not eu:
        return literal_column("0")
    placed = exists().where(LOCATION.c.offer_id == OFFER.c.id, LOCATION.c.country.in_(eu))
    return case(
        (OFFER.c.country.in_(eu), 1),
        (OFFER.c.country.is_(None) & placed, 1),
        else_=0,
    )


def grouped(
    conn: Connection,
    filters: OfferFilters,
    compliance: ComplianceSets | None,
    eu: Sequence[str],
    flat_since: datetime,
    *,
    gpus: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """One row per (GPU, price kind, provider) of current offers: cheapest key, EU flag,
    and the cheapest key of offers unchanged since ``flat_since`` (a trend's floor)."""
    dialect = conn.dialect.name
    key = OFFER.c.gpu_hour_usd_e10
    flat = case(
        (
            OFFER.c.last_changed_at <= flat_since,
            key,
        ),
        else_=None,
    )
    base = _current(filters, dialect, compliance, status_scan=True)
    if gpus is not None:
        base = base.where(OFFER.c.gpu_slug.in_(gpus))
    stmt = (
        base.with_only_columns(
            OFFER.c.gpu_slug,
            OFFER.c.price_kind,
            OFFER.c.provider,
            func.min(key).label("best"),
            func.max(_eu_flag(eu)).label("eu"),
            func.min(flat).label("flat"),
        )
        .group_by(OFFER.c.gpu_slug, OFFER.c.price_kind, OFFER.c.provider)
        .order_by(None)
    )
    return [dict(r) for r in conn.execute(stmt).mappings()]


def _winners(
    conn: Connection,
    cells: dict[tuple[str, str], Cell],
    filters: OfferFilters,
    compliance: ComplianceSets | None,
    *,
    by_provider: bool = False,
) -> None:
    """Fill each cell's ``offer_id``: the listing's first offer at that price (lowest id,
    not outranked); a cell whose every holder is outranked asks the listing itself."""
    if not cells:
        return
    dialect = conn.dialect.name
    firsts = sorted({first for first, _ in cells})
    keys = sorted({cell.key for cell in cells.values()})
    holder = OFFER.c.provider if by_provider else OFFER.c.gpu_slug
    candidates: dict[tuple[str, str], list[int]] = {}
    for start in range(0, len(keys), 500):
        # index seeks: (gpu, 'active', key) or ('active', key) per key
        stmt = (
            _current(filters, dialect, compliance, keys=keys[start : start + 500])
            .with_only_columns(
                OFFER.c.id, holder.label("first"), OFFER.c.price_kind, OFFER.c.gpu_hour_usd_e10
            )
            .order_by(OFFER.c.id)
        )
        if not by_provider:
            stmt = stmt.where(OFFER.c.gpu_slug.in_(firsts))
        for r in conn.execute(stmt):
            cell = cells.get((r.first, r.price_kind))
            if cell is not None and r.gpu_hour_usd_e10 == cell.key:
                candidates.setdefault((r.first, r.price_kind), []).append(r.id)
    # the precedence probes only for each cell's next candidate (usually one round)
    found: dict[tuple[str, str], int] = {}
    tried = 0
    while tried < WINNER_ROUNDS:
        asked = {
            n: ids[tried] for n, ids in candidates.items() if n not in found and tried < len(ids)
        }
        if not asked:
            break
        hidden = set(
            conn.execute(
                select(OFFER.c.id).where(
                    among(OFFER.c.id, sorted(asked.values()), dialect), outranked(None, dialect)
                )
            ).scalars()
        )
        found.update({n: i for n, i in asked.items() if i not in hidden})
        tried += 1
    for name, cell in cells.items():
        if name in found:
            cell.offer_id = found[name]
            continue
        first, kind = name
        narrowed = (
            replace(filters, provider=first, price_kind=kind)
            if by_provider
            else replace(filters, gpu=first, price_kind=kind)
        )
        rows = list_offers(conn, narrowed, 1, compliance=compliance)
        if rows and rows[0]["gpu_hour_usd"] is not None:
            cell.key = int((Decimal(rows[0]["gpu_hour_usd"]) * E10).to_integral_value())
            cell.provider, cell.offer_id = rows[0]["provider"], rows[0]["id"]


def daily_cheapest(
    conn: Connection,
    filters: OfferFilters,
    compliance: ComplianceSets | None,
    today: date,
    flat: dict[str, int],
    *,
    by: str = "gpu_slug",
    gpu: str | None = None,
    kind: str = TREND_KIND,
) -> dict[str, list[Decimal | None]]:
    """Per GPU (``by="gpu_slug"``) or per provider of ``gpu`` (``by="provider"``): the
    cheapest USD per GPU-hour of ``kind`` in force on each of the window's days, oldest
    first (None: no price that day). ``flat``: per key, the cheapest price in force
    through the whole window (offers unchanged since it opened), from :func:`grouped`."""
    dialect = conn.dialect.name
    first, last, start = trend_window(today)
    since = version_at_start(conn, start)
    group = OFFER.c[by]
    obs_key = gpu_hour_key(dialect, version=0)
    opened, closed = _day(OBS_VALID_FROM, dialect), _day(OBS_VALID_TO, dialect)
    stmt = (
        select(group.label("k"), opened.label("d0"), closed.label("d1"), func.min(obs_key))
        .select_from(with_versions(OBS.join(OFFER, OFFER.c.id == OBS.c.offer_id)))
        .where(
            or_(OBS.c.version_from > since, OBS.c.version_to > since),
            or_(OBS.c.version_to.is_(None), start < OBS_VALID_TO),
            OFFER.c.price_kind == kind,
            OFFER.c.gpu_slug.is_not(None),
            OBS.c.gpu_hour_usd.is_not(None),
        )
        .group_by(group, opened, closed)
    )
    if gpu is not None:
        stmt = stmt.where(OFFER.c.gpu_slug == gpu)
    stmt = apply_filters(stmt, replace(filters, max_price_per_gpu_hour=None), dialect, compliance)
    days = (last - first).days + 1
    spans: dict[str, list[tuple[int, int, int]]] = {}
    for k, d0, d1, best in conn.execute(stmt):
        if best is None:
            continue
        begin = max(0, (date.fromisoformat(d0) - first).days)
        end = days - 1 if d1 is None else min(days - 1, (date.fromisoformat(d1) - first).days)
        if end >= begin:
            spans.setdefault(k, []).append((begin, end, int(best)))
    out: dict[str, list[Decimal | None]] = {}
    for k in sorted(set(spans) | set(flat)):
        out[k] = [from_key(v) for v in _sweep(spans.get(k, []), flat.get(k), days)]
    return out


def _sweep(spans: list[tuple[int, int, int]], floor: int | None, days: int) -> list[int | None]:
    """Per day, the least value among ``floor`` and the spans covering it."""
    spans = sorted(spans)
    heap: list[tuple[int, int]] = []
    out: list[int | None] = []
    at = 0
    for day in range(days):
        while at < len(spans) and spans[at][0] == day:
            heapq.heappush(heap, (spans[at][2], spans[at][1]))
            at += 1
        while heap and heap[0][1] < day:
            heapq.heappop(heap)
        best = heap[0][0] if heap else None
        if floor is not None and (best is None or floor < best):
            best = floor
        out.append(best)
    return out


def gpu_overview(
    conn: Connection,
    filters: OfferFilters,
    compliance: ComplianceSets | None,
    today: date,
    eu: Iterable[str],
) -> Overview:
    """One row per GPU model with current offers matching ``filters`` (see the module)."""
    eu_list = sorted(eu)
    first, last, start = trend_window(today)
    rows = grouped(conn, filters, compliance, eu_list, start)
    hq: dict[str, str | None] = {
        str(r[0]): r[1] for r in conn.execute(select(PROVIDER.c.slug, PROVIDER.c.hq_country))
    }
    per_gpu: dict[str, dict[str, Any]] = {}
    cells: dict[tuple[str, str], Cell] = {}
    flat: dict[str, int] = {}
    for r in rows:
        slug, kind, provider, best = r["gpu_slug"], r["price_kind"], r["provider"], r["best"]
        gpu = per_gpu.setdefault(slug, {"providers": set(), "eu": False})
        gpu["providers"].add(provider)
        gpu["eu"] = gpu["eu"] or bool(r["eu"])
        if r["flat"] is not None and kind == TREND_KIND:
            flat[slug] = min(int(r["flat"]), flat.get(slug, int(r["flat"])))
        if kind in OVERVIEW_KINDS:
            cell = cells.get((slug, kind))
            if cell is None or (int(best), provider) < (cell.key, cell.provider):
                cells[(slug, kind)] = Cell(int(best), provider)
    _winners(conn, cells, filters, compliance)
    trend = daily_cheapest(conn, filters, compliance, today, flat) if per_gpu else {}
    specs = {
        g["slug"]: dict(g)
        for g in conn.execute(
            select(GPU.c.slug, GPU.c.name, GPU.c.vendor, GPU.c.family, GPU.c.memory_gb).where(
                GPU.c.slug.in_(sorted(per_gpu))
            )
        ).mappings()
    }
    out = Overview(trend_start=first, trend_end=last)
    for slug, info in per_gpu.items():
        spec = specs.get(slug, {"name": slug, "vendor": None, "family": None, "memory_gb": None})
        providers = sorted(info["providers"])
        cheapest = {}
        for kind in OVERVIEW_KINDS:
            cell = cells.get((slug, kind))
            cheapest[kind] = (
                None
                if cell is None
                else {
                    "price_per_gpu_hour_usd": from_key(cell.key),
                    "provider": cell.provider,
                    "offer_id": cell.offer_id,
                }
            )
        out.gpus.append(
            {
                "slug": slug,
                "name": spec["name"],
                "vendor": spec["vendor"],
                "family": spec["family"],
                "memory_gb": spec["memory_gb"],
                "provider_count": len(providers),
                "providers": providers,
                "cheapest": cheapest,
                "trend": trend.get(slug, [None] * TREND_DAYS),
                "eu_eea_region": info["eu"],
                "non_us_provider": any(hq.get(p) not in (None, "US") for p in providers),
            }
        )
    out.gpus.sort(key=_order)
    return out


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    """The most widely offered first, then the dearest on-demand (newest parts), then name."""
    on_demand = row["cheapest"]["on_demand"]
    price = on_demand["price_per_gpu_hour_usd"] if on_demand else None
    return (-row["provider_count"], price is None, -(price or 0), row["name"])


def gpu_matrix(
    conn: Connection,
    slug: str,
    filters: OfferFilters,
    compliance: ComplianceSets | None,
    today: date,
) -> dict[str, Any]:
    """One GPU: per provider and price kind the cheapest current offer; per provider the
    daily cheapest on-demand price (the GPU's first price kind when none is on-demand)."""
    first, last, start = trend_window(today)
    gpus = live_gpu_slugs(conn, slug)
    rows = grouped(conn, replace(filters, gpu=slug), compliance, [], start, gpus=gpus)
    cells: dict[tuple[str, str], Cell] = {}
    for r in rows:
        cells[(r["provider"], r["price_kind"])] = Cell(int(r["best"]), r["provider"])
    _winners(conn, cells, replace(filters, gpu=slug), compliance, by_provider=True)
    kinds_seen = {kind for _, kind in cells}
    kinds = [k for k in OVERVIEW_KINDS if k in kinds_seen]
    kinds += sorted(kinds_seen - set(OVERVIEW_KINDS))
    providers = sorted({p for p, _ in cells})
    trend_kind = TREND_KIND if TREND_KIND in kinds_seen else (kinds[0] if kinds else TREND_KIND)
    flat: dict[str, int] = {}
    for r in rows:
        if r["flat"] is not None and r["price_kind"] == trend_kind:
            flat[r["provider"]] = min(int(r["flat"]), flat.get(r["provider"], int(r["flat"])))
    history = (
        daily_cheapest(
            conn, filters, compliance, today, flat, by="provider", gpu=slug, kind=trend_kind
        )
        if providers
        else {}
    )
    matrix = []
    for provider in providers:
        row: dict[str, Any] = {}
        for kind in kinds:
            cell = cells.get((provider, kind))
            row[kind] = (
                None
                if cell is None
                else {"price_per_gpu_hour_usd": from_key(cell.key), "offer_id": cell.offer_id}
            )
        matrix.append({"provider": provider, "prices": row})
    return {
        "price_kinds": kinds,
        "matrix": matrix,
        "history_price_kind": trend_kind,
        "history_start": first,
        "history_end": last,
        "history": [{"provider": p, "daily": series} for p, series in sorted(history.items())],
    }


# --- the documents the pages render and the API returns as JSON -------------------------

EXPORT_DESTINATIONS = ("DE", "IN", "AE", "CN")
"""Destinations answered on a GPU page (one per broad treatment); ``destination`` adds one."""
COMPARE_MIN, COMPARE_MAX = 2, 4


def overview_document(
    conn: Connection,
    filters: OfferFilters,
    compliance: ComplianceSets | None,
    today: date,
    eu: Iterable[str],
) -> dict[str, Any]:
    found = gpu_overview(conn, filters, compliance, today, eu)
    return {
        "price_kinds": list(OVERVIEW_KINDS),
        "trend": {
            "price_kind": TREND_KIND,
            "start": found.trend_start,
            "end": found.trend_end,
            "days": TREND_DAYS,
            "figure": "cheapest USD per GPU-hour in force each UTC day",
        },
        "data": found.gpus,
    }


def gpu_document(
    conn: Connection,
    gpu: dict[str, Any],
    filters: OfferFilters,
    compliance: ComplianceSets | None,
    today: date,
    destinations: Sequence[str],
) -> dict[str, Any]:
    """``gpu``: :func:`service.query.reference.get_gpu`'s row (specs, classifications)."""
    answers: list[dict[str, Any]] = []
    for country in destinations:
        try:
            answer = export_control(conn, gpu["slug"], country, today).to_dict()
            answers.append({"destination": country, **answer})
        except ComplianceError as exc:
            answers.append({"destination": country, "error": str(exc)})
    return {
        "gpu": gpu,
        **gpu_matrix(conn, gpu["slug"], filters, compliance, today),
        "export_control": answers,
    }


class BadIds(ValueError):
    """The ``ids`` of a comparison are not 2-4 distinct offer ids."""


def parse_compare_ids(values: Sequence[str]) -> list[int]:
    """``ids=1,2`` or ``ids=1&ids=2`` -> [1, 2] (order kept, duplicates refused)."""
    parts = [p.strip() for v in values for p in v.split(",") if p.strip()]
    ids: list[int] = []
    for part in parts:
        if not ascii_digits(part) or len(part) > 10 or not 1 <= int(part) <= MAX_ROW_ID:
            raise BadIds(f"{part[:20]!r} is not an offer id (a whole number from 1)")
        if int(part) in ids:
            raise BadIds(f"offer {int(part)} is listed twice")
        ids.append(int(part))
    if not COMPARE_MIN <= len(ids) <= COMPARE_MAX:
        raise BadIds(f"give {COMPARE_MIN} to {COMPARE_MAX} offer ids, not {len(ids)}")
    return ids


def compare_document(conn: Connection, ids: Sequence[int], today: date) -> dict[str, Any]:
    """The offers side by side (raises :class:`service.query.sql.NotFound` for a missing id)."""
    offers = [get_offer(conn, i) for i in ids]
    facts = catalog_facts(conn, today)
    for offer in offers:
        offer["gpu_name"] = facts.gpu_names.get(offer["gpu_slug"] or "", None)
        offer["export_classification"] = facts.export_control.get(offer["gpu_slug"] or "")
        offer["certifications"] = [
            c["scheme"] for c in facts.certifications.get(offer["provider"], [])
        ]
    priced = [o["gpu_hour_usd"] for o in offers if o["gpu_hour_usd"] is not None]
    cheapest = min(priced) if priced else None
    return {
        "ids": list(ids),
        "cheapest_price_per_gpu_hour_usd": cheapest,
        "data": offers,
    }
