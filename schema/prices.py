"""Offers, their type-2 price observations, and the catalog versions that order them."""

from __future__ import annotations

from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    Float,
    Index,
    LargeBinary,
    Numeric,
    PrimaryKeyConstraint,
    UniqueConstraint,
    and_,
    case,
    cast,
    func,
    null,
    or_,
    text,
    type_coerce,
)
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401
from schema.types import CompactDate, DecimalType, UTCDateTime, UTCMicros


class CatalogVersion(SQLModel, table=True):
    __tablename__ = "catalog_version"

    id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    created_at: datetime = Field(
        sa_type=UTCMicros,
        description="the ingest's time: its observations' valid_from, and the valid_to of "
        "those it closed (stored as theirs are, so either reads in their place)",
    )
    source: str = Field(max_length=100)
    crawl_run_id: int = Field(foreign_key="crawl_run.id", index=True)
    added: int = 0
    changed: int = 0
    withdrawn: int = 0
    updated: int = 0


SORT_KEY_SCALE = 10**10
"""``gpu_hour_usd_e10 = gpu_hour_usd * SORT_KEY_SCALE``: exact, since decimals keep 10 places."""
SORT_KEY_MAX = 2**63 - 1


_E10 = Decimal("1E+10")
"""10^10 with a coefficient of 1: a product with it is ``value.scaleb(10)``, digit for digit
(the same coefficient, the exponent 10 more, the same rounding), at two thirds of the cost."""


def sort_key_e10(value: Decimal | None) -> int | None:
    """The exact integer sort key of a stored USD amount (saturates at the BIGINT range)."""
    if value is None:
        return None
    key = int(value * _E10)
    if -SORT_KEY_MAX <= key <= SORT_KEY_MAX:
        return key
    return SORT_KEY_MAX if key > 0 else -SORT_KEY_MAX


PFLOP_KEY_TFLOPS_SCALE = 10**4
"""TFLOPS figures enter the PFLOPS sort key as integers of 10^-4 TFLOPS (the reference's
have at most one decimal place), so the key is integer arithmetic on both databases."""


def tflops_scaled(tflops: Decimal | None) -> int | None:
    """A TFLOPS figure as the divisor of the PFLOPS sort key: whole 10^-4 TFLOPS, rounded
    half up, as :func:`pflop_hour_key_sql` scales it; None when null or below 0.00005."""
    if tflops is None:
        return None
    scaled = int((tflops * PFLOP_KEY_TFLOPS_SCALE).to_integral_value(rounding=ROUND_HALF_UP))
    return scaled if scaled > 0 else None


def pflop_hour_key(gpu_hour_e10: int | None, tflops: Decimal | None) -> int | None:
    """The exact integer sort key of USD per PFLOPS-hour (BF16) x 10^10: USD per GPU-hour
    x 1000 / TFLOPS, rounded half to even to 10 places as the listing shows it
    (``service.api.serialize.per_pflop_hour``). None without a USD price or a TFLOPS figure
    (null or below 0.00005). :func:`pflop_hour_key_sql` is the same in SQL."""
    scaled = tflops_scaled(tflops)
    if gpu_hour_e10 is None or scaled is None:
        return None
    quotient, rest = divmod(gpu_hour_e10 * 1000 * PFLOP_KEY_TFLOPS_SCALE, scaled)
    if 2 * rest > scaled or (2 * rest == scaled and quotient % 2):
        quotient += 1
    return max(-SORT_KEY_MAX, min(SORT_KEY_MAX, quotient))


def pflop_hour_key_sql(gpu_hour_e10: Any, tflops: Any, dialect: str) -> Any:
    """:func:`pflop_hour_key` in SQL, from an integer key expression and a TFLOPS column
    (NULL where the key is None). Integer arithmetic in 64 bits on both databases: the
    quotient by whole 10^-4 TFLOPS first, then the remainder's 10^7 digits, then banker's
    rounding on the last remainder; saturated at the BIGINT range as the Python is."""
    real = cast(tflops, Float) if dialect == "sqlite" else cast(tflops, Numeric)
    scaled = cast(func.round(real * PFLOP_KEY_TFLOPS_SCALE), BigInteger)
    return pflop_hour_key_scaled_sql(gpu_hour_e10, scaled)


def pflop_hour_key_scaled_sql(gpu_hour_e10: Any, scaled: Any) -> Any:
    """:func:`pflop_hour_key_sql` from the TFLOPS figure already scaled to an integer
    (:func:`tflops_scaled`, or its SQL): NULL where that is null or not positive."""
    divisor = type_coerce(func.nullif(scaled, 0), BigInteger)
    price = type_coerce(gpu_hour_e10, BigInteger)
    digits = 1000 * PFLOP_KEY_TFLOPS_SCALE  # 10^7: x 1000 (TFLOPS -> PFLOPS), x 10^4
    rest = (price % divisor) * digits
    low, left = rest // divisor, rest % divisor
    up = case(
        (
            or_(2 * left > divisor, and_(2 * left == divisor, low % 2 == 1)),
            1,
        ),
        else_=0,
    )
    quotient = price // divisor
    # saturated at the BIGINT range as pflop_hour_key is (PostgreSQL refuses an overflow;
    # a price per GPU-hour of 10^8 over a few TFLOPS gets there): a larger quotient, or
    # the largest one with digits past SORT_KEY_MAX's
    most = SORT_KEY_MAX // digits
    return case(
        (or_(scaled.is_(None), scaled <= 0), null()),
        (quotient > most, SORT_KEY_MAX),
        (and_(quotient == most, low + up > SORT_KEY_MAX - most * digits), SORT_KEY_MAX),
        else_=quotient * digits + low + up,
    )


ACTIVE = text("status = 'active'")
ACTIVE_KNOWN_GPU = text("+status = 'active' AND +gpu_slug IS NOT NULL")
"""SQLite's predicate of ix_offer_gpu_kind_provider: only a statement with exactly these two
terms (the overview's) can use the index, so no other plan changes; and neither term can
seek another index, so SQLite's planner (no statistics) reads this one, in group order."""
ACTIVE_FILTERS_INDEX = "ix_offer_active_filters"
ACTIVE_SCAN = text("+status = 'active' AND +id > 0")
"""SQLite's predicate of ix_offer_active_filters: only a current listing's filters-first
read of ids and keys (``service.query.offers.base_query``), a pinned full sort's read of
the offers unchanged since its version (``service.query.pinned_union``) and the two
probes of ``service.query.facts.COVERING_READS`` write exactly these two terms, so no
other statement can pick the index (every offer id is positive)."""
FILTERED_COLUMNS = (
    "price_kind",
    "gpu_slug",
    "gpu_count",
    "gpu_memory_gb",
    "country",
    "region",
    "provider",
    "source",
    "bare_metal",
    "interconnect",
    "network",
    "network_gbps",
    "gpu_hour_usd_e10",
    "hourly_usd_e10",
    "pflop_hour_usd_e10",
    "status",
    "last_changed_version",
)
"""ix_offer_active_filters: every offer column a listing filter or sort key reads, and the
version of the offer's price (a pinned full sort reads the offers unchanged since its
version from the index alone: migration 0029)."""


class Offer(SQLModel, table=True):
    """The identity of a price, plus its current state (denormalized from observations)."""

    __table_args__ = (
        UniqueConstraint("source", "provider", "sku", "region", "price_kind", "unit"),
        Index("ix_offer_identity", "provider", "sku", "region", "price_kind"),
        # the default listing (cheapest per GPU-hour first) walks these instead of sorting
        Index("ix_offer_status_gpu_hour", "status", "gpu_hour_usd_e10", "id"),
        Index("ix_offer_gpu_slug_status_gpu_hour", "gpu_slug", "status", "gpu_hour_usd_e10", "id"),
        # sort=provider / -provider walks it (service.query.offers.list_offers)
        Index("ix_offer_status_provider", "status", "provider", "id"),
        # sort=gpu_count reads each distinct count's offers by id (service.query.offers)
        Index("ix_offer_status_gpu_count", "status", "gpu_count", "id"),
        # sort=price / -price walks it (USD per instance-hour)
        Index("ix_offer_status_hourly", "status", "hourly_usd_e10", "id"),
        # sort=price_per_pflop_hour / -price_per_pflop_hour walks it (USD per PFLOPS-hour)
        Index("ix_offer_status_pflop_hour", "status", "pflop_hour_usd_e10", "id"),
        Index(
            "ix_offer_gpu_slug_status_pflop_hour", "gpu_slug", "status", "pflop_hour_usd_e10", "id"
        ),
        # the GPU overview's GROUP BY (gpu, price kind, provider) of current offers reads it
        # alone, in order (service.query.overview); partial, so no other read's plan can
        # pick it (they bind the status as a parameter, or read withdrawn offers too)
        Index(
            "ix_offer_gpu_kind_provider",
            "gpu_slug",
            "price_kind",
            "provider",
            "gpu_hour_usd_e10",
            "country",
            "last_changed_at",
            "status",
            sqlite_where=ACTIVE_KNOWN_GPU,
            postgresql_where=ACTIVE,
        ),
        # a current listing whose filters keep too few of its sort index's first entries
        # reads every active offer, filters first (service.query.offers._filtered_first):
        # along this covering index (~95 bytes an entry) rather than the table's rows (~240)
        Index(ACTIVE_FILTERS_INDEX, *FILTERED_COLUMNS, sqlite_where=ACTIVE_SCAN).ddl_if(
            dialect="sqlite"
        ),
    )

    id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    source: str = Field(max_length=100)
    # not indexed alone: ix_offer_identity leads with it
    provider: str = Field(foreign_key="provider.slug", max_length=64)
    sku: str = Field(max_length=200)
    region: str = Field(max_length=100)
    price_kind: str = Field(max_length=32)
    unit: str = Field(max_length=16)
    price_per: str = Field(default="instance", max_length=16)
    gpu_slug: str | None = Field(default=None, max_length=64)
    gpu_name_raw: str | None = Field(default=None, max_length=200)
    gpu_inferred: bool = Field(
        default=False,
        sa_column_kwargs={"server_default": text("false")},
        description="the GPU model was picked by a documented family default",
    )
    gpu_count: Decimal = Field(sa_type=DecimalType)
    gpu_memory_gb: Decimal | None = Field(default=None, sa_type=DecimalType)
    vcpus: Decimal | None = Field(default=None, sa_type=DecimalType)
    memory_gb: Decimal | None = Field(default=None, sa_type=DecimalType)
    country: str | None = Field(default=None, max_length=2, index=True)
    bare_metal: bool | None = None
    price_floor: bool = False
    source_url: str | None = Field(default=None, max_length=2048)
    tax_included: bool | None = Field(
        default=None, description="the quoted amount includes sales tax/VAT; null: not stated"
    )
    interconnect: str | None = Field(
        default=None, max_length=16, description="GPU interconnect in the node (schema.enums)"
    )
    interconnect_gbps: Decimal | None = Field(
        default=None, sa_type=DecimalType, description="GB/s per GPU of the interconnect"
    )
    network: str | None = Field(
        default=None, max_length=16, description="network between nodes (schema.enums)"
    )
    network_gbps: Decimal | None = Field(
        default=None, sa_type=DecimalType, description="Gb/s per node of the network"
    )
    cluster_basis: str | None = Field(
        default=None,
        max_length=4,
        description="where each of the four cluster facts comes from, one letter each in "
        "the order interconnect, interconnect_gbps, network, network_gbps: 's' the source, "
        "'r' the reference data, '-' unknown (see service.catalog.cluster)",
    )
    fingerprint: str | None = Field(default=None, max_length=16, description="attributes digest")
    status: str = Field(default="active", max_length=16)
    amount: Decimal = Field(sa_type=DecimalType, description="current quoted amount")
    currency: str = Field(max_length=3)
    observation_id: int = Field(description="the current (or last) observation")
    gpu_hour_usd: Decimal | None = Field(
        default=None,
        sa_type=DecimalType,
        description="the current observation's USD per GPU-hour (denormalized by ingest)",
    )
    gpu_hour_usd_e10: int | None = Field(
        default=None,
        sa_type=BigInteger,
        description="sort key only: gpu_hour_usd x 10^10 as an exact integer (stored "
        "decimals keep 10 places), so listings sort and page on an index; never returned",
    )
    hourly_usd_e10: int | None = Field(
        default=None,
        sa_type=BigInteger,
        description="sort key only: the current observation's USD per instance-hour x 10^10 "
        "as an exact integer (written by ingest with each price), so sort=price walks an "
        "index; never returned",
    )
    pflop_hour_usd_e10: int | None = Field(
        default=None,
        sa_type=BigInteger,
        description="sort key only: USD per PFLOPS-hour (BF16) x 10^10 as an exact integer "
        "(schema.prices.pflop_hour_key of gpu_hour_usd_e10 and the GPU model's TFLOPS), "
        "written by ingest with each price and by reference loads; never returned",
    )
    first_seen_at: datetime = Field(sa_type=UTCDateTime)
    first_seen_version: int
    last_changed_at: datetime = Field(sa_type=UTCDateTime)
    last_changed_version: int
    withdrawn_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    withdrawn_version: int | None = None


VERSION_TO_SET = text("version_to IS NOT NULL")
OBS_GPU_HOUR_KEY_SQLITE = f"CAST(round(CAST({{column}} AS FLOAT) * {SORT_KEY_SCALE}) AS INTEGER)"
"""An observation's USD per GPU-hour sort key on SQLite (its text decimal as an exact
integer x 10^10, exact below 10^5 USD), written out: SQLite uses an index on an expression
only for the same expression, constants included (a bound parameter never matches)."""


USD = "USD"
"""A price quoted in USD has no conversion: its observation stores neither its USD figures
nor a rate (``amount_usd``, ``hourly_usd`` and ``fx_rate`` are null; they are its
``amount``, its ``hourly_amount`` and 1, read so by ``service.query.sql.usd_figure``).
Elsewhere a null USD figure means no rate was known."""

HOURLY_SAME = """A price per instance-hour is its own hourly figure: its observation stores
``hourly_amount`` null (read as ``amount``), and, converted, ``hourly_usd`` null (read as
``amount_usd``; both null: no rate), as ``service.query.sql.OBS_HOURLY_AMOUNT`` and
``OBS_HOURLY_USD`` read them. Every other price stores its hourly figures (the ingest
always computes them: ``service.core.units.instance_hourly``)."""


VERSIONS_OWN = """An observation opens with its catalog version (``version_from``) and closes
with another (``version_to``, null while it is in force). Its ``valid_from`` and its
``crawl_run_id`` are null when they are those of ``version_from`` (``created_at`` and
``crawl_run_id`` of that ``catalog_version``), and its ``valid_to`` is null when it is the
``created_at`` of ``version_to`` or the observation is in force: every row an ingest writes
(``service.catalog.writer``). Readers take the versions' (``service.query.sql.OBS_VALID_FROM``,
``OBS_VALID_TO``, ``OBS_CRAWL_RUN``; ``service.query.provenance.with_versions``); a row
written otherwise keeps its own."""


class PriceObservation(SQLModel, table=True):
    """One price of one offer over [valid_from, valid_to), from catalog version
    ``version_from`` until ``version_to`` (null: in force). Stored compactly: see
    :data:`VERSIONS_OWN`, :data:`USD` and :data:`HOURLY_SAME`."""

    __tablename__ = "price_observation"
    __table_args__ = (
        # one offer's rows: its history, and the row a catalog version saw (as_of listings
        # step back to the last (offer_id, version_from <= V), then read that row by id)
        Index("ix_price_observation_offer_version", "offer_id", "version_from"),
        # diffs and the change feed walk the rows a range of versions opened or closed, in
        # (version, offer) order
        Index("ix_price_observation_version_from", "version_from", "offer_id"),
        # null while the observation is in force (most rows); read only for closed ones
        Index(
            "ix_price_observation_version_to",
            "version_to",
            "offer_id",
            sqlite_where=VERSION_TO_SET,
            postgresql_where=VERSION_TO_SET,
        ),
        # a pinned (as_of) listing in its default order walks the observations by price
        # per GPU-hour (service.query.offers, _pinned_walk): on SQLite the exact integer key
        # (the text decimal does not sort numerically), on PostgreSQL the NUMERIC itself;
        # the price alone, each candidate's offer and versions read from its row (migration
        # 0036: an entry that held the versions moved when its row was closed)
        Index(
            "ix_price_observation_gpu_hour_key",
            text(OBS_GPU_HOUR_KEY_SQLITE.format(column="gpu_hour_usd")),
        ).ddl_if(dialect="sqlite"),
        Index("ix_price_observation_gpu_hour", "gpu_hour_usd").ddl_if(dialect="postgresql"),
    )

    id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    offer_id: int = Field(foreign_key="offer.id")
    amount: Decimal = Field(sa_type=DecimalType)
    currency: str = Field(max_length=3)
    hourly_amount: Decimal | None = Field(
        default=None, sa_type=DecimalType, description="null: amount (HOURLY_SAME)"
    )
    amount_usd: Decimal | None = Field(default=None, sa_type=DecimalType)
    hourly_usd: Decimal | None = Field(default=None, sa_type=DecimalType)
    gpu_hour_usd: Decimal | None = Field(default=None, sa_type=DecimalType)
    fx_rate: Decimal | None = Field(default=None, sa_type=DecimalType, description="USD per unit")
    fx_date: date | None = Field(
        default=None, sa_type=CompactDate, description="the date of the rates used"
    )
    valid_from: datetime | None = Field(
        default=None, sa_type=UTCMicros, description="null: version_from's time (VERSIONS_OWN)"
    )
    valid_to: datetime | None = Field(
        default=None,
        sa_type=UTCMicros,
        description="null: version_to's time, or in force (VERSIONS_OWN)",
    )
    version_from: int
    version_to: int | None = None
    crawl_run_id: int | None = Field(
        default=None,
        foreign_key="crawl_run.id",
        description="null: version_from's crawl run (VERSIONS_OWN)",
    )
    payload_id: int | None = Field(
        default=None,
        description="the crawl_run_payload row the price was read from: the payload's sha256, "
        "URL and fetch time (its crawl run's, or the same bytes' first link when the run "
        "stored none); null when the crawl had no payload or several and the record was "
        "not tied to one",
    )


class OfferLine(SQLModel, table=True):
    """The digest of the raw line (a JSON Lines file's line) last seen, unchanged, with an
    offer's current state, which a later ingest of the same line skips
    (``service.catalog.lines``). Storage only, never returned; no row (no line known) is
    always safe. A narrow table of its own: recording the lines of a whole crawl writes
    these small rows, not every offer row again."""

    __tablename__ = "offer_line"

    offer_id: int = Field(primary_key=True, foreign_key="offer.id")
    digest: bytes = Field(sa_type=LargeBinary, description="blake2b, 16 bytes")


class OfferLocation(SQLModel, table=True):
    """Where an offer quoted for several places (region ``global`` or a group code) can be
    launched: derived state, rewritten by the catalog writer (``service.catalog.locations``).

    Not versioned and never a price: a location that comes or goes (e.g. live capacity)
    changes these rows only, never the offer or its observations."""

    __tablename__ = "offer_location"
    __table_args__ = (
        PrimaryKeyConstraint("offer_id", "region"),
        # the country / gdpr filters: EXISTS (offer_id = ? AND country ...)
        Index("ix_offer_location_offer_id_country", "offer_id", "country"),
        # the precedence probe: another source's offer placed in this region
        Index("ix_offer_location_region", "region"),
    )

    offer_id: int = Field(foreign_key="offer.id")
    region: str = Field(max_length=100, description="a region code of the offer's provider")
    country: str | None = Field(default=None, max_length=2)
    basis: str = Field(max_length=16, description="source | reference | peer | provider")
    position: int = Field(description="0 = first in reference order")
