"""Read queries over the catalog, shared by the CLI and the API (never writes).

Two ways to read offers:

* **current** (``version=None``): the denormalized current state, ``offer.observation_id``
  joined to its observation, ``offer.status = 'active'``. The fast path.
* **pinned** (``version=V``): the observations visible at catalog version V
  (``version_from <= V`` and ``version_to`` null or ``> V``). Used for ``as_of`` and for
  cursors issued before a newer ingest committed, so a listing paged across an ingest
  returns each offer exactly once.

Offer attributes (GPU count, country, bare metal...) are the offer's current ones in both
paths; only prices (and which offers exist) are versioned.

The default order (USD per GPU-hour) and ``max_price_per_gpu_hour`` use an exact integer
sort key, USD per GPU-hour x 10^10 (:func:`gpu_hour_key`): on the current path it is the
indexed ``offer.gpu_hour_usd_e10`` that ingest writes with each price, on the pinned path it
is computed from the observation, so a cursor's key means the same on both. The key is
never returned; the exact ``Decimal`` is.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from functools import partial
from typing import Any, Literal

from sqlalchemy import (
    Connection,
    Select,
    and_,
    case,
    cast,
    exists,
    false,
    func,
    literal,
    literal_column,
    or_,
    select,
    true,
    type_coerce,
    union,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import BigInteger, Float, Integer, Numeric, String

from schema.catalog import GpuModel, Provider, Region
from schema.compliance import Certification, GpuClassification
from schema.crawl import CrawlRun
from schema.enums import OfferStatus
from schema.prices import CatalogVersion, Offer, OfferLocation, PriceObservation
from service.catalog.locations import locations_of, pick
from service.query.precedence import (
    FIRST_PARTY_RANK,
    IDENTITY_FIELDS,
    PEER_PRECEDENCE,
    UNKNOWN_PEER_RANK,
    source_key,
)

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
PROVIDER = Provider.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
CERT = Certification.__table__  # type: ignore[attr-defined]
CLASSIFICATION = GpuClassification.__table__  # type: ignore[attr-defined]
LOCATION = OfferLocation.__table__  # type: ignore[attr-defined]

SortKey = Literal["price_per_gpu_hour", "price", "price_per_pflop_hour", "gpu_count", "provider"]
SORT_KEYS: tuple[str, ...] = (
    "price_per_gpu_hour",
    "price",
    "price_per_pflop_hour",
    "gpu_count",
    "provider",
)


class NotFound(LookupError):
    """The named thing does not exist."""


class ComplianceUnavailable(RuntimeError):
    """A compliance filter was asked for but the compliance module is not installed."""

    def __init__(self, parameter: str) -> None:
        super().__init__(f"{parameter}: compliance filters are not available yet")
        self.parameter = parameter


@dataclass(frozen=True)
class OfferFilters:
    gpu: str | None = None
    """A canonical slug or a family (e.g. 'h100')."""
    provider: str | Sequence[str] | None = None
    country: str | None = None
    price_kind: str | None = None
    source: str | None = None
    min_gpus: Decimal | None = None
    max_gpus: Decimal | None = None
    min_gpu_memory_gb: Decimal | None = None
    region: str | None = None
    not_country: Sequence[str] = ()
    gdpr: str | None = None
    """A GDPR filter word: eu_eea | adequacy | any (see service.compliance.residency)."""
    cert: Sequence[str] = ()
    provider_hq_not_in: Sequence[str] = ()
    export_destination: str | None = None
    bare_metal: bool | None = None
    max_price_per_gpu_hour: Decimal | None = None
    """USD per GPU-hour."""
    include_peers: bool = False
    """False: one row per (provider, sku, region, price kind), from the most authoritative
    source reporting it (see :mod:`service.query.precedence`); True: every source's offers."""

    def providers(self) -> list[str]:
        if not self.provider:
            return []
        if isinstance(self.provider, str):
            return [self.provider]
        return list(self.provider)

    def active(self) -> dict[str, Any]:
        """The filters that are set (for explanations and cache keys)."""
        out: dict[str, Any] = {}
        for name in (
            "gpu",
            "provider",
            "country",
            "price_kind",
            "source",
            "min_gpus",
            "max_gpus",
            "min_gpu_memory_gb",
            "region",
            "not_country",
            "gdpr",
            "cert",
            "provider_hq_not_in",
            "export_destination",
            "bare_metal",
            "max_price_per_gpu_hour",
        ):
            value = getattr(self, name)
            if value is not None and value != () and value != [] and value != "":
                out[name] = value
        return out


@dataclass(frozen=True)
class ComplianceSets:
    """Compliance filters resolved to plain sets by ``service.compliance.filters``."""

    cert_providers: frozenset[str] | None = None
    gdpr_countries: frozenset[str] | None = None
    licence_gpus: frozenset[str] | None = None


def _compliance_module() -> Any | None:
    try:
        return importlib.import_module("service.compliance.filters")
    except ModuleNotFoundError:
        return None


def resolve_compliance(
    conn: Connection, filters: OfferFilters, on: date | None = None
) -> ComplianceSets:
    """Ask the compliance module for the sets behind ``cert``, ``gdpr``, ``export_destination``.

    Raises :class:`ComplianceUnavailable` when one is asked for and the module is missing.
    """
    if not (filters.cert or filters.gdpr or filters.export_destination):
        return ComplianceSets()
    module = _compliance_module()
    on = on or datetime.now(UTC).date()
    cert_providers = gdpr_countries = licence_gpus = None
    if filters.cert:
        helper = getattr(module, "providers_with_certs", None)
        if helper is None:
            raise ComplianceUnavailable("cert")
        cert_providers = frozenset(_ask("cert", helper, conn, list(filters.cert), on))
    if filters.gdpr:
        helper = getattr(module, "gdpr_countries", None)
        if helper is None:
            raise ComplianceUnavailable("gdpr")
        gdpr_countries = frozenset(_ask("gdpr", helper, conn, on=on, zone=filters.gdpr))
    if filters.export_destination:
        helper = getattr(module, "gpus_needing_licence", None)
        if helper is None:
            raise ComplianceUnavailable("export_destination")
        destination = filters.export_destination.upper()
        licence_gpus = frozenset(_ask("export_destination", helper, conn, destination, on))
    return ComplianceSets(cert_providers, gdpr_countries, licence_gpus)


class ComplianceRefused(ValueError):
    """The compliance module refused a filter value (unknown scheme, no rule set in force)."""

    def __init__(self, parameter: str, reason: str) -> None:
        super().__init__(f"{parameter}: {reason}")
        self.parameter, self.reason = parameter, reason


def _ask(parameter: str, helper: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return helper(*args, **kwargs)
    except (ValueError, LookupError) as exc:
        raise ComplianceRefused(parameter, str(exc)) from None
    except Exception as exc:
        if type(exc).__module__.startswith("service.compliance"):
            raise ComplianceRefused(parameter, str(exc)) from None
        raise


def current_version(conn: Connection) -> int:
    return int(conn.execute(select(func.coalesce(func.max(VERSION.c.id), 0))).scalar() or 0)


def version_at(conn: Connection, when: datetime) -> int:
    """The catalog version current at ``when`` (0 when the catalog was still empty)."""
    stmt = select(func.coalesce(func.max(VERSION.c.id), 0)).where(VERSION.c.created_at <= when)
    return int(conn.execute(stmt).scalar() or 0)


OFFER_COLUMNS = (
    OFFER.c.id,
    OFFER.c.source,
    OFFER.c.provider,
    OFFER.c.sku,
    OFFER.c.region,
    OFFER.c.country,
    OFFER.c.price_kind,
    OFFER.c.unit,
    OFFER.c.price_per,
    OFFER.c.gpu_slug,
    OFFER.c.gpu_name_raw,
    OFFER.c.gpu_inferred,
    OFFER.c.gpu_count,
    OFFER.c.gpu_memory_gb,
    OFFER.c.vcpus,
    OFFER.c.memory_gb,
    OFFER.c.bare_metal,
    OFFER.c.price_floor,
    OFFER.c.status,
    OFFER.c.first_seen_at,
    OFFER.c.last_changed_at,
    OFFER.c.source_url,
    OBS.c.amount,
    OBS.c.currency,
    OBS.c.hourly_amount,
    OBS.c.amount_usd,
    OBS.c.hourly_usd,
    OBS.c.gpu_hour_usd,
    OBS.c.fx_rate,
    OBS.c.fx_date,
    OBS.c.crawl_run_id,
    OBS.c.raw_sha256,
    OBS.c.version_from,
)


def _sortable(column: Any, dialect: str) -> Any:
    """Exact decimals are text on SQLite: sort numerically there."""
    return cast(column, Float) if dialect == "sqlite" else column


def visible_at(obs: Any, version: int) -> ColumnElement[bool]:
    """The observation was the offer's price at catalog ``version``."""
    return and_(
        obs.c.version_from <= version,
        or_(obs.c.version_to.is_(None), obs.c.version_to > version),
    )


def gpu_hour_key(dialect: str, version: int | None = None) -> Any:
    """The exact integer sort key of USD per GPU-hour (x 10^10) for the current or a pinned read.

    Current: the indexed ``offer.gpu_hour_usd_e10``. Pinned: the same integer computed from
    the observation (on SQLite through a double, exact below 10^5 USD per GPU-hour).
    """
    if version is None:
        return OFFER.c.gpu_hour_usd_e10
    if dialect == "sqlite":
        return cast(func.round(cast(OBS.c.gpu_hour_usd, Float) * 10_000_000_000), Integer)
    return cast(cast(OBS.c.gpu_hour_usd, Numeric) * 10_000_000_000, BigInteger)


def price_key_bound(value: Decimal) -> int:
    """The largest sort key whose price is <= ``value`` (prices keep 10 decimal places)."""
    return int(value.scaleb(10).to_integral_value(rounding=ROUND_FLOOR))


def sort_expression(sort: str, dialect: str, version: int | None = None) -> Any:
    if sort == "price_per_gpu_hour":
        return gpu_hour_key(dialect, version)
    if sort == "price":
        return _sortable(OBS.c.hourly_usd, dialect)
    if sort == "gpu_count":
        return _sortable(OFFER.c.gpu_count, dialect)
    if sort == "provider":
        return OFFER.c.provider
    if sort == "price_per_pflop_hour":
        tflops = select(GPU.c.tflops_bf16).where(GPU.c.slug == OFFER.c.gpu_slug).scalar_subquery()
        if dialect == "sqlite":
            return cast(OBS.c.gpu_hour_usd, Float) * 1000 / func.nullif(cast(tflops, Float), 0.0)
        per_gpu = cast(OBS.c.gpu_hour_usd, Numeric)
        return func.round(per_gpu * 1000 / func.nullif(cast(tflops, Numeric), 0), 10)
    raise ValueError(f"unknown sort key {sort!r}")


OTHER = OFFER.alias("other_source")
OTHER_OBS = OBS.alias("other_source_obs")
OTHER_LOCATION = LOCATION.alias("other_source_location")
"""Built once: an alias's column collection is costly to set up per statement."""


def source_rank_sql(source: Any) -> Any:
    """:func:`service.query.precedence.source_rank` in SQL: 0 first-party, then peer platforms."""
    whens = [(~source.contains(":"), FIRST_PARTY_RANK)]
    for position, platform in enumerate(PEER_PRECEDENCE, start=1):
        prefix = f"{platform}:"
        whens.append((func.substr(source, 1, len(prefix)) == prefix, position))
    return case(*whens, else_=UNKNOWN_PEER_RANK)


def _code_points(column: Any, dialect: str) -> Any:
    """Compare names by code point, as Python does (PostgreSQL's default collation does not)."""
    return column.collate("C") if dialect == "postgresql" else column


def outranked(version: int | None, dialect: str) -> Any:
    """Another source reports the offer's (provider, sku, region, price kind), in that
    region or placed there (``offer_location``), and ranks before its source
    (:mod:`service.query.precedence`): the offer is not shown by default."""
    other = OTHER
    other_rank, own_rank = source_rank_sql(other.c.source), source_rank_sql(OFFER.c.source)
    placed_there = (
        exists()
        .where(OTHER_LOCATION.c.offer_id == other.c.id, OTHER_LOCATION.c.region == OFFER.c.region)
        .correlate_except(OTHER_LOCATION)
    )
    condition = [
        other.c.provider == OFFER.c.provider,
        other.c.sku == OFFER.c.sku,
        or_(other.c.region == OFFER.c.region, placed_there),
        other.c.price_kind == OFFER.c.price_kind,
        or_(
            other_rank < own_rank,
            and_(
                other_rank == own_rank,
                _code_points(other.c.source, dialect) < _code_points(OFFER.c.source, dialect),
            ),
        ),
    ]
    if version is None:
        condition.append(other.c.status == OfferStatus.active.value)
    else:
        other_obs = OTHER_OBS
        condition.append(
            exists().where(other_obs.c.offer_id == other.c.id, visible_at(other_obs, version))
        )
    return exists().where(*condition)


def _located(condition: ColumnElement[bool]) -> ColumnElement[bool]:
    """One of the offer's locations (``offer_location``) meets ``condition``."""
    return exists().where(LOCATION.c.offer_id == OFFER.c.id, condition)


def in_countries_sql(countries: Sequence[str]) -> ColumnElement[bool]:
    """The offer is in one of ``countries``: its own country is, or (an offer without one:
    ``global``) one of its locations' is. The SQL twin of
    ``service.catalog.locations.in_countries``; the EXISTS probes
    ``ix_offer_location_offer_id_country`` for placeless rows only."""
    own = OFFER.c.country == countries[0] if len(countries) == 1 else OFFER.c.country.in_(countries)
    where = (
        LOCATION.c.country == countries[0]
        if len(countries) == 1
        else LOCATION.c.country.in_(countries)
    )
    return or_(own, and_(OFFER.c.country.is_(None), _located(where)))


def outside_countries_sql(excluded: Sequence[str]) -> ColumnElement[bool]:
    """``not_country``: the offer can run outside ``excluded`` (an offer whose place is not
    known at all is kept). The SQL twin of ``service.catalog.locations.outside_countries``."""
    elsewhere = or_(LOCATION.c.country.is_(None), LOCATION.c.country.not_in(excluded))
    return or_(
        OFFER.c.country.not_in(excluded),
        and_(
            OFFER.c.country.is_(None),
            or_(~_located(LOCATION.c.offer_id.is_not(None)), _located(elsewhere)),
        ),
    )


def _location_match(
    filters: OfferFilters, compliance: ComplianceSets | None
) -> ColumnElement[bool] | None:
    """The location filters on one ``offer_location`` row (``service.catalog.locations.pick``)."""
    conditions: list[ColumnElement[bool]] = []
    if filters.country:
        conditions.append(LOCATION.c.country == filters.country.upper())
    if filters.region:
        conditions.append(LOCATION.c.region == filters.region)
    if compliance is not None and compliance.gdpr_countries is not None:
        conditions.append(LOCATION.c.country.in_(sorted(compliance.gdpr_countries)))
    if filters.not_country:
        excluded = [c.upper() for c in filters.not_country]
        conditions.append(or_(LOCATION.c.country.is_(None), LOCATION.c.country.not_in(excluded)))
    return and_(*conditions) if conditions else None


def location_columns(
    filters: OfferFilters, compliance: ComplianceSets | None, dialect: str
) -> tuple[Any, Any, Any]:
    """``country``, ``location_region`` and ``locations`` (text) as SQL, for exports: the
    same values :func:`place_rows` gives a row. ``locations`` is
    ``region:country:basis`` per location, in position order, joined by ``"; "``."""
    match = _location_match(filters, compliance)
    order = (
        [LOCATION.c.position] if match is None else [case((match, 0), else_=1), LOCATION.c.position]
    )

    def first(column: Any) -> Any:
        return (
            select(column)
            .where(LOCATION.c.offer_id == OFFER.c.id)
            .order_by(*order)
            .limit(1)
            .scalar_subquery()
        )

    item = LOCATION.c.region + ":" + func.coalesce(LOCATION.c.country, "") + ":" + LOCATION.c.basis
    if dialect == "postgresql":
        listed = (
            select(func.string_agg(item, aggregate_order_by(literal("; "), LOCATION.c.position)))
            .where(LOCATION.c.offer_id == OFFER.c.id)
            .scalar_subquery()
        )
    else:  # SQLite before 3.44 has no ORDER BY inside group_concat: an ordered subquery
        ordered = (
            select(item.label("item"))
            .where(LOCATION.c.offer_id == OFFER.c.id)
            .order_by(LOCATION.c.position)
            .correlate(OFFER)
            .subquery()
        )
        listed = select(func.group_concat(ordered.c.item, "; ")).scalar_subquery()
    return (
        func.coalesce(OFFER.c.country, first(LOCATION.c.country)).label("country"),
        first(LOCATION.c.region).label("location_region"),
        listed.label("locations"),
    )


def apply_filters(
    stmt: Select[Any],
    filters: OfferFilters,
    dialect: str,
    compliance: ComplianceSets | None = None,
    *,
    skip: str | None = None,
    version: int | None = None,
    gpus: Sequence[str] | None = None,
) -> Select[Any]:
    """Add every set filter (except ``skip``, used to explain exclusions) to ``stmt``.

    ``version`` says which read ``stmt`` is (None = current), for the price filter.
    ``gpus``: the GPU filter already resolved to slugs (see :func:`live_gpu_slugs`).
    """

    def on(name: str) -> bool:
        return name != skip

    if filters.gpu and on("gpu") and gpus is not None:
        if len(gpus) == 1:  # an equality: the (gpu_slug, status, price, id) index walk
            stmt = stmt.where(OFFER.c.gpu_slug == gpus[0])
        else:
            stmt = stmt.where(OFFER.c.gpu_slug.in_(gpus) if gpus else false())
    elif filters.gpu and on("gpu"):
        gpu = filters.gpu.lower()
        family = select(GPU.c.slug).where(GPU.c.family == gpu)
        stmt = stmt.where(or_(OFFER.c.gpu_slug == gpu, OFFER.c.gpu_slug.in_(family)))
    providers = filters.providers()
    if providers and on("provider"):
        stmt = stmt.where(OFFER.c.provider.in_(providers))
    if filters.country and on("country"):
        stmt = stmt.where(in_countries_sql([filters.country.upper()]))
    if filters.not_country and on("not_country"):
        excluded = [c.upper() for c in filters.not_country]
        stmt = stmt.where(outside_countries_sql(excluded))
    if filters.region and on("region"):
        stmt = stmt.where(
            or_(OFFER.c.region == filters.region, _located(LOCATION.c.region == filters.region))
        )
    if filters.price_kind and on("price_kind"):
        stmt = stmt.where(OFFER.c.price_kind == filters.price_kind)
    if filters.source and on("source"):
        stmt = stmt.where(OFFER.c.source == filters.source)
    count = _sortable(OFFER.c.gpu_count, dialect)
    if filters.min_gpus is not None and on("min_gpus"):
        stmt = stmt.where(count >= _number(filters.min_gpus, dialect))
    if filters.max_gpus is not None and on("max_gpus"):
        stmt = stmt.where(count <= _number(filters.max_gpus, dialect))
    if filters.min_gpu_memory_gb is not None and on("min_gpu_memory_gb"):
        wanted = _number(filters.min_gpu_memory_gb, dialect)
        big = select(GPU.c.slug).where(_sortable(GPU.c.memory_gb, dialect) >= wanted)
        stmt = stmt.where(
            or_(
                _sortable(OFFER.c.gpu_memory_gb, dialect) >= wanted,
                and_(OFFER.c.gpu_memory_gb.is_(None), OFFER.c.gpu_slug.in_(big)),
            )
        )
    if filters.bare_metal is not None and on("bare_metal"):
        stmt = stmt.where(OFFER.c.bare_metal.is_(filters.bare_metal))
    if filters.max_price_per_gpu_hour is not None and on("max_price_per_gpu_hour"):
        price = gpu_hour_key(dialect, version)
        stmt = stmt.where(price <= price_key_bound(filters.max_price_per_gpu_hour))
    if filters.provider_hq_not_in and on("provider_hq_not_in"):
        excluded = [c.upper() for c in filters.provider_hq_not_in]
        domestic = select(PROVIDER.c.slug).where(PROVIDER.c.hq_country.in_(excluded))
        stmt = stmt.where(OFFER.c.provider.not_in(domestic))
    compliance = compliance or ComplianceSets()
    if compliance.cert_providers is not None and on("cert"):
        stmt = stmt.where(OFFER.c.provider.in_(sorted(compliance.cert_providers)))
    if compliance.gdpr_countries is not None and on("gdpr"):
        stmt = stmt.where(in_countries_sql(sorted(compliance.gdpr_countries)))
    if compliance.licence_gpus is not None and on("export_destination"):
        licence = sorted(compliance.licence_gpus)
        stmt = stmt.where(OFFER.c.gpu_slug.is_not(None), OFFER.c.gpu_slug.not_in(licence))
    return stmt


def _number(value: Decimal, dialect: str) -> Any:
    return float(value) if dialect == "sqlite" else value


def base_query(
    columns: Iterable[Any],
    filters: OfferFilters,
    dialect: str,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
    *,
    skip: str | None = None,
    scan: bool = False,
    gpus: Sequence[str] | None = None,
) -> Select[Any]:
    """Offers with their price at ``version`` (None = current), filtered, peers deduped.

    ``scan``: the caller reads every match (an export, a ranking); on SQLite the status test
    is kept off the (status, price, id) index, whose equality would otherwise tempt the
    planner into a walk plus a sort of the whole catalog instead of a rowid scan.
    """
    status = OFFER.c.status
    if scan and dialect == "sqlite":
        status = literal_column("+offer.status")
    if version is None:
        stmt = (
            select(*columns)
            .select_from(OFFER)
            .join(OBS, OBS.c.id == OFFER.c.observation_id)
            .where(status == OfferStatus.active.value)
        )
    else:
        stmt = (
            select(*columns)
            .select_from(OFFER)
            .join(OBS, and_(OBS.c.offer_id == OFFER.c.id, visible_at(OBS, version)))
        )
    stmt = apply_filters(stmt, filters, dialect, compliance, skip=skip, version=version, gpus=gpus)
    if not filters.include_peers:
        stmt = stmt.where(~outranked(version, dialect))
    return stmt


@dataclass(frozen=True)
class After:
    """Where the previous page ended: the sort value (None = null) and the offer id."""

    value: Any
    offer_id: int


def offers_query(
    filters: OfferFilters,
    dialect: str,
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
    sort: str = "price_per_gpu_hour",
    descending: bool = False,
    after: After | None = None,
    nulls: bool | None = None,
    gpus: Sequence[str] | None = None,
) -> Select[Any]:
    """The listing: nulls last, then the sort key, then offer id (a total order).

    ``sort_value`` (what a cursor carries) is the integer key for ``price_per_gpu_hour``.
    ``nulls`` False / True: only the offers whose sort key is set / null, ordered so an
    index on (…, key, id) serves the order (no leading ``key IS NULL`` term).
    """
    key = sort_expression(sort, dialect, version)
    stmt = base_query(
        (*OFFER_COLUMNS, key.label("sort_value")), filters, dialect, version, compliance, gpus=gpus
    )
    if after is not None and after.value is not None and sort == "price_per_gpu_hour":
        after = After(int(Decimal(str(after.value))), after.offer_id)
    if nulls is not None:
        stmt = stmt.where(key.is_(None) if nulls else key.is_not(None))
    if after is not None and nulls is not None:
        if after.value is None:
            stmt = stmt.where(OFFER.c.id > after.offer_id)
        elif not nulls:
            beyond = key < after.value if descending else key > after.value
            stmt = stmt.where(or_(beyond, and_(key == after.value, OFFER.c.id > after.offer_id)))
        after = None
    if nulls:
        return stmt.order_by(OFFER.c.id)
    if nulls is False:
        return stmt.order_by(key.desc() if descending else key, OFFER.c.id)
    if after is not None:
        if after.value is None:
            stmt = stmt.where(key.is_(None), OFFER.c.id > after.offer_id)
        else:
            beyond = key < after.value if descending else key > after.value
            stmt = stmt.where(
                or_(
                    key.is_(None),
                    beyond,
                    and_(key == after.value, OFFER.c.id > after.offer_id),
                )
            )
    return stmt.order_by(key.is_(None), key.desc() if descending else key, OFFER.c.id)


def list_offers(
    conn: Connection,
    filters: OfferFilters,
    limit: int = 50,
    offset: int = 0,
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
    sort: str = "price_per_gpu_hour",
    descending: bool = False,
    after: After | None = None,
) -> list[dict[str, Any]]:
    """A page of the listing (see :func:`offers_query` for the order).

    The current listing by price per GPU-hour (the default) reads in two index-ordered
    statements, offers with a price first, then (if the page is not full) those without,
    in one transaction, so one snapshot.
    """
    query = partial(
        offers_query,
        filters,
        conn.dialect.name,
        version=version,
        compliance=compliance,
        sort=sort,
        descending=descending,
        after=after,
        gpus=live_gpu_slugs(conn, filters.gpu) if version is None and filters.gpu else None,
    )
    if sort == "price_per_gpu_hour" and version is None and not offset:
        rows: list[dict[str, Any]] = []
        if after is None or after.value is not None:
            rows = _dicts(conn.execute(query(nulls=False).limit(limit)))
        if len(rows) < limit:
            rows += _dicts(conn.execute(query(nulls=True).limit(limit - len(rows))))
        return place_rows(conn, rows, filters, compliance)
    stmt = query().limit(limit)
    if offset:
        stmt = stmt.offset(offset)
    return place_rows(conn, _dicts(conn.execute(stmt)), filters, compliance)


PAGE_OFFER = OFFER.alias("page_offer")
"""The offers of a page, joined to the other offers of their identity (built once)."""


def source_report(row: Any) -> dict[str, Any]:
    """One source's figure for an identity (``also_from``, price disagreements)."""
    return {
        "source": row["source"],
        "offer_id": row["id"],
        "price_per_gpu_hour_usd": row["gpu_hour_usd"],
    }


def also_from(
    conn: Connection, rows: Sequence[dict[str, Any]], *, version: int | None = None
) -> dict[int, list[dict[str, Any]]]:
    """Offer id -> the offers of *other* sources reporting the same (provider, sku, region,
    price kind), current or at ``version``, most authoritative source first.

    One statement for the page: its offers by id, each joined to the others of its identity
    through ``ix_offer_identity`` (one probe per row). Disagreeing prices are kept as they
    are, never averaged.
    """
    if not rows:
        return {}
    mine = PAGE_OFFER
    ids = sorted({r["id"] for r in rows})
    same = [
        *(OFFER.c[name] == mine.c[name] for name in IDENTITY_FIELDS),
        OFFER.c.source != mine.c.source,
    ]
    if version is None:
        price = OFFER.c.gpu_hour_usd
        # SQLite: the status test kept off ix_offer_status_gpu_hour, so the planner starts
        # from the page's ids (without statistics it would walk every active offer)
        sqlite = conn.dialect.name == "sqlite"
        status = literal_column("+offer.status") if sqlite else OFFER.c.status
        others = select(OFFER.c.id, OFFER.c.source, price).where(
            *same, status == OfferStatus.active.value
        )
    else:
        price = OBS.c.gpu_hour_usd
        others = (
            select(OFFER.c.id, OFFER.c.source, price)
            .join(OBS, and_(OBS.c.offer_id == OFFER.c.id, visible_at(OBS, version)))
            .where(*same)
        )
    if conn.dialect.name == "postgresql":
        # LATERAL: one probe of ix_offer_identity per page row (a plain join is hashed
        # against a scan of every offer); OFFSET 0 keeps the planner from flattening it
        other = others.offset(0).lateral("other")
        stmt = select(mine.c.id.label("page_id"), other).select_from(mine).join(other, true())
    else:
        stmt = others.add_columns(mine.c.id.label("page_id"))
    stmt = stmt.where(mine.c.id.in_(ids))
    out: dict[int, list[dict[str, Any]]] = {r["id"]: [] for r in rows}
    for r in conn.execute(stmt).mappings():
        out[r["page_id"]].append(source_report(r))
    for reports in out.values():
        reports.sort(key=lambda o: (source_key(o["source"]), o["offer_id"]))
    return out


def _dicts(result: Any) -> list[dict[str, Any]]:
    """Every row of ``result`` as a dict (one fetch, the keys looked up once)."""
    keys = tuple(result.keys())
    return [dict(zip(keys, row, strict=True)) for row in result.all()]


def place_rows(
    conn: Connection,
    rows: list[dict[str, Any]],
    filters: OfferFilters | None = None,
    compliance: ComplianceSets | None = None,
) -> list[dict[str, Any]]:
    """Add each row's ``locations`` (where an offer quoted for several places can run, see
    ``service.catalog.locations``) and ``location_region``: the location matching the location
    filters, else the first one. A row without a country of its own takes that location's
    country; ``region`` stays as quoted (the offer's identity, e.g. ``global``)."""
    found = locations_of(conn, [r["id"] for r in rows]) if rows else {}
    filters = filters or OfferFilters()
    gdpr = compliance.gdpr_countries if compliance is not None else None
    for row in rows:
        locations = found.get(row["id"], [])
        row["locations"] = locations
        chosen = pick(
            [(loc["region"], loc["country"]) for loc in locations],
            country=filters.country.upper() if filters.country else None,
            region=filters.region,
            countries=gdpr,
            excluded=[c.upper() for c in filters.not_country],
        )
        row["location_region"] = chosen[0] if chosen else None
        if chosen is not None and row.get("country") is None:
            row["country"] = chosen[1]
    return rows


def live_gpu_slugs(conn: Connection, gpu: str) -> list[str]:
    """The slugs a current ``gpu`` filter (a slug or a family) can match: those with offers.

    Read from :func:`catalog_facts` of the same snapshot, so an equality (one live slug, the
    common case) can replace ``slug = x OR slug IN (family)`` and walk the per-GPU index.
    """
    facts = catalog_facts(conn, datetime.now(UTC).date())
    wanted = gpu.lower()
    return sorted({wanted, *facts.families.get(wanted, ())} & facts.live_gpus)


def stream_offers(
    conn: Connection,
    filters: OfferFilters,
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
    batch: int = 2000,
) -> Iterator[list[dict[str, Any]]]:
    """Every matching offer in id order, in batches, without loading them all."""
    stmt = base_query(OFFER_COLUMNS, filters, conn.dialect.name, version, compliance, scan=True)
    stmt = stmt.order_by(OFFER.c.id)
    result = conn.execution_options(stream_results=True, yield_per=batch).execute(stmt)
    for part in result.mappings().partitions(batch):
        yield place_rows(conn, [dict(r) for r in part], filters, compliance)


def stream_raw_offers(
    conn: Connection,
    columns: Sequence[Any],
    filters: OfferFilters,
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
    batch: int = 5000,
) -> Iterator[Sequence[Sequence[Any]]]:
    """Every matching offer in id order as the driver's own values, in batches (for exports).

    One statement, so one snapshot. No type processing: on SQLite decimals arrive as their
    canonical text, timestamps as naive UTC text and booleans as 0/1; on PostgreSQL as
    ``Decimal`` (padded to 10 places), aware ``datetime`` and ``bool``. SQLite rows come
    straight from the DBAPI cursor (``fetchmany``); PostgreSQL uses a server-side cursor.
    """
    raw = [type_coerce(c, String()).label(c.name) for c in columns]
    dialect = conn.dialect.name
    stmt = base_query(raw, filters, dialect, version, compliance, scan=True).order_by(OFFER.c.id)
    if conn.dialect.name == "sqlite":
        result = conn.execute(stmt)  # unbuffered: the DBAPI cursor still holds every row
        try:
            cursor = result.cursor
            while part := cursor.fetchmany(batch):
                yield part
        finally:
            result.close()
        return
    streamed = conn.execution_options(stream_results=True, yield_per=batch).execute(stmt)
    yield from streamed.partitions(batch)


# --- context for a page of offers ---------------------------------------------------------


@dataclass
class OfferContext:
    """What a page of offers needs besides the offers (read-only: may be shared, see below)."""

    regions: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    certifications: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    export_control: dict[str, dict[str, Any]] = field(default_factory=dict)
    tflops_bf16: dict[str, Decimal] = field(default_factory=dict)
    last_confirmed: dict[str, datetime] = field(default_factory=dict)
    families: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """GPU family -> its slugs."""
    live_gpus: frozenset[str] = frozenset()
    """GPU slugs with at least one active offer."""
    gpu_names: dict[str, str] = field(default_factory=dict)
    """GPU slug -> its human name ("H100 SXM 80GB"): read with the facts, not joined per row
    (a per-row lookup in the listing's statement cost 10-40 %, docs/benchmarks.md)."""

    def gpu_label(self, row: dict[str, Any]) -> str | None:
        """What people read for an offer's GPU: the model's name; an unmapped raw name marked
        ``(unrecognized)``; None when the source named no GPU."""
        slug = row.get("gpu_slug")
        if slug:
            return self.gpu_names.get(slug, slug)
        raw = row.get("gpu_name_raw")
        return f"{raw} (unrecognized)" if raw else None


FACTS_KEY = "gpuatlas.catalog_facts"


def snapshot_token(conn: Connection) -> tuple[Any, ...] | None:
    """A value equal for two reads only if they see the same committed data (None: unknown).

    SQLite: ``PRAGMA data_version`` (changes when another connection commits; inside a read
    transaction it stays at the transaction's snapshot) and the connection's own
    ``total_changes``. PostgreSQL: the transaction's snapshot (``pg_current_snapshot()``,
    which under REPEATABLE READ fixes what every statement sees); None once the transaction
    has written itself (its own writes are not in the snapshot's text).
    """
    if conn.dialect.name == "sqlite":
        version = conn.exec_driver_sql("PRAGMA data_version").scalar()
        return (version, getattr(conn.connection.dbapi_connection, "total_changes", None))
    if conn.dialect.name == "postgresql":
        snapshot, own = conn.exec_driver_sql(
            "SELECT pg_current_snapshot()::text, pg_current_xact_id_if_assigned()::text"
        ).one()
        return None if own is not None else (snapshot,)
    return None


def catalog_facts(conn: Connection, on: date) -> OfferContext:
    """Regions, certifications valid ``on``, GPU facts and last good crawls: all of them.

    Small tables read whole, cached on the database connection and reused while
    :func:`snapshot_token` says nothing was committed since (so never stale); the result
    is shared between requests and must not be modified.
    """
    token = snapshot_token(conn)
    info = conn.connection.info
    cached = info.get(FACTS_KEY)
    if token is not None and cached is not None and cached[0] == (token, on):
        return cached[1]  # type: ignore[no-any-return]
    facts = _load_facts(conn, on)
    if token is not None:
        info[FACTS_KEY] = ((token, on), facts)
    return facts


def _load_facts(conn: Connection, on: date) -> OfferContext:
    ctx = OfferContext()
    for r in conn.execute(
        select(REGION.c.provider, REGION.c.code, REGION.c.name, REGION.c.city, REGION.c.country)
    ).mappings():
        ctx.regions[(r["provider"], r["code"])] = dict(r)
    certs = conn.execute(
        select(CERT.c.provider, CERT.c.scheme, CERT.c.valid_to, CERT.c.regions)
        .where(
            CERT.c.status == "certified",
            CERT.c.superseded_at.is_(None),
            or_(CERT.c.valid_from.is_(None), CERT.c.valid_from <= on),
            or_(CERT.c.valid_to.is_(None), CERT.c.valid_to >= on),
        )
        .order_by(CERT.c.provider, CERT.c.scheme)
    ).mappings()
    for c in certs:
        ctx.certifications.setdefault(c["provider"], []).append(
            {"scheme": c["scheme"], "valid_to": c["valid_to"], "regions": c["regions"]}
        )
    families: dict[str, list[str]] = {}
    for g in conn.execute(
        select(GPU.c.slug, GPU.c.family, GPU.c.name, GPU.c.tflops_bf16)
    ).mappings():
        ctx.gpu_names[g["slug"]] = g["name"]
        if g["tflops_bf16"] is not None:
            ctx.tflops_bf16[g["slug"]] = g["tflops_bf16"]
        families.setdefault(g["family"], []).append(g["slug"])
    ctx.families = {f: tuple(sorted(slugs)) for f, slugs in families.items()}
    classes = conn.execute(
        select(CLASSIFICATION.c.gpu_slug, CLASSIFICATION.c.eccn, CLASSIFICATION.c.basis)
        .where(
            or_(
                CLASSIFICATION.c.effective_from.is_(None),
                CLASSIFICATION.c.effective_from <= on,
            ),
        )
        .order_by(CLASSIFICATION.c.gpu_slug, CLASSIFICATION.c.effective_from)
    ).mappings()
    for k in classes:
        ctx.export_control[k["gpu_slug"]] = {"eccn": k["eccn"], "basis": k["basis"]}
    ctx.last_confirmed = last_good_crawls(conn)
    live = select(GPU.c.slug).where(
        exists().where(OFFER.c.gpu_slug == GPU.c.slug, OFFER.c.status == OfferStatus.active.value)
    )
    ctx.live_gpus = frozenset(r[0] for r in conn.execute(live))
    return ctx


def offer_context(conn: Connection, rows: Sequence[dict[str, Any]], on: date) -> OfferContext:
    """Regions, valid certifications, GPU facts and last good crawls for offers (shared)."""
    del rows  # the facts cover every offer; kept for callers that name their page
    return catalog_facts(conn, on)


def get_offer(conn: Connection, offer_id: int) -> dict[str, Any]:
    stmt = (
        select(*OFFER_COLUMNS, OFFER.c.withdrawn_at)
        .join(OBS, OBS.c.id == OFFER.c.observation_id)
        .where(OFFER.c.id == offer_id)
    )
    row = conn.execute(stmt).mappings().first()
    if row is None:
        raise NotFound(f"offer {offer_id} does not exist")
    return place_rows(conn, [dict(row)])[0]


HISTORY_COLUMNS = (
    OBS.c.id,
    OBS.c.amount,
    OBS.c.currency,
    OBS.c.hourly_amount,
    OBS.c.amount_usd,
    OBS.c.gpu_hour_usd,
    OBS.c.fx_rate,
    OBS.c.fx_date,
    OBS.c.valid_from,
    OBS.c.valid_to,
    OBS.c.version_from,
    OBS.c.version_to,
    OBS.c.crawl_run_id,
    OBS.c.raw_sha256,
)


def offer_history(
    conn: Connection, offer_id: int, start: datetime | None = None, end: datetime | None = None
) -> list[dict[str, Any]]:
    """Every observation of an offer overlapping [start, end], oldest first."""
    exists_stmt = select(OFFER.c.id).where(OFFER.c.id == offer_id)
    if conn.execute(exists_stmt).first() is None:
        raise NotFound(f"offer {offer_id} does not exist")
    stmt = select(*HISTORY_COLUMNS).where(OBS.c.offer_id == offer_id)
    if start is not None:
        stmt = stmt.where(or_(OBS.c.valid_to.is_(None), OBS.c.valid_to > start))
    if end is not None:
        stmt = stmt.where(OBS.c.valid_from <= end)
    stmt = stmt.order_by(OBS.c.valid_from, OBS.c.id)
    return [dict(row) for row in conn.execute(stmt).mappings()]


Resolution = Literal["day", "week"]
MAX_BUCKETS = 5000


def bucket_start(when: datetime, resolution: Resolution) -> datetime:
    day = when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if resolution == "week":
        return day - timedelta(days=day.weekday())  # ISO weeks start on Monday
    return day


def history_buckets(
    observations: Sequence[dict[str, Any]],
    resolution: Resolution,
    start: datetime | None,
    end: datetime,
) -> list[dict[str, Any]]:
    """min / max / last price (quoted and USD per GPU-hour) per UTC day or ISO week.

    A bucket covers [bucket_start, next bucket_start); an observation counts in every bucket
    its [valid_from, valid_to) overlaps. ``last`` is the price in force at the bucket's end
    (or at ``end`` for the bucket containing it). Buckets where no price was in force are
    omitted.
    """
    if not observations:
        return []
    step = timedelta(days=7 if resolution == "week" else 1)
    first = start if start is not None else observations[0]["valid_from"]
    cursor = bucket_start(max(first, observations[0]["valid_from"]), resolution)
    out: list[dict[str, Any]] = []
    index = 0
    while cursor <= end and len(out) < MAX_BUCKETS:
        stop = cursor + step
        while index < len(observations) and _ends_before(observations[index], cursor):
            index += 1
        inside = []
        for obs in observations[index:]:
            if obs["valid_from"] >= stop or obs["valid_from"] > end:
                break
            if not _ends_before(obs, cursor):
                inside.append(obs)
        if inside:
            amounts = [o["amount"] for o in inside]
            usd = [o["gpu_hour_usd"] for o in inside if o["gpu_hour_usd"] is not None]
            last = inside[-1]
            out.append(
                {
                    "start": cursor,
                    "end": stop,
                    "currency": last["currency"],
                    "min": min(amounts),
                    "max": max(amounts),
                    "last": last["amount"],
                    "min_price_per_gpu_hour_usd": min(usd) if usd else None,
                    "max_price_per_gpu_hour_usd": max(usd) if usd else None,
                    "last_price_per_gpu_hour_usd": last["gpu_hour_usd"],
                    "observations": len(inside),
                }
            )
        cursor = stop
    return out


def _ends_before(observation: dict[str, Any], when: datetime) -> bool:
    return observation["valid_to"] is not None and observation["valid_to"] <= when


def list_versions(
    conn: Connection, limit: int = 50, before: int | None = None
) -> list[dict[str, Any]]:
    stmt = select(VERSION).order_by(VERSION.c.id.desc()).limit(limit)
    if before is not None:
        stmt = stmt.where(VERSION.c.id < before)
    return [dict(row) for row in conn.execute(stmt).mappings()]


# --- diffs and the change feed --------------------------------------------------------------

CHANGE_OBS_COLUMNS = (
    OBS.c.offer_id,
    OBS.c.amount,
    OBS.c.currency,
    OBS.c.gpu_hour_usd,
    OBS.c.version_from,
    OBS.c.version_to,
)
CHANGE_OFFER_COLUMNS = (
    OFFER.c.id,
    OFFER.c.source,
    OFFER.c.provider,
    OFFER.c.sku,
    OFFER.c.region,
    OFFER.c.price_kind,
    OFFER.c.unit,
    OFFER.c.gpu_slug,
    OFFER.c.gpu_count,
)


def _offers_by_id(conn: Connection, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    stmt = select(*CHANGE_OFFER_COLUMNS).where(OFFER.c.id.in_(ids))
    return {r["id"]: dict(r) for r in conn.execute(stmt).mappings()}


def _price(obs: dict[str, Any] | None) -> dict[str, Any] | None:
    if obs is None:
        return None
    return {
        "amount": obs["amount"],
        "currency": obs["currency"],
        "price_per_gpu_hour_usd": obs["gpu_hour_usd"],
    }


def diff_versions(
    conn: Connection, old: int, new: int, *, after_offer: int = 0, limit: int = 1000
) -> tuple[list[dict[str, Any]], int | None]:
    """Offers added, changed (old and new price) or withdrawn between two versions.

    Returns the changes of up to ``limit`` candidate offers (id order) and the last
    candidate id when more may follow (the keyset for the next page).
    """
    low, high = min(old, new), max(old, new)
    touched = union(
        select(OBS.c.offer_id.label("offer_id")).where(
            OBS.c.version_from > low, OBS.c.version_from <= high
        ),
        select(OBS.c.offer_id.label("offer_id")).where(
            OBS.c.version_to > low, OBS.c.version_to <= high
        ),
    ).subquery()
    ids = [
        int(r[0])
        for r in conn.execute(
            select(touched.c.offer_id)
            .where(touched.c.offer_id > after_offer)
            .order_by(touched.c.offer_id)
            .limit(limit + 1)
        )
    ]
    more = len(ids) > limit
    ids = ids[:limit]
    if not ids:
        return [], None

    def visible(version: int) -> dict[int, dict[str, Any]]:
        stmt = select(*CHANGE_OBS_COLUMNS).where(OBS.c.offer_id.in_(ids), visible_at(OBS, version))
        return {r["offer_id"]: dict(r) for r in conn.execute(stmt).mappings()}

    before, after_ = visible(old), visible(new)
    offers = _offers_by_id(conn, ids)
    changes = []
    for offer_id in ids:
        a, b = before.get(offer_id), after_.get(offer_id)
        if a is None and b is None:
            continue
        if a is None:
            kind = "added"
        elif b is None:
            kind = "withdrawn"
        elif (a["amount"], a["currency"]) != (b["amount"], b["currency"]):
            kind = "changed"
        else:
            continue
        changes.append(
            {"kind": kind, "offer": offers[offer_id], "old": _price(a), "new": _price(b)}
        )
    return changes, (ids[-1] if more else None)


def change_feed(
    conn: Connection,
    since: int,
    until: int,
    *,
    after: tuple[int, int] = (0, 0),
    limit: int = 1000,
) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
    """Every change in versions (since, until], ordered by (version, offer id).

    ``after`` is the (version, offer id) the previous page ended with.
    """
    starts = select(OBS.c.version_from.label("version"), OBS.c.offer_id.label("offer_id")).where(
        OBS.c.version_from > since, OBS.c.version_from <= until
    )
    ends = select(OBS.c.version_to.label("version"), OBS.c.offer_id.label("offer_id")).where(
        OBS.c.version_to > since, OBS.c.version_to <= until
    )
    events = union(starts, ends).subquery()
    version_after, offer_after = after
    stmt = (
        select(events.c.version, events.c.offer_id)
        .where(
            or_(
                events.c.version > version_after,
                and_(events.c.version == version_after, events.c.offer_id > offer_after),
            )
        )
        .order_by(events.c.version, events.c.offer_id)
        .limit(limit + 1)
    )
    keys = [(int(v), int(o)) for v, o in conn.execute(stmt)]
    more = len(keys) > limit
    keys = keys[:limit]
    if not keys:
        return [], None
    ids = sorted({o for _, o in keys})
    low, high = keys[0][0], keys[-1][0]
    opened: dict[tuple[int, int], dict[str, Any]] = {}
    closed: dict[tuple[int, int], dict[str, Any]] = {}
    touching = select(*CHANGE_OBS_COLUMNS).where(
        OBS.c.offer_id.in_(ids),
        or_(
            and_(OBS.c.version_from >= low, OBS.c.version_from <= high),
            and_(OBS.c.version_to >= low, OBS.c.version_to <= high),
        ),
    )
    for r in conn.execute(touching).mappings():
        opened[(r["version_from"], r["offer_id"])] = dict(r)
        if r["version_to"] is not None:
            closed[(r["version_to"], r["offer_id"])] = dict(r)
    offers = _offers_by_id(conn, ids)
    created: dict[int, datetime] = dict(
        conn.execute(
            select(VERSION.c.id, VERSION.c.created_at).where(VERSION.c.id.between(low, high))
        ).all()
    )
    changes = []
    for key in keys:
        new, old = opened.get(key), closed.get(key)
        if new is not None and old is not None:
            kind = "changed"
        elif new is not None:
            kind = "added"
        else:
            kind = "withdrawn"
        changes.append(
            {
                "version": key[0],
                "at": created.get(key[0]),
                "kind": kind,
                "offer": offers[key[1]],
                "old": _price(old),
                "new": _price(new),
            }
        )
    return changes, (keys[-1] if more else None)


# --- aggregates ---------------------------------------------------------------------------


def eligible_providers(
    conn: Connection,
    filters: OfferFilters,
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
) -> list[dict[str, Any]]:
    """One row per provider with a matching offer: its cheapest one and the count."""
    dialect = conn.dialect.name
    price = gpu_hour_key(dialect, version)
    ranked = base_query(
        (
            *OFFER_COLUMNS,
            func.row_number()
            .over(partition_by=OFFER.c.provider, order_by=(price.is_(None), price, OFFER.c.id))
            .label("rank"),
            func.count().over(partition_by=OFFER.c.provider).label("offer_count"),
        ),
        filters,
        dialect,
        version,
        compliance,
        scan=True,  # ranks every match: no use for the price-ordered index walk
    ).subquery()
    stmt = select(ranked).where(ranked.c.rank == 1)
    rows = [dict(r) for r in conn.execute(stmt).mappings()]
    rows.sort(key=lambda r: (r["gpu_hour_usd"] is None, r["gpu_hour_usd"] or 0, r["provider"]))
    return place_rows(conn, rows, filters, compliance)


def explain_exclusions(
    conn: Connection,
    filters: OfferFilters,
    included: set[str],
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
) -> dict[str, list[str]]:
    """For each provider without a matching offer: the filters that exclude it.

    A filter is named when the provider has matching offers once that one filter is
    lifted; when no single filter is to blame, the reason says the filters only exclude
    it together. Providers without any current offer say so.
    """
    dialect = conn.dialect.name
    if version is None:
        with_offers = select(OFFER.c.provider).where(OFFER.c.status == OfferStatus.active.value)
    else:
        with_offers = select(OFFER.c.provider).join(
            OBS, and_(OBS.c.offer_id == OFFER.c.id, visible_at(OBS, version))
        )
    providers = {r[0] for r in conn.execute(select(PROVIDER.c.slug))}
    live = {r[0] for r in conn.execute(with_offers.distinct())}
    reasons: dict[str, list[str]] = {}
    for slug in sorted(providers - included):
        reasons[slug] = [] if slug in live else ["no current offers"]
    active = filters.active()
    candidates = {s for s, r in reasons.items() if not r}
    for name in active:
        if not candidates:
            break
        stmt = base_query(
            (OFFER.c.provider,), filters, dialect, version, compliance, skip=name
        ).distinct()
        for (provider,) in conn.execute(stmt):
            if provider in candidates:
                reasons[provider].append(f"{name}={_show(active[name])}")
    for slug in candidates:
        if not reasons[slug]:
            reasons[slug] = ["no single offer satisfies all the filters together"]
    return reasons


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def cheapest_by_kind(
    conn: Connection,
    filters: OfferFilters,
    *,
    version: int | None = None,
    compliance: ComplianceSets | None = None,
) -> list[dict[str, Any]]:
    """Per (provider, price kind): the cheapest matching offer per GPU-hour (USD)."""
    dialect = conn.dialect.name
    price = _sortable(OBS.c.gpu_hour_usd, dialect)
    ranked = base_query(
        (
            *OFFER_COLUMNS,
            func.row_number()
            .over(
                partition_by=(OFFER.c.provider, OFFER.c.price_kind),
                order_by=(price, OFFER.c.id),
            )
            .label("rank"),
        ),
        filters,
        dialect,
        version,
        compliance,
    )
    best = ranked.where(OBS.c.gpu_hour_usd.is_not(None)).subquery()
    stmt = select(best).where(best.c.rank == 1).order_by(best.c.provider)
    return place_rows(conn, [dict(r) for r in conn.execute(stmt).mappings()], filters, compliance)


# --- reference listings -----------------------------------------------------------------


def list_gpus(conn: Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(select(GPU).order_by(GPU.c.slug)).mappings()]


def get_gpu(conn: Connection, slug: str) -> dict[str, Any]:
    row = conn.execute(select(GPU).where(GPU.c.slug == slug)).mappings().first()
    if row is None:
        raise NotFound(f"GPU {slug!r} does not exist")
    gpu = dict(row)
    gpu["classifications"] = [
        dict(r)
        for r in conn.execute(
            select(
                CLASSIFICATION.c.eccn,
                CLASSIFICATION.c.basis,
                CLASSIFICATION.c.effective_from,
                CLASSIFICATION.c.source_url,
            )
            .where(CLASSIFICATION.c.gpu_slug == slug)
            .order_by(CLASSIFICATION.c.effective_from)
        ).mappings()
    ]
    gpu["active_offers"] = _count_active(conn, OFFER.c.gpu_slug == slug)
    return gpu


def _count_active(conn: Connection, condition: Any) -> int:
    stmt = (
        select(func.count())
        .select_from(OFFER)
        .where(OFFER.c.status == OfferStatus.active.value, condition)
    )
    return int(conn.execute(stmt).scalar() or 0)


def list_providers(conn: Connection) -> list[dict[str, Any]]:
    counts: dict[str, int] = dict(
        conn.execute(
            select(OFFER.c.provider, func.count())
            .where(OFFER.c.status == OfferStatus.active.value)
            .group_by(OFFER.c.provider)
        ).all()
    )
    rows = conn.execute(select(PROVIDER).order_by(PROVIDER.c.slug)).mappings()
    return [{**dict(r), "active_offers": int(counts.get(r["slug"], 0))} for r in rows]


def get_provider(conn: Connection, slug: str, on: date) -> dict[str, Any]:
    row = conn.execute(select(PROVIDER).where(PROVIDER.c.slug == slug)).mappings().first()
    if row is None:
        raise NotFound(f"provider {slug!r} does not exist")
    provider = dict(row)
    provider["active_offers"] = _count_active(conn, OFFER.c.provider == slug)
    provider["regions"] = list_regions(conn, slug)
    provider["certifications"] = [
        dict(r)
        for r in conn.execute(
            select(
                CERT.c.scheme,
                CERT.c.status,
                CERT.c.regions,
                CERT.c.valid_from,
                CERT.c.valid_to,
                CERT.c.evidence_url,
                CERT.c.checked,
            )
            .where(CERT.c.provider == slug, CERT.c.superseded_at.is_(None))
            .order_by(CERT.c.scheme)
        ).mappings()
    ]
    for cert in provider["certifications"]:
        cert["valid_now"] = (
            cert["status"] == "certified"
            and (cert["valid_from"] is None or cert["valid_from"] <= on)
            and (cert["valid_to"] is None or cert["valid_to"] >= on)
        )
    return provider


def list_regions(
    conn: Connection, provider: str | None = None, country: str | None = None
) -> list[dict[str, Any]]:
    stmt = select(
        REGION.c.provider, REGION.c.code, REGION.c.name, REGION.c.country, REGION.c.city
    ).order_by(REGION.c.provider, REGION.c.code)
    if provider:
        stmt = stmt.where(REGION.c.provider == provider)
    if country:
        stmt = stmt.where(REGION.c.country == country.upper())
    return [dict(r) for r in conn.execute(stmt).mappings()]


RUN_SUMMARY_COLUMNS = (
    RUN.c.id,
    RUN.c.source,
    RUN.c.status,
    RUN.c.reason,
    RUN.c.parser_version,
    RUN.c.started_at,
    RUN.c.finished_at,
    RUN.c.seen,
    RUN.c.added,
    RUN.c.changed,
    RUN.c.withdrawn,
    RUN.c.rejected,
    RUN.c.unmapped,
    RUN.c.catalog_version,
)
"""What every listing of crawl runs shows (CLI, API, web page)."""


def list_crawl_runs(
    conn: Connection, source: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    stmt = select(*RUN_SUMMARY_COLUMNS).order_by(RUN.c.id.desc()).limit(limit)
    if source:
        stmt = stmt.where(RUN.c.source == source)
    return [dict(row) for row in conn.execute(stmt).mappings()]


def last_runs(conn: Connection, sources: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """The latest crawl run of each source (of ``sources`` only, when given), by name."""
    latest = select(func.max(RUN.c.id)).group_by(RUN.c.source)
    if sources is not None:
        latest = latest.where(RUN.c.source.in_(sorted(set(sources))))
    stmt = select(*RUN_SUMMARY_COLUMNS).where(RUN.c.id.in_(latest))
    return {r["source"]: dict(r) for r in conn.execute(stmt).mappings()}


def catalog_counts(conn: Connection) -> dict[str, int]:
    active = conn.execute(
        select(func.count()).select_from(OFFER).where(OFFER.c.status == OfferStatus.active.value)
    ).scalar()
    observations = conn.execute(select(func.count()).select_from(OBS)).scalar()
    return {
        "version": current_version(conn),
        "active_offers": int(active or 0),
        "observations": int(observations or 0),
    }


def crawl_status_counts(conn: Connection) -> list[tuple[str, str, int]]:
    stmt = select(RUN.c.source, RUN.c.status, func.count()).group_by(RUN.c.source, RUN.c.status)
    return [(s, st, int(n)) for s, st, n in conn.execute(stmt)]


def last_good_crawls(conn: Connection) -> dict[str, datetime]:
    stmt = (
        select(RUN.c.source, func.max(RUN.c.finished_at))
        .where(and_(RUN.c.status == "ok", RUN.c.finished_at.is_not(None)))
        .group_by(RUN.c.source)
    )
    return {source: when for source, when in conn.execute(stmt)}  # noqa: C416
