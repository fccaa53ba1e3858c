"""Which source a listing shows when several sources report the same offer.

An offer's identity is (provider, sku, region, price kind). When several sources report one
identity, the default listing shows it once, from the **most authoritative** source, and
names the others (``also_from``). The ranking, one total order on source names:

1. **First-party** sources (no ``:`` in the name: ``azure``, ``lambda``, ``lambda-web``): the
   provider's own word.
2. **Peers** (``<platform>:<cloud>``: ``skypilot:lambda``, ``gpuhunt:lambdalabs``), which
   re-publish someone else's catalog, platform by platform in :data:`PEER_PRECEDENCE` order.
3. Peers of a platform not listed there (none today; a guard test checks every registered
   peer source's platform is listed).

An offer quoted for several places (region ``global``) that is **placed** in a region
(``location_regions``, see ``service.catalog.locations``) also reports that region's identity: a
peer's regional copy of Lambda's ``gpu_8x_h100_sxm5`` in ``europe-central-1`` is the same
real offer as Lambda's own global one placed there, and is hidden behind it.

Ties inside a tier are broken by the source name (code point order): ``lambda`` before
``lambda-web`` (HTML sources are named ``<provider>-web``, so a provider's API wins over its
pricing page). Every offer of the winning source for an identity is kept (a source may
report one identity in two billing units); every offer of the other sources is hidden.
Prices are never merged: a hidden source's price stays visible in ``also_from`` and in the
price disagreements of ``/v1/quality``.

This module is the pure definition (no database, no settings); the listing applies the same
order in SQL (:func:`service.query.sql.outranked`), and ``tests/query/test_precedence.py`` checks
both give the same rows on the same data. Offers may be mappings or objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any, TypeVar

T = TypeVar("T")
Identity = tuple[str, str, str, str]

IDENTITY_FIELDS = ("provider", "sku", "region", "price_kind")

PEER_PRECEDENCE: tuple[str, ...] = ("skypilot", "gpuhunt")
"""Peer platforms, most preferred first. SkyPilot before gpuhunt is a fixed choice (SkyPilot
was integrated first and covers more clouds), not a claim that its figures are better: both
prices are kept, and a disagreement between them is reported."""

FIRST_PARTY_RANK = 0
UNKNOWN_PEER_RANK = len(PEER_PRECEDENCE) + 1


def is_first_party(source: str) -> bool:
    """``azure`` is first-party; ``skypilot:azure`` is a peer."""
    return ":" not in source


def source_rank(source: str) -> int:
    """0 for first-party sources, then 1, 2... in :data:`PEER_PRECEDENCE` order."""
    if is_first_party(source):
        return FIRST_PARTY_RANK
    platform = source.split(":", 1)[0]
    if platform in PEER_PRECEDENCE:
        return PEER_PRECEDENCE.index(platform) + 1
    return UNKNOWN_PEER_RANK


def source_key(source: str) -> tuple[int, str]:
    """Sorts sources most authoritative first (the rank, then the name)."""
    return source_rank(source), source


def _field(offer: Any, name: str) -> Any:
    value = offer[name] if isinstance(offer, Mapping) else getattr(offer, name)
    return value.value if isinstance(value, Enum) else value


def identity(offer: Any) -> Identity:
    """The (provider, sku, region, price kind) an offer is compared by."""
    provider, sku, region, price_kind = (str(_field(offer, name)) for name in IDENTITY_FIELDS)
    return provider, sku, region, price_kind


def reported(offer: Any) -> list[Identity]:
    """The identities an offer reports: its own, and for an offer placed in regions
    (an optional ``location_regions``), the same offer in each of them."""
    provider, sku, region, price_kind = identity(offer)
    places = offer.get("location_regions") if isinstance(offer, Mapping) else None
    return [
        (provider, sku, region, price_kind),
        *((provider, sku, place, price_kind) for place in places or () if place != region),
    ]


def best_sources(offers: Iterable[Any]) -> dict[Identity, str]:
    """Identity -> the most authoritative source reporting it among ``offers``."""
    best: dict[Identity, str] = {}
    for o in offers:
        source = str(_field(o, "source"))
        for key in reported(o):
            if key not in best or source_key(source) < source_key(best[key]):
                best[key] = source
    return best


def one_per_identity(offers: Iterable[T]) -> list[T]:
    """The offers of each identity's most authoritative source, in the order given."""
    items = list(offers)
    best = best_sources(items)
    return [o for o in items if str(_field(o, "source")) == best[identity(o)]]
