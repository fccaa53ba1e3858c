"""What a request may filter offers by, and those filters as SQL.

:class:`OfferFilters` holds the request's filters; the compliance ones (``cert``, ``gdpr``,
``export_destination``) are resolved to plain sets by the compliance module
(:func:`resolve_compliance`) before :func:`apply_filters` adds every filter to a statement.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Select, and_, false, literal_column, or_, select

from service.query.facts import snapshot_token
from service.query.sql import (
    GPU,
    LOCATION,
    OFFER,
    PROVIDER,
    gpu_hour_key,
    in_countries_sql,
    offer_values_by_seeks,
    outside_countries_sql,
    price_key_bound,
    sortable,
)


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
    interconnect: Sequence[str] = ()
    """GPU interconnect kinds inside the node (any of them; see schema.enums.Interconnect)."""
    network: Sequence[str] = ()
    """Network kinds between nodes (any of them; see schema.enums.Network)."""
    min_network_gbps: Decimal | None = None
    """Gb/s per node, at least; an offer whose speed is unknown is left out."""
    include_peers: bool = False
    """False: one row per (provider, sku, region, price kind), from the most authoritative
    source reporting it (see :mod:`service.query.precedence`); True: every source's offers."""
    source_unindexed: bool = False
    """Internal, never a request's (:func:`service.query.offers.list_offers` sets it): on
    SQLite the ``source`` filter keeps most of the catalog, so it is tested on the rows or
    index entries read (``+offer.source``) instead of sought in the source's index (a table
    row read per offer of the source: see :func:`service.query.outrankers.holds_most`)."""

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
            "interconnect",
            "network",
            "min_network_gbps",
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
    licence_free: frozenset[str] | None = None
    """With ``licence_gpus``: every GPU slug an offer names (:func:`offer_gpu_slugs`, read in
    the same snapshot) that needs no licence. ``export_destination`` is tested as
    ``gpu_slug IN`` these, not ``IS NOT NULL AND NOT IN`` ``licence_gpus``: the same offers
    (every offer's slug is among those read), and on SQLite a third of the cost per offer
    read (45 against 16 ms for a scan of 210,000 offers, docs/benchmarks.md)."""
    licence_free_few: bool = False
    """``licence_free`` holds at most a :data:`FEW_MODELS`-th of the slugs offers name: on
    SQLite it may then be sought in a (gpu_slug, ...) index, else it is tested on what a
    read reads."""


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
    answers = _answers(conn, on)
    cert_providers = gdpr_countries = licence_gpus = None
    if filters.cert:
        helper = getattr(module, "providers_with_certs", None)
        if helper is None:
            raise ComplianceUnavailable("cert")
        schemes = list(filters.cert)
        cert_providers = answers(("cert", tuple(schemes)), helper, conn, schemes, on)
    if filters.gdpr:
        helper = getattr(module, "gdpr_countries", None)
        if helper is None:
            raise ComplianceUnavailable("gdpr")
        gdpr_countries = answers(("gdpr", filters.gdpr), helper, conn, on=on, zone=filters.gdpr)
    if filters.export_destination:
        helper = getattr(module, "gpus_needing_licence", None)
        if helper is None:
            raise ComplianceUnavailable("export_destination")
        destination = filters.export_destination.upper()
        licence_gpus = answers(("export_destination", destination), helper, conn, destination, on)
        named = answers(("gpu_slugs", None), offer_gpu_slugs, conn)
        licence_free = named - licence_gpus
        few = len(licence_free) * FEW_MODELS <= len(named)
        return ComplianceSets(cert_providers, gdpr_countries, licence_gpus, licence_free, few)
    return ComplianceSets(cert_providers, gdpr_countries, licence_gpus)


FEW_MODELS = 4
"""See :attr:`ComplianceSets.licence_free_few`."""

_GPU_SLUGS = offer_values_by_seeks("gpu_slug")


def offer_gpu_slugs(conn: Connection) -> list[str]:
    """Every GPU slug an offer row names, whatever its status or whether the GPU table
    knows it: one seek per slug along the offers' (gpu_slug, ...) indexes."""
    return [slug for (slug,) in conn.execute(_GPU_SLUGS)]


ANSWERS_KEY = "gpuatlas.compliance_answers"
ANSWERS_HELD = 256
"""Answers kept per database connection at most (a filter value is the caller's text)."""


def _answers(conn: Connection, on: date) -> Any:
    """Asks the compliance module one question (``_ask``), the answer as a frozenset, cached
    on the database connection while :func:`service.query.facts.snapshot_token` says nothing
    was committed since (so never stale), like the listing's small tables: each answer reads
    reference data whole (every GPU's export classification evaluated against the rules in
    force, the country lists) and cost more than the rest of a listing page (a page with
    ``export_destination`` and ``gdpr``: 14 of 24 ms in process)."""
    token = snapshot_token(conn)
    info = conn.connection.info
    held = info.get(ANSWERS_KEY)
    if token is None or held is None or held[0] != (token, on) or len(held[1]) >= ANSWERS_HELD:
        held = info[ANSWERS_KEY] = ((token, on), {})
    cache: dict[tuple[str, Any], frozenset[str]] = held[1]

    def answer(key: tuple[str, Any], helper: Any, *args: Any, **kwargs: Any) -> frozenset[str]:
        found = cache.get(key)
        if found is None:
            found = frozenset(_ask(key[0], helper, *args, **kwargs))
            if token is not None:
                cache[key] = found
        return found

    return answer


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


def apply_filters(
    stmt: Select[Any],
    filters: OfferFilters,
    dialect: str,
    compliance: ComplianceSets | None = None,
    *,
    skip: str | None = None,
    version: int | None = None,
    gpus: Sequence[str] | None = None,
    walked: bool = False,
    scanned: bool = False,
) -> Select[Any]:
    """Add every set filter (except ``skip``, used to explain exclusions) to ``stmt``.

    ``version`` says which read ``stmt`` is (None = current), for the price filter.
    ``walked``: ``stmt`` reads along the index of a sort other than the price per GPU-hour;
    on SQLite the price filter is then kept off that price's index, whose range the
    planner (without statistics) would otherwise take, sorting everything it keeps.
    ``gpus``: the GPU filter already resolved to slugs (see
    :func:`service.query.offers.live_gpu_slugs`).
    ``scanned``: ``stmt`` reads every active offer along the covering
    ``ix_offer_active_filters`` (SQLite); the ``gdpr`` filter's country list is then tested
    on its entries, not sought in ``ix_offer_country`` one country at a time (a table row
    read per match: most of the catalog, 50-65 ms at 210,000 offers, against a 20 ms scan).
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
        # the offers placed there, listed once per statement (an uncorrelated IN): a
        # correlated EXISTS probed `offer_location` for every offer outside the region, and a
        # page read filters first took 94 ms for that at 210,000 offers (docs/benchmarks.md)
        placed = select(LOCATION.c.offer_id).where(LOCATION.c.region == filters.region)
        stmt = stmt.where(or_(OFFER.c.region == filters.region, OFFER.c.id.in_(placed)))
    if filters.price_kind and on("price_kind"):
        stmt = stmt.where(OFFER.c.price_kind == filters.price_kind)
    if filters.source and on("source"):
        source = OFFER.c.source
        if filters.source_unindexed and dialect == "sqlite":
            source = literal_column("+offer.source", source.type)
        stmt = stmt.where(source == filters.source)
    count = sortable(OFFER.c.gpu_count, dialect)
    if filters.min_gpus is not None and on("min_gpus"):
        stmt = stmt.where(count >= _number(filters.min_gpus, dialect))
    if filters.max_gpus is not None and on("max_gpus"):
        stmt = stmt.where(count <= _number(filters.max_gpus, dialect))
    if filters.min_gpu_memory_gb is not None and on("min_gpu_memory_gb"):
        wanted = _number(filters.min_gpu_memory_gb, dialect)
        big = select(GPU.c.slug).where(sortable(GPU.c.memory_gb, dialect) >= wanted)
        stmt = stmt.where(
            or_(
                sortable(OFFER.c.gpu_memory_gb, dialect) >= wanted,
                and_(OFFER.c.gpu_memory_gb.is_(None), OFFER.c.gpu_slug.in_(big)),
            )
        )
    if filters.bare_metal is not None and on("bare_metal"):
        stmt = stmt.where(OFFER.c.bare_metal.is_(filters.bare_metal))
    if filters.interconnect and on("interconnect"):
        stmt = stmt.where(OFFER.c.interconnect.in_(sorted(set(filters.interconnect))))
    if filters.network and on("network"):
        stmt = stmt.where(OFFER.c.network.in_(sorted(set(filters.network))))
    if filters.min_network_gbps is not None and on("min_network_gbps"):
        speed = sortable(OFFER.c.network_gbps, dialect)
        stmt = stmt.where(speed >= _number(filters.min_network_gbps, dialect))
    if filters.max_price_per_gpu_hour is not None and on("max_price_per_gpu_hour"):
        price = gpu_hour_key(dialect, version)
        if walked and version is None and dialect == "sqlite":
            price = literal_column(f"+{OFFER.name}.{price.name}")
        stmt = stmt.where(price <= price_key_bound(filters.max_price_per_gpu_hour))
    if filters.provider_hq_not_in and on("provider_hq_not_in"):
        excluded = [c.upper() for c in filters.provider_hq_not_in]
        domestic = select(PROVIDER.c.slug).where(PROVIDER.c.hq_country.in_(excluded))
        stmt = stmt.where(OFFER.c.provider.not_in(domestic))
    compliance = compliance or ComplianceSets()
    if compliance.cert_providers is not None and on("cert"):
        stmt = stmt.where(OFFER.c.provider.in_(sorted(compliance.cert_providers)))
    if compliance.gdpr_countries is not None and on("gdpr"):
        countries = sorted(compliance.gdpr_countries)
        stmt = stmt.where(in_countries_sql(countries, seek=not (scanned and dialect == "sqlite")))
    if compliance.licence_gpus and compliance.licence_free is not None and on("export_destination"):
        # sought in a (gpu_slug, ...) index only when it leaves few of the models offers
        # name: to Russia one of eight, 57 -> 11 ms; to Germany every one, and SQLite's
        # planner (no statistics) read every offer through such an index (150 ms)
        slug = OFFER.c.gpu_slug
        if dialect == "sqlite" and not compliance.licence_free_few:
            slug = literal_column("+offer.gpu_slug", slug.type)
        stmt = stmt.where(slug.in_(sorted(compliance.licence_free)))
    elif compliance.licence_gpus is not None and on("export_destination"):
        licence = sorted(compliance.licence_gpus)
        stmt = stmt.where(OFFER.c.gpu_slug.is_not(None), OFFER.c.gpu_slug.not_in(licence))
    return stmt


def _number(value: Decimal, dialect: str) -> Any:
    return float(value) if dialect == "sqlite" else value
