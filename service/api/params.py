"""The offer filters every listing-like endpoint shares, parsed once."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import Depends, Query
from pydantic import AfterValidator
from sqlalchemy import Connection

from schema import codes
from schema.codes import currency_codes
from schema.compliance import CERT_SCHEMES
from schema.enums import Interconnect, Network, PriceKind
from schema.text import ascii_digits
from schema.types import within_scale
from service.api.deps import ConnDep
from service.api.problems import Problem
from service.query.filters import (
    ComplianceRefused,
    ComplianceSets,
    ComplianceUnavailable,
    OfferFilters,
    resolve_compliance,
)
from service.query.versions import current_version, version_at

FILTER_PARAMS = {
    "gpu",
    "min_gpus",
    "max_gpus",
    "min_gpu_memory_gb",
    "provider",
    "price_kind",
    "region",
    "country",
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
    "source",
    "include_peers",
    "as_of",
}

Slug = Annotated[str, Query(max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")]
Country = Annotated[str | None, Query(pattern="^[A-Za-z]{2}$")]


def _scaled(value: Decimal | None) -> Decimal | None:
    return None if value is None else within_scale(value)


Number = Annotated[Decimal | None, Query(ge=0, le=1_000_000), AfterValidator(_scaled)]
"""A filter's number: at most ``NUMERIC_SCALE`` decimal places (a 422 beyond)."""


def invalid(name: str, reason: str, status: int = 422) -> Problem:
    return Problem(
        status,
        "Invalid parameter",
        f"{name}: {reason}",
        kind="invalid-parameter",
        invalid_params=[{"name": name, "reason": reason}],
    )


def iso_country(name: str, value: str | None) -> str | None:
    """``value`` upper-cased when it is an ISO 3166-1 alpha-2 country; a 422 problem
    naming parameter ``name`` otherwise (a code no country has matches nothing: an error,
    not an empty answer)."""
    return _iso(name, value) if value else None


def _iso(name: str, value: str) -> str:
    try:
        return codes.iso_country(value)
    except ValueError as exc:
        raise invalid(name, str(exc)) from None


EMPTY = "empty: leave the parameter out not to filter by it"


def _text(name: str, value: str | None) -> str | None:
    """A text filter without its surrounding spaces; an empty one is a 422 (it matched
    nothing, or for ``source`` listed every source's copies: never what was meant)."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        raise invalid(name, EMPTY)
    return text


def _split(name: str, values: list[str] | None, *, countries: bool = False) -> list[str]:
    """Repeated or comma-separated values, each without its surrounding spaces (empty
    parts between commas are skipped); a value with nothing in it is a 422, as for
    :func:`_text`."""
    out: list[str] = []
    for value in values or []:
        parts = [part.strip() for part in value.split(",")]
        if not any(parts):
            raise invalid(name, EMPTY)
        out.extend(_iso(name, part) if countries else part for part in parts if part)
    return out


def _kinds(name: str, values: list[str] | None, vocabulary: Iterable[str]) -> list[str]:
    """Comma-separated or repeated words of a closed vocabulary, lower-cased and checked
    (a word nobody uses would match nothing: an error, not an empty answer)."""
    known = [str(word) for word in vocabulary]
    out: list[str] = []
    for part in _split(name, values):
        word = part.lower()
        if word not in known:
            shown = part if len(part) <= 40 else part[:40] + "…"
            raise invalid(name, f"unknown {shown!r} (one of {', '.join(known)})")
        if word not in out:
            out.append(word)
    return out


@dataclass(frozen=True)
class Listing:
    filters: OfferFilters
    compliance: ComplianceSets
    version: int
    """The catalog version the answer is pinned to."""
    current: int
    as_of: bool
    """True when the caller asked for a past version."""
    today: date

    @property
    def pinned_version(self) -> int | None:
        """None when the current state may be read (the fast path)."""
        return None if self.version == self.current else self.version


def parse_as_of(conn: Connection, as_of: str | None, current: int) -> int:
    if as_of is None:
        return current
    text = as_of.strip()
    if ascii_digits(text):
        version = int(text)
        if version > current:
            raise invalid("as_of", f"version {version} does not exist yet (latest {current})")
        return version
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise invalid("as_of", "a catalog version (integer) or an ISO 8601 time") from None
    if when.tzinfo is None:
        raise invalid("as_of", "give a time zone (e.g. Z)")
    try:
        utc = when.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-14:00 is past the last UTC datetime
        raise invalid("as_of", "out of range (years 1 to 9999 in UTC)") from None
    return version_at(conn, utc)


def listing(
    conn: ConnDep,
    gpu: Annotated[str | None, Query(max_length=64, description="GPU slug or family")] = None,
    min_gpus: Number = None,
    max_gpus: Number = None,
    min_gpu_memory_gb: Number = None,
    provider: Annotated[
        list[str] | None, Query(description="provider slug (repeatable or comma-separated)")
    ] = None,
    price_kind: PriceKind | None = None,
    region: Annotated[str | None, Query(max_length=100, description="provider region code")] = None,
    country: Country = None,
    not_country: Annotated[
        list[str] | None, Query(description="exclude regions in these ISO countries")
    ] = None,
    gdpr: Annotated[
        Literal["eu_eea", "adequacy", "any"] | None,
        Query(
            description="regions where EU personal data may go: eu_eea, adequacy "
            "(EU/EEA or an adequacy decision), any (also conditional adequacy)"
        ),
    ] = None,
    cert: Annotated[
        list[str] | None, Query(description="certification schemes the provider must hold today")
    ] = None,
    provider_hq_not_in: Annotated[
        list[str] | None, Query(description="exclude providers headquartered in these countries")
    ] = None,
    export_destination: Annotated[
        str | None,
        Query(
            pattern="^[A-Za-z]{2}$",
            description="drop GPUs needing an export licence for this destination country",
        ),
    ] = None,
    bare_metal: bool | None = None,
    max_price_per_gpu_hour: Annotated[
        Decimal | None, Query(ge=0, le=1_000_000, description="USD"), AfterValidator(_scaled)
    ] = None,
    interconnect: Annotated[
        list[str] | None,
        Query(
            description="GPU interconnect inside the node, any of: nvlink, nvswitch, pcie, "
            "infinity_fabric (repeatable or comma-separated); offers where it is unknown "
            "are left out"
        ),
    ] = None,
    network: Annotated[
        list[str] | None,
        Query(
            description="network between nodes, any of: infiniband, roce, efa, ethernet "
            "(repeatable or comma-separated); offers where it is unknown are left out"
        ),
    ] = None,
    min_network_gbps: Annotated[
        Decimal | None,
        Query(
            ge=0,
            le=1_000_000,
            description="Gb/s per node between nodes, at least; offers where it is unknown "
            "are left out",
        ),
        AfterValidator(_scaled),
    ] = None,
    source: Annotated[str | None, Query(max_length=100)] = None,
    include_peers: Annotated[
        bool,
        Query(
            description="list every source's offer of a (provider, sku, region, price kind), "
            "not only the most authoritative source's"
        ),
    ] = False,
    as_of: Annotated[
        str | None, Query(max_length=40, description="catalog version or ISO 8601 time")
    ] = None,
) -> Listing:
    if min_gpus is not None and max_gpus is not None and min_gpus > max_gpus:
        raise invalid("min_gpus", "greater than max_gpus")
    for name, value in (("min_gpus", min_gpus), ("max_gpus", max_gpus)):
        if value is not None and not value.is_finite():
            raise invalid(name, "not a finite number")
    if min_network_gbps is not None and not min_network_gbps.is_finite():
        raise invalid("min_network_gbps", "not a finite number")
    providers = _split("provider", provider)
    certs = _kinds("cert", cert, CERT_SCHEMES)
    filters = OfferFilters(
        gpu=_text("gpu", gpu),
        provider=providers or None,
        country=iso_country("country", country),
        price_kind=price_kind.value if price_kind else None,
        source=_text("source", source),
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        min_gpu_memory_gb=min_gpu_memory_gb,
        region=_text("region", region),
        not_country=_split("not_country", not_country, countries=True),
        gdpr=gdpr,
        cert=certs,
        provider_hq_not_in=_split("provider_hq_not_in", provider_hq_not_in, countries=True),
        export_destination=export_destination.upper() if export_destination else None,
        bare_metal=bare_metal,
        max_price_per_gpu_hour=max_price_per_gpu_hour,
        interconnect=_kinds("interconnect", interconnect, Interconnect),
        network=_kinds("network", network, Network),
        min_network_gbps=min_network_gbps,
        include_peers=include_peers,
    )
    today = datetime.now(UTC).date()
    try:
        compliance = resolve_compliance(conn, filters, today)
    except ComplianceUnavailable as exc:
        raise Problem(
            400,
            "Filter not available",
            f"{exc.parameter}: compliance filters are not available yet on this server",
            kind="filter-not-available",
            invalid_params=[{"name": exc.parameter, "reason": "not available yet"}],
        ) from None
    except ComplianceRefused as exc:
        raise invalid(exc.parameter, exc.reason) from None
    current = current_version(conn)
    version = parse_as_of(conn, as_of, current)
    return Listing(filters, compliance, version, current, as_of is not None, today)


ListingDep = Annotated[Listing, Depends(listing)]


def listing_without(*names: str) -> Callable[..., Listing]:
    """The :func:`listing` dependency without the parameters ``names`` (an endpoint that
    refuses them: the OpenAPI document must not offer them either); they keep their
    defaults."""

    def narrower(conn: ConnDep, **filters: Any) -> Listing:
        return listing(conn, **filters)

    whole = inspect.signature(listing)
    kept = [p for p in whole.parameters.values() if p.name not in names]
    narrower.__signature__ = whole.replace(parameters=kept)  # type: ignore[attr-defined]
    return narrower


CurrentListingDep = Annotated[Listing, Depends(listing_without("as_of", "include_peers"))]
"""The listing's filters on the current catalog, as the overviews read them."""


@dataclass(frozen=True)
class Today:
    version: int
    today: date


def today(conn: ConnDep) -> Today:
    """The current catalog version and UTC day, for an answer that takes no filter."""
    return Today(current_version(conn), datetime.now(UTC).date())


TodayDep = Annotated[Today, Depends(today)]

DisplayCurrency = Annotated[
    str | None,
    Query(pattern="^[A-Za-z]{3}$", description="also show prices converted to this currency"),
]


def check_currency(currency: str | None) -> str | None:
    if currency is None:
        return None
    code = currency.upper()
    if code not in currency_codes():
        raise invalid("currency", f"{currency!r} is not an ISO 4217 currency")
    return code
