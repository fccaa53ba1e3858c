"""What a listing filtered to one source can know of it first, cheaply: whether the peer
precedence can hide any of its offers, and whether it holds most of the catalog.

**The precedence.** The default listing hides an offer that a more authoritative source
also reports (:func:`service.query.sql.outranked`: two index probes per matching offer). A
listing filtered to one source pays them for every match before it can sort, even when
nothing can outrank that source: 215 ms of a 223 ms page at 200,000 offers, for a source
that no source ranking before it shares a provider with (docs/benchmarks.md, "The source
filter").

An offer can be outranked only by an offer of the **same provider** (both ways of being
there, :func:`~service.query.sql.outranked`, compare the provider) from a source that
**ranks before** its own (:func:`service.query.precedence.source_key`). So when no source
ranking before ``source`` has any offer of one of ``source``'s providers, in any status, at
any time, the test is vacuous and the listing may skip it: the same rows, none of the
probes. Offers are never deleted, only withdrawn, so "any offer" covers every version.

Three statements, each a few index seeks on the (source, provider, ...) unique index: the
distinct sources and ``source``'s distinct providers (loose index scans, one seek per
value), then one probe of the pairs of the two.

**Its size** (SQLite only: PostgreSQL's planner has statistics and weighs it itself).
Without statistics, SQLite seeks the source's index whenever the filter is there, then
reads a table row per offer of the source: 86 ms for a source of 200,000 offers of
210,000, where a scan of the covering ``ix_offer_active_filters`` takes 35 ms, and the
walk of a sort's index stops after a page. :func:`holds_most` estimates the source's
share from a few offers read by id: past :data:`MOST` of the catalog, the listing tests the
source on what it reads instead (:attr:`service.query.filters.OfferFilters.source_unindexed`).
"""

from __future__ import annotations

from sqlalchemy import Connection, case, func, literal, select

from service.query.precedence import source_key
from service.query.sql import OFFER, offer_values_by_seeks

_SOURCES = offer_values_by_seeks("source")
_PROVIDERS = offer_values_by_seeks("provider", "source = :source")


def distinct_sources(conn: Connection) -> list[str]:
    """Every source with an offer (any status), one index seek each."""
    return [value for (value,) in conn.execute(_SOURCES)]


def providers_of(conn: Connection, source: str) -> list[str]:
    """The providers ``source`` has an offer of (any status), one index seek each."""
    return [value for (value,) in conn.execute(_PROVIDERS, {"source": source})]


def may_be_outranked(conn: Connection, source: str) -> bool:
    """Whether some offer of ``source`` could be hidden by the peer precedence: a source
    ranking before it has an offer of one of its providers (see the module's docstring).
    False is exact (the test can hide nothing); True only means it must be run."""
    own = source_key(source)
    before = [other for other in distinct_sources(conn) if source_key(other) < own]
    if not before:
        return False
    providers = providers_of(conn, source)
    if not providers:
        return False
    shared = (
        select(literal(1))
        .select_from(OFFER)
        .where(OFFER.c.source.in_(before), OFFER.c.provider.in_(providers))
        .limit(1)
    )
    return conn.execute(shared).first() is not None


MOST = 0.4
"""The share of the catalog past which a source's offers are read by scanning, not by its
index: a row read by id costs about 2.5 times an entry of the covering scan (86 ms for
200,000 rows against 35 ms for 210,000 entries, in the listing benchmark)."""
PROBES = 64
"""Offers :func:`holds_most` reads to estimate a source's share of the catalog."""


def holds_most(conn: Connection, source: str) -> bool:
    """Whether ``source`` holds more than :data:`MOST` of the catalog's offers (any status),
    estimated from :data:`PROBES` offers read by id, evenly spaced from the first id to the
    last: ~0.1 ms, where counting its index entries up to that share took 4.8 ms at 200,000
    offers. The estimate only picks a plan (the rows are the same either way), and it can
    be wrong only near the share where the two plans cost about the same."""
    # two subqueries: SQLite seeks one end of the rowid for a lone min() or max() only
    # (together in one SELECT they scanned the table: 17 ms at 210,000 offers)
    ends = select(
        select(func.min(OFFER.c.id)).scalar_subquery(),
        select(func.max(OFFER.c.id)).scalar_subquery(),
    )
    low, high = conn.execute(ends).one()
    if low is None:
        return False
    step = max((high - low) / (PROBES - 1), 1)
    ids = sorted({min(high, low + round(i * step)) for i in range(PROBES)})
    mine = case((OFFER.c.source == source, 1), else_=0)
    read, held = conn.execute(
        select(func.count(), func.coalesce(func.sum(mine), 0)).where(OFFER.c.id.in_(ids))
    ).one()
    return bool(read) and held > MOST * read
