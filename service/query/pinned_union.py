"""Every match of a pinned (``as_of``) listing sorted, on SQLite, as two reads in one
statement: what a pinned page falls back on when no bounded walk can give it
(:func:`service.query.offers._pinned_page`).

The offers in force at version V are exactly:

1. the active offers whose price has not changed since V: ``last_changed_version <= V``.
   The ingest sets ``last_changed_version`` with every new observation of an offer (its
   first price, a new price, a reopening) and nothing else, and a withdrawal closes the
   offer's observation; so an active offer's current observation opened at
   ``last_changed_version``, and if that is V or before, it was the offer's price at V, and
   its sort key is the one the offer row stores;
2. the offers whose observation in force at V has been closed since (repriced or
   withdrawn after V): the observations with ``version_from <= V < version_to``, read
   along the partial ``ix_price_observation_version_to``, each with its offer.

No offer is in both (an offer of (2) has a new price or none since V) and none is missed (an
observation in force at V is still open, so current: (1), or closed after V: (2)).

Used while at most 20,000 observations were closed after V
(:data:`service.query.offers.CLOSED_SINCE_MAX`): further back, most offers were repriced
since, (2) is most of them, and its reads through the index cost more than the plain join.

The plain form joins every offer to its observation at V (an index probe and a row read per
offer) before filtering and sorting: 85 ms for a page whose filters keep most offers at
210,000 (#218 of the listing mix, seed 7). Here (1) reads no observation and (2) only the
few closed since V. Same rows and keys (on SQLite the plain form's key is the stored one's
integer below 10^5 USD an hour, as :func:`service.query.sql.stored_or_pinned_pflop` says),
in the listing's order, cursors included: ``tests/query/test_pinned_walk.py`` compares both.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import Select, and_, literal_column, or_, select, text, union_all

from schema.prices import ACTIVE_SCAN
from service.query.filters import ComplianceSets, OfferFilters, apply_filters
from service.query.sql import OBS, OFFER, Walked, sort_expression


def pinned_sorted(
    filters: OfferFilters,
    version: int,
    compliance: ComplianceSets | None,
    sort: str,
    descending: bool,
    after: Any | None,
    integer_key: bool,
) -> Select[Any]:
    """Ids and keys (``id``, ``sort_value``) of every offer in force at ``version`` that
    ``filters`` keep (every source: the caller applies the precedence), in the listing's
    order (nulls last, then the key, descending if asked, then the id), after ``after``
    (an :class:`service.query.offers.After`) when given. SQLite only."""
    dialect = "sqlite"
    # the active offers along the covering ix_offer_active_filters (its predicate's own
    # two terms, schema.prices.ACTIVE_SCAN), which holds every column read here
    unchanged = (
        select(OFFER.c.id, sort_expression(sort, dialect).label("sort_value"))
        .select_from(OFFER)
        .where(text(ACTIVE_SCAN.text), OFFER.c.last_changed_version <= version)
    )
    # the price filter kept off the price's index, the gdpr list off the country index:
    # most offers are read here, so each is tested on its entry
    unchanged = apply_filters(unchanged, filters, dialect, compliance, walked=True, scanned=True)
    since: Any = literal_column(f"+{OBS.name}.{OBS.c.version_from.name}")
    closed = (
        select(OFFER.c.id, sort_expression(sort, dialect, version).label("sort_value"))
        .select_from(Walked(OBS, OFFER, OFFER.c.id == OBS.c.offer_id))
        .where(OBS.c.version_to > version, since <= version)
    )
    closed = apply_filters(closed, filters, dialect, compliance, version=version)
    both = union_all(unchanged, closed).subquery("pinned_keys")
    key, ident = both.c.sort_value, both.c.id
    stmt = select(ident, key)
    if after is not None:
        if after.value is None:
            stmt = stmt.where(key.is_(None), ident > after.offer_id)
        else:
            value = int(Decimal(str(after.value))) if integer_key else after.value
            beyond = key < value if descending else key > value
            stmt = stmt.where(
                or_(key.is_(None), beyond, and_(key == value, ident > after.offer_id))
            )
    order = key.desc() if descending else key
    return stmt.order_by(key.is_(None), order, ident)
