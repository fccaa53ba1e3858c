"""Where a price quoted for several places can run: the ``offer_location`` rows.

Many providers quote one price for all their regions (region ``global``) or for a group of
regions (CoreWeave's ``north-america``). Such an offer is still launched somewhere, and
residency filters must see where. Each of these offers gets a *set* of locations, taken
from the first basis that names any (docs/locations.md):

1. ``source``: the source's own payload lists where the SKU can be launched (the record's
   ``locations``, e.g. Lambda's regions with capacity). Live facts: they may change every
   crawl and only ever change these rows, never the offer or its prices.
2. ``reference``: the provider's regions in ``fixtures/reference/regions.yaml``, narrowed to
   the regions whose ``gpus`` list the offer's GPU family when any region of the provider
   lists GPUs (then a region without the list is no candidate); a group code stands for
   its ``members``, or, when none of them is known to carry the GPU, for the group itself
   (a group names the one country of all its members).
3. ``peer``: peer catalogs' regional rows (sources ``skypilot:<x>`` / ``gpuhunt:<x>``) of
   the same provider and GPU model, except catalogs known to write every instance type into
   every region (:data:`EVERY_TYPE_EVERYWHERE`).
4. ``provider``: the provider's GPU regions, i.e. its reference regions that list any GPU
   family, when the offer's GPU is known but no basis above places it (DigitalOcean's L40S,
   sold but not published per region). Somewhere among the places the provider runs GPUs:
   weaker than ``reference``, and said so by its basis.

No basis: no rows, and the listing says "location not published".

:func:`derive` is pure; :func:`refresh` and :func:`refresh_after_ingest` are the thin
database layer, run by the catalog writer inside its transaction (an ingest, a reference
load). The filters' one definition of "an offer is in country X" for Python callers is
:func:`in_countries` (the SQL twin is ``service.query.filters.apply_filters``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any, Literal

from sqlalchemy import Connection, delete, insert, or_, select

from schema.catalog import GpuModel, Region
from schema.enums import OfferStatus
from schema.prices import Offer, OfferLocation
from service.core.in_list import among

OFFER = Offer.__table__  # type: ignore[attr-defined]
LOCATION = OfferLocation.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]

Basis = Literal["source", "reference", "peer", "provider"]
GLOBAL_REGION = "global"
"""The region code of a price that is the same everywhere the provider operates."""
EVERY_TYPE_EVERYWHERE = frozenset(
    {"skypilot:lambda", "gpuhunt:lambdalabs", "gpuhunt:oci", "skypilot:oci"}
)
"""Peer catalogs that write every instance type into every region (research notes,
shared/reference/provider_regions.md): a row "H100 in X" there is no evidence of H100 in X."""


@dataclass(frozen=True, slots=True)
class Place:
    """One reference region (or group) of a provider."""

    code: str
    country: str
    gpus: frozenset[str] | None = None
    members: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Places:
    """A provider's reference regions, in reference order."""

    regions: Mapping[str, Place] = field(default_factory=dict)

    @cached_property
    def lists_gpus(self) -> bool:
        """Whether any region of the provider lists GPU families."""
        return any(p.gpus is not None for p in self.regions.values())

    @cached_property
    def _rank(self) -> dict[str, int]:
        return {code: index for index, code in enumerate(self.regions)}

    def is_group(self, code: str) -> bool:
        place = self.regions.get(code)
        return place is not None and place.members is not None

    def order(self, code: str) -> tuple[int, str]:
        """Reference order first, then unknown codes by name."""
        index = self._rank.get(code)
        return (index, "") if index is not None else (len(self.regions), code)


@dataclass(frozen=True, slots=True)
class Location:
    region: str
    country: str | None
    basis: Basis


def placeable(region: str, places: Places) -> bool:
    """Whether an offer in ``region`` gets locations: ``global`` or a group code."""
    return region == GLOBAL_REGION or places.is_group(region)


def derive(
    region: str,
    family: str | None,
    places: Places,
    stated: Sequence[str] | None = None,
    peers: Iterable[tuple[str, str | None]] = (),
) -> list[Location]:
    """The locations of one offer in ``region`` (``global`` or a group code), first basis
    that names any; in reference order. Pure.

    ``family``: the offer's GPU family (None: unmapped GPU). ``stated``: the region codes
    the source lists for the SKU. ``peers``: (region, country) of peer catalogs' regional
    rows of the same provider and GPU model (already without :data:`EVERY_TYPE_EVERYWHERE`).
    """
    if not placeable(region, places):
        return []
    group = places.regions.get(region) if region != GLOBAL_REGION else None
    if stated:
        codes = sorted(set(stated), key=places.order)
        return [Location(c, _country(places, c), "source") for c in codes]
    if group is not None:
        candidates = [places.regions[c] for c in group.members or () if c in places.regions]
    else:
        candidates = [p for p in places.regions.values() if p.members is None]
    if places.lists_gpus:
        candidates = [p for p in candidates if family is not None and family in (p.gpus or ())]
    if candidates:
        return [Location(p.code, p.country, "reference") for p in candidates]
    if group is not None:  # somewhere in the group: its one country
        return [Location(group.code, group.country, "reference")]
    seen: dict[str, str | None] = {}
    for code, country in peers:
        if code not in seen and not places.is_group(code) and code != GLOBAL_REGION:
            seen[code] = country or _country(places, code)
    if seen:
        codes = sorted(seen, key=places.order)
        return [Location(c, seen[c], "peer") for c in codes]
    if family is None or group is not None:
        return []
    return [
        Location(p.code, p.country, "provider")
        for p in places.regions.values()
        if p.members is None and p.gpus
    ]


def _country(places: Places, code: str) -> str | None:
    place = places.regions.get(code)
    return place.country if place is not None else None


def in_countries(
    country: str | None, locations: Iterable[tuple[str, str | None]], wanted: Collection[str]
) -> bool:
    """An offer is in one of ``wanted`` when its own country is, or one of its locations'
    ((region, country) pairs) is. The Python twin of the SQL filter."""
    if country is not None:
        return country in wanted
    return any(c is not None and c in wanted for _, c in locations)


def outside_countries(
    country: str | None, locations: Sequence[tuple[str, str | None]], excluded: Collection[str]
) -> bool:
    """``not_country``: the offer can run outside ``excluded`` (an offer whose place is not
    known at all is kept, as before locations existed)."""
    if country is not None:
        return country not in excluded
    if not locations:
        return True
    return any(c is None or c not in excluded for _, c in locations)


def at_region(region: str, locations: Iterable[tuple[str, str | None]], wanted: str) -> bool:
    return region == wanted or any(r == wanted for r, _ in locations)


def pick(
    locations: Sequence[tuple[str, str | None]],
    *,
    country: str | None = None,
    region: str | None = None,
    countries: Collection[str] | None = None,
    excluded: Collection[str] = (),
) -> tuple[str, str | None] | None:
    """The location a listing row shows: the first one matching the location filters set
    (``countries``: the GDPR set), or the first one when none is set."""
    for loc_region, loc_country in locations:
        if country is not None and loc_country != country:
            continue
        if region is not None and loc_region != region:
            continue
        if countries is not None and loc_country not in countries:
            continue
        if excluded and loc_country in excluded:
            continue
        return (loc_region, loc_country)
    return locations[0] if locations else None


def locations_text(locations: Sequence[Mapping[str, Any]]) -> str | None:
    """Exports' text form: ``region:country:basis`` per location joined by ``"; "`` (the
    SQL twin is ``service.query.places.location_columns``); None without locations."""
    if not locations:
        return None
    return "; ".join(f"{loc['region']}:{loc['country'] or ''}:{loc['basis']}" for loc in locations)


# --------------------------------------------------------------------------- the database


def load_places(conn: Connection, providers: Collection[str] | None = None) -> dict[str, Places]:
    stmt = select(
        REGION.c.provider, REGION.c.code, REGION.c.country, REGION.c.gpus, REGION.c.members
    ).order_by(REGION.c.id)
    if providers is not None:
        stmt = stmt.where(REGION.c.provider.in_(sorted(providers)))
    regions: dict[str, dict[str, Place]] = {}
    for provider, code, country, gpus, members in conn.execute(stmt):
        regions.setdefault(provider, {})[code] = Place(
            code,
            country,
            None if gpus is None else frozenset(g.lower() for g in gpus),
            None if members is None else tuple(members),
        )
    return {p: Places(r) for p, r in regions.items()}


def _families(conn: Connection) -> dict[str, str]:
    return {slug: family.lower() for slug, family in conn.execute(select(GPU.c.slug, GPU.c.family))}


@dataclass
class RefreshReport:
    offers: int = 0
    """offers considered (``global`` or a group code)"""
    written: int = 0
    """offers whose locations changed"""
    unplaced: int = 0
    """offers left without any location"""


def refresh(
    conn: Connection,
    providers: Collection[str] | None = None,
    *,
    source: str | None = None,
    stated: Mapping[tuple[str, str, str, str, str], Sequence[str] | None] | None = None,
) -> RefreshReport:
    """Re-derive and store the locations of the placeable offers of ``providers`` (None:
    all), or only of ``source``'s offers when given.

    ``stated``: for ``source``'s offers, the locations its crawl stated, by identity
    (provider, sku, region, price kind, unit); None or empty says nothing. Offers not in
    ``stated`` keep the source locations stored before. Only changed offers are written.
    """
    places = load_places(conn, providers)
    report = RefreshReport()
    groups = {code for p in places.values() for code, r in p.regions.items() if r.members}
    targets = {GLOBAL_REGION} | groups
    stmt = select(
        OFFER.c.id,
        OFFER.c.source,
        OFFER.c.provider,
        OFFER.c.sku,
        OFFER.c.region,
        OFFER.c.price_kind,
        OFFER.c.unit,
        OFFER.c.gpu_slug,
    ).where(OFFER.c.region.in_(sorted(targets)))
    if source is not None:
        stmt = stmt.where(OFFER.c.source == source)
    if providers is not None:
        stmt = stmt.where(OFFER.c.provider.in_(sorted(providers)))
    offers = [
        o
        for o in conn.execute(stmt).mappings()
        if o["region"] == GLOBAL_REGION or places.get(o["provider"], Places()).is_group(o["region"])
    ]
    if not offers:
        return report
    ids = [o["id"] for o in offers]
    stored: dict[int, list[Location]] = {}
    for chunk in _chunks(ids):
        result = conn.execute(
            select(LOCATION.c.offer_id, LOCATION.c.region, LOCATION.c.country, LOCATION.c.basis)
            .where(among(LOCATION.c.offer_id, chunk, conn.dialect.name))
            .order_by(LOCATION.c.offer_id, LOCATION.c.position)
        )
        for offer_id, region, country, basis in result:
            stored.setdefault(offer_id, []).append(Location(region, country, basis))
    families = _families(conn)
    peers = _PeerRows(conn)
    changed: dict[int, list[Location]] = {}
    for offer in offers:
        report.offers += 1
        provider_places = places.get(offer["provider"], Places())
        key = (offer["provider"], offer["sku"], offer["region"], offer["price_kind"], offer["unit"])
        if stated is not None and offer["source"] == source and key in stated:
            said: Sequence[str] | None = stated[key]
        else:
            said = [loc.region for loc in stored.get(offer["id"], []) if loc.basis == "source"]
        family = families.get(offer["gpu_slug"]) if offer["gpu_slug"] else None
        new = derive(
            offer["region"],
            family,
            provider_places,
            said,
            peers.of(offer["provider"], offer["gpu_slug"]),
        )
        if not new:
            report.unplaced += 1
        if new != stored.get(offer["id"], []):
            changed[offer["id"]] = new
    if changed:
        for chunk in _chunks(list(changed)):
            conn.execute(delete(LOCATION).where(LOCATION.c.offer_id.in_(chunk)))
        rows = [
            {
                "offer_id": offer_id,
                "region": loc.region,
                "country": loc.country,
                "basis": loc.basis,
                "position": position,
            }
            for offer_id, locations in changed.items()
            for position, loc in enumerate(locations)
        ]
        if rows:
            conn.execute(insert(LOCATION), rows)
    report.written = len(changed)
    return report


class _PeerRows:
    """Peer catalogs' regional rows per (provider, GPU slug), read once per provider when
    first needed."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.rows: dict[str, dict[str | None, list[tuple[str, str | None]]]] = {}

    def of(self, provider: str, gpu_slug: str | None) -> Iterable[tuple[str, str | None]]:
        if gpu_slug is None:
            return ()
        if provider not in self.rows:
            stmt = (
                select(OFFER.c.gpu_slug, OFFER.c.region, OFFER.c.country)
                .where(
                    OFFER.c.provider == provider,
                    OFFER.c.status == OfferStatus.active.value,
                    OFFER.c.region != GLOBAL_REGION,
                    or_(OFFER.c.source.like("skypilot:%"), OFFER.c.source.like("gpuhunt:%")),
                    OFFER.c.source.not_in(sorted(EVERY_TYPE_EVERYWHERE)),
                    OFFER.c.country.is_not(None),
                )
                .order_by(OFFER.c.id)
            )
            by_gpu: dict[str | None, list[tuple[str, str | None]]] = {}
            for slug, region, country in self.conn.execute(stmt):
                by_gpu.setdefault(slug, []).append((region, country))
            self.rows[provider] = by_gpu
        return self.rows[provider].get(gpu_slug, ())


def _chunks(ids: list[int], size: int = 500) -> Iterable[list[int]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


_provider_of = attrgetter("provider")


def location_targets(conn: Connection) -> set[str]:
    """The region codes whose offers get locations: ``global`` and the reference groups."""
    groups = select(REGION.c.code).where(REGION.c.members.is_not(None))
    return {GLOBAL_REGION, *conn.execute(groups).scalars()}


def refresh_after_ingest(
    conn: Connection, source: str, records: Sequence[Any], regions: Collection[str]
) -> None:
    """An ingest's share: inside its transaction, after its offers are written.

    A first-party crawl re-derives its own ``global`` / group offers (nothing at all when it
    has none: ``regions``, the records' region codes, collected while they were validated,
    say so); a peer catalog's crawl re-derives its providers' placeable offers of every
    source, whose peer basis it may have changed."""
    if ":" in source:
        refresh(conn, set(map(_provider_of, records)))
        return
    targets = location_targets(conn).intersection(regions)
    if not targets:
        return
    # every placeable record says something: None (no locations) clears a source basis
    stated = {
        (r.provider, r.sku, r.region, r.price_kind, r.unit): r.locations
        for r in records
        if r.region in targets
    }
    refresh(conn, {key[0] for key in stated}, source=source, stated=stated)


def locations_of(conn: Connection, offer_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """Stored locations per offer id, in position order (for a page of offers)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for chunk in _chunks(sorted(set(offer_ids))):
        rows = conn.execute(
            select(LOCATION.c.offer_id, LOCATION.c.region, LOCATION.c.country, LOCATION.c.basis)
            .where(among(LOCATION.c.offer_id, chunk, conn.dialect.name))
            .order_by(LOCATION.c.offer_id, LOCATION.c.position)
        )
        for offer_id, region, country, basis in rows:
            out.setdefault(offer_id, []).append(
                {"region": region, "country": country, "basis": basis}
            )
    return out


__all__ = [
    "EVERY_TYPE_EVERYWHERE",
    "GLOBAL_REGION",
    "Location",
    "Place",
    "Places",
    "derive",
    "in_countries",
    "location_targets",
    "locations_of",
    "locations_text",
    "outside_countries",
    "pick",
    "refresh",
    "refresh_after_ingest",
]
