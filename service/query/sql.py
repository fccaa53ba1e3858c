"""The catalog's tables as SQL handles, and the SQL pieces every read shares.

The exact sort keys (:func:`gpu_hour_key`, :func:`sort_expression`), which observation a
catalog version sees (:func:`visible_at`), the peer precedence in SQL (:func:`outranked`)
and where an offer is (:func:`in_countries_sql`, :func:`outside_countries_sql`). How the
listing uses them, current and pinned reads: :mod:`service.query.offers`. Every read raises
:class:`NotFound` for a missing thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_FLOOR, Decimal
from functools import lru_cache
from typing import Any, Literal, TypeVar

from sqlalchemy import (
    TextClause,
    and_,
    case,
    cast,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
    type_coerce,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import Join, LateralFromClause
from sqlalchemy.sql.visitors import replacement_traverse
from sqlalchemy.types import BigInteger, Float, Integer, Numeric, String

from schema.catalog import GpuModel, Provider, Region
from schema.compliance import Certification, GpuClassification
from schema.crawl import CrawlRun, CrawlRunPayload
from schema.enums import OfferStatus
from schema.prices import (
    OBS_GPU_HOUR_KEY_SQLITE,
    SORT_KEY_MAX,
    USD,
    CatalogVersion,
    Offer,
    OfferLocation,
    PriceObservation,
    pflop_hour_key_sql,
)
from service.query.precedence import FIRST_PARTY_RANK, PEER_PRECEDENCE, UNKNOWN_PEER_RANK

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
PROVIDER = Provider.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]
RUN_PAYLOAD = CrawlRunPayload.__table__  # type: ignore[attr-defined]
CERT = Certification.__table__  # type: ignore[attr-defined]
CLASSIFICATION = GpuClassification.__table__  # type: ignore[attr-defined]


def usd_figure(stored: Any, own: Any) -> ColumnElement[Any]:
    """An observation's figure in USD: ``stored``, or for a price in USD its ``own`` figure
    (not stored again: :data:`schema.prices.USD`)."""
    return case((OBS.c.currency == USD, own), else_=stored)


OBS_HOURLY_AMOUNT = func.coalesce(OBS.c.hourly_amount, OBS.c.amount, type_=OBS.c.amount.type)
"""An observation's hourly amount: stored, or its amount (:data:`schema.prices.HOURLY_SAME`)."""
OBS_AMOUNT_USD = usd_figure(OBS.c.amount_usd, OBS.c.amount)
OBS_HOURLY_USD = usd_figure(
    func.coalesce(OBS.c.hourly_usd, OBS.c.amount_usd, type_=OBS.c.hourly_usd.type),
    OBS_HOURLY_AMOUNT,
)
OBS_FX_RATE = usd_figure(OBS.c.fx_rate, literal(Decimal(1), OBS.c.fx_rate.type))
"""An observation's USD amount, USD per instance-hour and USD per unit of its currency."""


OPENED = VERSION.alias("opened_version")
CLOSED = VERSION.alias("closed_version")
"""The catalog versions that opened and closed an observation (:func:`with_versions`)."""
OBS_VALID_FROM = func.coalesce(OBS.c.valid_from, OPENED.c.created_at, type_=OBS.c.valid_from.type)
OBS_VALID_TO = func.coalesce(OBS.c.valid_to, CLOSED.c.created_at, type_=OBS.c.valid_to.type)
OBS_CRAWL_RUN = func.coalesce(OBS.c.crawl_run_id, OPENED.c.crawl_run_id)
"""An observation's validity and crawl run: its own where stored, else its versions'
(:data:`schema.prices.VERSIONS_OWN`); null ``valid_to``: in force. Read from a statement
whose observations are joined by :func:`with_versions`. (``catalog_version.created_at`` is
stored as the observation's times are, so either stands for the other.)"""


def with_versions(joined: Any) -> Any:
    """``joined`` (a FROM clause holding ``price_observation``) with the catalog versions
    that opened and closed each observation: primary-key reads, for
    :data:`OBS_VALID_FROM`, :data:`OBS_VALID_TO` and :data:`OBS_CRAWL_RUN`. Outer joins:
    a row whose version is not there keeps its own values (and reads null otherwise)."""
    return joined.outerjoin(OPENED, OPENED.c.id == OBS.c.version_from).outerjoin(
        CLOSED, CLOSED.c.id == OBS.c.version_to
    )


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


MAX_ROW_ID = 2**31 - 1
"""The largest id a row can have (an ``integer`` on PostgreSQL, which refuses a larger
parameter compared with one: an error where the answer is that no such row exists)."""


def payload_sha256(obs: Any = OBS) -> Any:
    """The sha256 of the payload an observation's price was read from, as ``raw_sha256``:
    the observation names its ``crawl_run_payload`` row (an integer: a crawl's many rows
    share a few payloads), whose primary key finds the digest (the exports' column; pages
    of rows read it once per payload: ``service.query.provenance``)."""
    return (
        select(RUN_PAYLOAD.c.sha256)
        .where(RUN_PAYLOAD.c.id == obs.c.payload_id)
        .scalar_subquery()
        .label("raw_sha256")
    )


def observation_run(obs: Any = OBS) -> Any:
    """The crawl run an observation's price comes from, as ``crawl_run_id``: its own, else
    that of the version that opened it (:data:`schema.prices.VERSIONS_OWN`), found by its
    primary key (the exports' column; pages of rows read it once per version:
    ``service.query.provenance.with_runs``)."""
    opened = VERSION.alias("run_version")
    run = select(opened.c.crawl_run_id).where(opened.c.id == obs.c.version_from)
    return func.coalesce(obs.c.crawl_run_id, run.scalar_subquery()).label("crawl_run_id")


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
    OFFER.c.tax_included,
    OFFER.c.interconnect,
    OFFER.c.interconnect_gbps,
    OFFER.c.network,
    OFFER.c.network_gbps,
    OFFER.c.cluster_basis,
    OFFER.c.status,
    OFFER.c.first_seen_at,
    OFFER.c.last_changed_at,
    OFFER.c.source_url,
    OBS.c.amount,
    OBS.c.currency,
    OBS_HOURLY_AMOUNT.label("hourly_amount"),
    OBS_AMOUNT_USD.label("amount_usd"),
    OBS_HOURLY_USD.label("hourly_usd"),
    OBS.c.gpu_hour_usd,
    OBS_FX_RATE.label("fx_rate"),
    OBS.c.fx_date,
    OBS.c.crawl_run_id,  # null: its version's (service.query.provenance.with_runs)
    OBS.c.payload_id,  # its sha256 and URL: service.query.provenance.with_payloads
    OBS.c.version_from,
)


MICROS_PER_SECOND = 1_000_000


def unix_seconds(column: Any) -> Any:
    """SQLite: the whole seconds since 1970 of an observation time kept as microseconds
    (``schema.types.UTCMicros``), floored (SQLite's ``/`` truncates toward zero)."""
    micros = type_coerce(column, Integer)
    return case(
        (micros >= 0, micros // MICROS_PER_SECOND),
        else_=(micros - (MICROS_PER_SECOND - 1)) // MICROS_PER_SECOND,
    )


def sortable(column: Any, dialect: str) -> Any:
    """Exact decimals are text on SQLite: sort numerically there."""
    return cast(column, Float) if dialect == "sqlite" else column


def visible_at(obs: Any, version: int) -> ColumnElement[bool]:
    """The observation was the offer's price at catalog ``version``."""
    return and_(
        obs.c.version_from <= version,
        or_(obs.c.version_to.is_(None), obs.c.version_to > version),
    )


SEEN = OBS.alias("seen_obs")
"""Built once: an alias's column collection is costly to set up per statement."""


def seen_at(version: int) -> Any:
    """The join condition of a pinned read: the offer's observation at ``version``.

    The offer's last observation opened at or before ``version`` (one backwards step in
    ``ix_price_observation_offer_version``, read from the index alone), if it was not
    closed by then (its row, read by id): an offer's observations cover disjoint ranges of
    versions, so this is
    :func:`service.query.sql.visible_at`'s row. Written as a probe per offer, so the
    planner starts from the offers (filtered) instead of reading every observation opened
    before ``version`` (the whole table, a month back) and joining the offers to them.
    """
    last = (
        select(SEEN.c.id)
        .where(SEEN.c.offer_id == OFFER.c.id, SEEN.c.version_from <= version)
        .order_by(SEEN.c.version_from.desc())
        .limit(1)
        .scalar_subquery()
    )
    return and_(OBS.c.id == last, or_(OBS.c.version_to.is_(None), OBS.c.version_to > version))


PINNED = OBS.alias("pinned_obs")
"""Built once: the observations a PostgreSQL pinned read probes (:func:`pinned_lateral`)."""
_Statement = TypeVar("_Statement", bound=Any)


def pinned_join(version: int, dialect: str) -> tuple[Any, Any]:
    """What a pinned read joins the offers to, and on what: the offer's observation at
    ``version``.

    SQLite: the table, on :func:`seen_at` (a probe per offer, then the row by its id).
    PostgreSQL: :func:`pinned_lateral`, on its row being still open at ``version``. With
    the probe as a join condition, PostgreSQL's planner hashed every observation opened
    before ``version`` (the whole table, a month back) and probed twice per offer (2.6 s
    for 105,000 offers of 210,000 observations); the LATERAL subquery is one backwards
    step in ``ix_price_observation_offer_version`` per offer, which returns the row.
    A statement joined so must go through :func:`laterally` once built."""
    if dialect != "postgresql":
        return OBS, seen_at(version)
    row = pinned_lateral(version)
    return row, or_(row.c.version_to.is_(None), row.c.version_to > version)


@lru_cache(maxsize=64)
def pinned_lateral(version: int) -> LateralFromClause:
    """The offer's last observation opened at or before ``version``, as a LATERAL subquery
    named as the table (one object per version: :func:`laterally` maps the table's columns
    onto it)."""
    return (
        select(PINNED)
        .where(PINNED.c.offer_id == OFFER.c.id, PINNED.c.version_from <= version)
        .order_by(PINNED.c.version_from.desc())
        .limit(1)
        .lateral(OBS.name)
    )


def laterally(stmt: _Statement, version: int | None, dialect: str) -> _Statement:
    """A pinned PostgreSQL statement (see :func:`pinned_join`) with every column of the
    observation table read from :func:`pinned_lateral` instead (the aliases other probes
    use, such as the peer precedence's, are left alone). Current reads and SQLite's are
    returned as they are. A column left unmapped would name the table a second time in the
    FROM list, which PostgreSQL refuses: a loud error, never a wrong answer.

    The statement is copied with each of the table's own columns swapped for the
    lateral's by identity (a dictionary look-up per element): a general ``ClauseAdapter``
    asked each of a statement's thousands of elements whether it corresponds to the
    lateral, 1.7 ms of a pinned page of 100 (docs/benchmarks.md, "History at scale",
    sixth round)."""
    if version is None or dialect != "postgresql":
        return stmt
    lateral = pinned_lateral(version)
    columns = _lateral_columns(lateral)

    def replace(element: Any) -> Any:
        if element is lateral:  # its own statement reads the table's alias: kept whole
            return element
        return columns.get(element)

    return replacement_traverse(stmt, {}, replace)  # type: ignore[call-overload,no-any-return]


@lru_cache(maxsize=64)
def _lateral_columns(lateral: LateralFromClause) -> dict[Any, Any]:
    """The observation table's columns -> ``lateral``'s, by identity (cached by the
    lateral object itself, so never another version's or an evicted copy's)."""
    return {column: lateral.c[column.key] for column in OBS.c}


def gpu_hour_key(dialect: str, version: int | None = None) -> Any:
    """The exact integer sort key of USD per GPU-hour (x 10^10) for the current or a pinned read.

    Current: the indexed ``offer.gpu_hour_usd_e10``. Pinned: the same integer computed from
    the observation (on SQLite through a double, exact below 10^5 USD per GPU-hour).
    """
    if version is None:
        return OFFER.c.gpu_hour_usd_e10
    if dialect == "sqlite":
        return cast(func.round(cast(OBS.c.gpu_hour_usd, Float) * 10_000_000_000), Integer)
    # saturated at the BIGINT range as the stored key is (schema.prices.sort_key_e10)
    # (not LEAST: it skips a null, and an unknown price would sort as the dearest)
    scaled = cast(OBS.c.gpu_hour_usd, Numeric) * 10_000_000_000
    return cast(case((scaled > SORT_KEY_MAX, SORT_KEY_MAX), else_=scaled), BigInteger)


def pinned_gpu_hour_order(dialect: str) -> Any:
    """What a pinned walk orders the observations by (:func:`service.query.offers.
    _pinned_walk`): the leading term of their price index. SQLite: :func:`gpu_hour_key`'s
    pinned key written out as the index holds it (an index on an expression serves only
    that expression, constants included); PostgreSQL: the NUMERIC USD per GPU-hour, whose
    order is the key's (10 decimal places: the key is the price x 10^10)."""
    if dialect == "sqlite":
        column = f"{OBS.name}.{OBS.c.gpu_hour_usd.name}"
        return literal_column(OBS_GPU_HOUR_KEY_SQLITE.format(column=column), Integer)
    return OBS.c.gpu_hour_usd


class Walked(Join):
    """A join whose left side is read first, in its index's order: on SQLite a ``CROSS
    JOIN``, which its planner never reorders (the pinned walk, :func:`service.query.offers.
    _pinned_walk`: with selective filters SQLite otherwise started from the offers, read
    every observation of each and sorted them, 85 ms for 5,000 offers at 5 million
    observations). Elsewhere a plain join."""

    inherit_cache = True


@compiles(Walked, "sqlite")
def _cross_join(element: Walked, compiler: Any, **kw: Any) -> str:
    kw = {**kw, "asfrom": True}
    left, right = compiler.process(element.left, **kw), compiler.process(element.right, **kw)
    return f"{left} CROSS JOIN {right} ON {compiler.process(element.onclause, **kw)}"


def in_force_unindexed(version: int, dialect: str) -> ColumnElement[bool]:
    """:func:`visible_at` for a walk along another index: on SQLite the versions are kept
    off their own indexes (a unary ``+``), so only the walked index can serve the range."""
    if dialect != "sqlite":
        return visible_at(OBS, version)
    since = literal_column(f"+{OBS.name}.{OBS.c.version_from.name}", Integer)
    until = literal_column(f"+{OBS.name}.{OBS.c.version_to.name}", Integer)
    return and_(since <= version, or_(until.is_(None), until > version))


def pinned_order_value(key: int, dialect: str) -> Any:
    """A pinned USD per GPU-hour key as a value of :func:`pinned_gpu_hour_order`."""
    return key if dialect == "sqlite" else Decimal(key).scaleb(-10)


def hourly_key(dialect: str, version: int | None = None) -> Any:
    """The exact integer sort key of USD per instance-hour (x 10^10), as :func:`gpu_hour_key`:
    current, the indexed ``offer.hourly_usd_e10``; pinned, computed from the observation."""
    if version is None:
        return OFFER.c.hourly_usd_e10
    if dialect == "sqlite":
        return cast(func.round(cast(OBS_HOURLY_USD, Float) * 10_000_000_000), Integer)
    return cast(cast(OBS_HOURLY_USD, Numeric) * 10_000_000_000, BigInteger)


def pflop_hour_key(dialect: str, version: int | None = None) -> Any:
    """The exact integer sort key of USD per PFLOPS-hour (x 10^10), as :func:`gpu_hour_key`:
    current, the indexed ``offer.pflop_hour_usd_e10`` (ingest and reference loads keep it);
    pinned, :func:`schema.prices.pflop_hour_key_sql` of the pinned price key and the GPU
    model's TFLOPS (reference data is not versioned: today's figure, as the current key)."""
    if version is None:
        return OFFER.c.pflop_hour_usd_e10
    return pflop_hour_key_sql(gpu_hour_key(dialect, version), PFLOP_GPU.c.tflops_bf16, dialect)


PFLOP_GPU = GPU.alias("pflop_gpu")
"""The GPU model whose TFLOPS a pinned USD per PFLOPS-hour key divides by: a pinned read
sorted by it joins it once on PostgreSQL (LEFT, by its primary key: :func:`service.query.
offers.base_query` with ``pflop``; SQLite: :func:`stored_or_pinned_pflop`). As a scalar subquery
in the sort key, PostgreSQL looked the model up twice per row (the key and its ``IS NULL``),
200,000 index scans for a page."""


def price_key_bound(value: Decimal) -> int:
    """The largest sort key whose price is <= ``value`` (prices keep 10 decimal places)."""
    return int(value.scaleb(10).to_integral_value(rounding=ROUND_FLOOR))


def stored_or_pinned_pflop(version: int) -> Any:
    """SQLite: a pinned USD per PFLOPS-hour key read from the offer row
    (``pflop_hour_usd_e10``, written with each price and by reference loads) when the
    observation in force at ``version`` is the offer's current one (an offer not repriced
    since: most of them, a recent version), else computed from the observation. The same
    integer either way below 10^5 USD (the computed key goes through a double).

    Computed for every match, it cost a lookup of the GPU model (105,000 for ``min_gpus=4``
    in the listing benchmark) and the exact division written out in SQL, its TFLOPS scaled
    ten times over: 230 ms for a page of 100, 120 ms so. Here only the repriced offers look
    their model up, once per use of the key (a scalar subquery in the ``ELSE``, evaluated
    only there). The other pinned keys are a cast of the observation's column: reading the
    offer row for them instead cost more where the page is read from an index without it
    (``sort=price as_of=2 cert=...``: 51 → 77 ms)."""
    key = pflop_hour_key_sql(gpu_hour_key("sqlite", version), GPU.c.tflops_bf16, "sqlite")
    computed = select(key).where(GPU.c.slug == OFFER.c.gpu_slug).scalar_subquery()
    current = OBS.c.id == OFFER.c.observation_id
    return case((current, OFFER.c.pflop_hour_usd_e10), else_=computed)


def sort_expression(sort: str, dialect: str, version: int | None = None) -> Any:
    if version is not None and dialect == "sqlite" and sort == "price_per_pflop_hour":
        return stored_or_pinned_pflop(version)  # the others are cheap to compute
    if sort == "price_per_gpu_hour":
        return gpu_hour_key(dialect, version)
    if sort == "price":
        return hourly_key(dialect, version)
    if sort == "gpu_count":
        return sortable(OFFER.c.gpu_count, dialect)
    if sort == "provider":
        return OFFER.c.provider
    if sort == "price_per_pflop_hour":
        return pflop_hour_key(dialect, version)
    raise ValueError(f"unknown sort key {sort!r}")


OTHER = OFFER.alias("other_source")
OTHER_OBS = OBS.alias("other_source_obs")
OTHER_SEEN = OBS.alias("other_source_seen")
OTHER_LOCATION = LOCATION.alias("other_source_location")
"""Built once: an alias's column collection is costly to set up per statement."""


def source_rank_sql(source: Any) -> Any:
    """:func:`service.query.precedence.source_rank` in SQL: 0 first-party, then peer platforms."""
    whens = [(~source.contains(":"), FIRST_PARTY_RANK)]
    for position, platform in enumerate(PEER_PRECEDENCE, start=1):
        prefix = f"{platform}:"
        whens.append((func.substr(source, 1, len(prefix)) == prefix, position))
    return case(*whens, else_=UNKNOWN_PEER_RANK)


def outranked(version: int | None, dialect: str) -> Any:
    """:func:`_outranked` at ``version`` (None: current), as SQL text rendered once per
    dialect and version (:func:`_rendered`)."""
    return _rendered(version, dialect)


@lru_cache(maxsize=64)
def _rendered(version: int | None, dialect: str) -> Any:
    """:func:`_outranked` rendered to SQL text once, its constants inlined: the clause is
    in nearly every statement of a listing, and compiling it took 1.5 ms of each (a
    statement new to the compiled cache, as most of the listing mix's are: 3.4 ms on
    average). Its two EXISTS correlate to the statement's ``offer`` by that name, as the
    compiled clause did: it is rendered inside a statement reading ``offer``, and the text
    after that statement's WHERE kept. The constants are the code's own (sources' ranks,
    a status, a version number), never a request's."""
    clause = _outranked(version, dialect)
    renderer = sqlite.dialect() if dialect == "sqlite" else postgresql.dialect(paramstyle="named")
    compiled = (
        select(OFFER.c.id)
        .where(clause)
        .compile(dialect=renderer, compile_kwargs={"literal_binds": True})
    )
    _, where, condition = str(compiled).partition("\nWHERE ")
    if not where:
        raise AssertionError(f"no WHERE in the rendered precedence test: {compiled}")
    return literal_column(f"({condition})")


def _outranked(version: int | None, dialect: str) -> Any:
    """Another source reports the offer's (provider, sku, region, price kind), in that
    region or placed there (``offer_location``), and ranks before its source
    (:mod:`service.query.precedence`): the offer is not shown by default.

    Two probes, one per way of being there: the same region (``ix_offer_identity``, all
    four columns equal) or a location of the other offer in the offer's region
    (``ix_offer_location_region``, then the other offer by id). One EXISTS with the two ways
    OR-ed could seek ``ix_offer_identity`` on (provider, sku) only, every offer of the SKU
    in every region and kind: a full sort paid that for every matching offer. On SQLite
    the indexed columns a probe must not start from are written ``+column`` (no index).
    """
    other = OTHER
    other_rank, own_rank = source_rank_sql(other.c.source), source_rank_sql(OFFER.c.source)
    sqlite = dialect == "sqlite"

    def unindexed(name: str) -> Any:
        return literal_column(f"+{other.name}.{name}") if sqlite else other.c[name]

    before = or_(
        other_rank < own_rank,
        and_(
            other_rank == own_rank,
            other.c.source < OFFER.c.source,  # by code point, as Python compares (0037)
        ),
    )
    if version is None:
        alive: Any = unindexed("status") == OfferStatus.active.value
    else:  # its last observation opened by then is still open (as :func:`seen_at`): one
        # step back in ix_price_observation_offer_version, then that row by id
        last = (
            select(OTHER_SEEN.c.id)
            .where(OTHER_SEEN.c.offer_id == other.c.id, OTHER_SEEN.c.version_from <= version)
            .order_by(OTHER_SEEN.c.version_from.desc())
            .limit(1)
            .correlate(other)  # two levels up: the EXISTS reading the other offer
            .scalar_subquery()
        )
        closed = OTHER_OBS.c.version_to
        alive = exists().where(OTHER_OBS.c.id == last, or_(closed.is_(None), closed > version))
    same_region = exists().where(
        other.c.provider == OFFER.c.provider,
        other.c.sku == OFFER.c.sku,
        other.c.region == OFFER.c.region,
        other.c.price_kind == OFFER.c.price_kind,
        before,
        alive,
    )
    placed_there = exists().where(
        OTHER_LOCATION.c.region == OFFER.c.region,
        other.c.id == OTHER_LOCATION.c.offer_id,
        unindexed("provider") == OFFER.c.provider,
        unindexed("sku") == OFFER.c.sku,
        other.c.price_kind == OFFER.c.price_kind,
        before,
        alive,
    )
    return or_(same_region, placed_there)


def located(condition: ColumnElement[bool]) -> ColumnElement[bool]:
    """One of the offer's locations (``offer_location``) meets ``condition``."""
    return exists().where(LOCATION.c.offer_id == OFFER.c.id, condition)


def in_countries_sql(countries: Sequence[str], *, seek: bool = True) -> ColumnElement[bool]:
    """The offer is in one of ``countries``: its own country is, or (an offer without one:
    ``global``) one of its locations' is. The SQL twin of
    ``service.catalog.locations.in_countries``; the EXISTS probes
    ``ix_offer_location_offer_id_country`` for placeless rows only. ``seek`` False (SQLite):
    the offer's own country is tested where the row is read, never sought in an index."""
    country: Any = OFFER.c.country if seek else literal_column("+offer.country", String)
    own = country == countries[0] if len(countries) == 1 else country.in_(countries)
    where = (
        LOCATION.c.country == countries[0]
        if len(countries) == 1
        else LOCATION.c.country.in_(countries)
    )
    return or_(own, and_(OFFER.c.country.is_(None), located(where)))


def outside_countries_sql(excluded: Sequence[str]) -> ColumnElement[bool]:
    """``not_country``: the offer can run outside ``excluded`` (an offer whose place is not
    known at all is kept). The SQL twin of ``service.catalog.locations.outside_countries``."""
    elsewhere = or_(LOCATION.c.country.is_(None), LOCATION.c.country.not_in(excluded))
    return or_(
        OFFER.c.country.not_in(excluded),
        and_(
            OFFER.c.country.is_(None),
            or_(~located(LOCATION.c.offer_id.is_not(None)), located(elsewhere)),
        ),
    )


def offer_values_by_seeks(column: str, within: str = "") -> TextClause:
    """The distinct non-null values of the offer column ``column`` (of the offers matching
    ``within``, an SQL condition of the code's own, never a request's), read one index seek
    per value: a recursive loose index scan, each step the least value above the last
    (an index leading with ``column``, or with ``within``'s equality then ``column``)."""
    where = f" WHERE {within}" if within else ""
    above = f"{within} AND " if within else ""
    return text(
        "WITH RECURSIVE seen(value) AS ("
        f" SELECT min({column}) FROM offer{where}"
        " UNION ALL"
        f" SELECT (SELECT min({column}) FROM offer WHERE {above}{column} > seen.value)"
        " FROM seen WHERE seen.value IS NOT NULL"
        ") SELECT value FROM seen WHERE value IS NOT NULL"
    )
