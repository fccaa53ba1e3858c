"""Which source a listing shows when a first-party and a peer source report the same offer.

The rule: a **first-party** source is one whose name has no ``peer:`` prefix (``azure``,
``lambda``); a **peer** source re-publishes someone else's catalog (``skypilot:lambda``,
``gpuhunt:runpod``). A peer offer is dropped when a first-party offer with the same
(provider, sku, region, price kind) is in the same listing; everything else is kept, in
order. The provider's own word wins over a copy of it; a peer fills the gaps.

Peer offers of one identity from two peers are both kept: neither outranks the other.
Pure: no database, no settings. Offers may be mappings or objects with those attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any, TypeVar

T = TypeVar("T")
Identity = tuple[str, str, str, str]

IDENTITY_FIELDS = ("provider", "sku", "region", "price_kind")


def is_first_party(source: str) -> bool:
    """``azure`` is first-party; ``skypilot:azure`` is a peer."""
    return ":" not in source


def _field(offer: Any, name: str) -> Any:
    value = offer[name] if isinstance(offer, Mapping) else getattr(offer, name)
    return value.value if isinstance(value, Enum) else value


def identity(offer: Any) -> Identity:
    """The (provider, sku, region, price kind) an offer is compared by."""
    provider, sku, region, price_kind = (str(_field(offer, name)) for name in IDENTITY_FIELDS)
    return provider, sku, region, price_kind


def prefer_first_party(offers: Iterable[T]) -> list[T]:
    """The offers without the peer offers that a first-party offer in ``offers`` covers."""
    items = list(offers)
    covered = {identity(o) for o in items if is_first_party(str(_field(o, "source")))}
    return [
        o for o in items if is_first_party(str(_field(o, "source"))) or identity(o) not in covered
    ]
