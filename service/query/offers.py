"""Listing offers: the filtered, deduped, ordered read shared by the CLI, the API and the
page (never writes).

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
sort key, USD per GPU-hour x 10^10 (:func:`service.query.sql.gpu_hour_key`): on the current
path it is the indexed ``offer.gpu_hour_usd_e10`` that ingest writes with each price, on the
pinned path it is computed from the observation, so a cursor's key means the same on both.
The key is never returned; the exact ``Decimal`` is. ``sort=price`` (USD per instance-hour)
has its own integer key the same way, ``offer.hourly_usd_e10``
(:func:`service.query.sql.hourly_key`), and so has ``sort=price_per_pflop_hour``,
``offer.pflop_hour_usd_e10`` (:func:`service.query.sql.pflop_hour_key`), which reference
loads keep right too (:mod:`service.catalog.sort_keys`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from functools import partial
from typing import Any

from sqlalchemy import (
    ARRAY,
    Connection,
    Integer,
    Select,
    and_,
    bindparam,
    exists,
    func,
    literal_column,
    or_,
    select,
    text,
    true,
    type_coerce,
)
from sqlalchemy.types import String

from schema.enums import OfferStatus
from schema.prices import ACTIVE_SCAN, SORT_KEY_SCALE, pflop_hour_key
from service.core.in_list import among
from service.query.facts import bare_metal_offered, catalog_facts, stated_gpu_memory
from service.query.filters import ComplianceSets, OfferFilters, apply_filters
from service.query.pinned_union import pinned_sorted
from service.query.precedence import IDENTITY_FIELDS, source_key
from service.query.provenance import finished_rows
from service.query.source_filter import holds_most, may_be_outranked
from service.query.sql import (
    MAX_ROW_ID,
    OBS,
    OFFER,
    OFFER_COLUMNS,
    PFLOP_GPU,
    PROVIDER,
    NotFound,
    Walked,
    in_force_unindexed,
    laterally,
    outranked,
    pinned_gpu_hour_order,
    pinned_join,
    pinned_order_value,
    price_key_bound,
    sort_expression,
    visible_at,
)


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
    walked: bool = False,
    priced: bool = True,
    pflop: bool = False,
) -> Select[Any]:
    """Offers with their price at ``version`` (None = current), filtered, peers deduped.

    ``scan``: the caller reads every match (an export, a ranking); on SQLite the status test
    is kept off the (status, price, id) index, whose equality would otherwise tempt the
    planner into a walk plus a sort of the whole catalog instead of a rowid scan.
    ``pflop``: a pinned read sorted by USD per PFLOPS-hour joins the GPU model its key
    divides by (:data:`service.query.sql.PFLOP_GPU`; on PostgreSQL, SQLite reads it only
    for repriced offers: :func:`service.query.sql.stored_or_pinned_pflop`).
    """
    status = OFFER.c.status
    if scan and dialect == "sqlite":
        status = literal_column("+offer.status")
    if version is None and not priced and scan and dialect == "sqlite":
        # ids and keys of every active offer, filters first: exactly the predicate of the
        # covering ix_offer_active_filters (schema.prices.ACTIVE_SCAN), as literals
        stmt = select(*columns).select_from(OFFER).where(text(ACTIVE_SCAN.text))
    elif version is None and not priced:  # the offer row alone (no filter reads the price)
        stmt = select(*columns).select_from(OFFER).where(status == OfferStatus.active.value)
    elif version is None:
        stmt = (
            select(*columns)
            .select_from(OFFER)
            .join(OBS, OBS.c.id == OFFER.c.observation_id)
            .where(status == OfferStatus.active.value)
        )
    else:
        stmt = select(*columns).select_from(OFFER).join(*pinned_join(version, dialect))
        if pflop and dialect != "sqlite":  # the model the pinned key reads (PFLOP_GPU)
            stmt = stmt.outerjoin(PFLOP_GPU, PFLOP_GPU.c.slug == OFFER.c.gpu_slug)
    stmt = apply_filters(
        stmt,
        filters,
        dialect,
        compliance,
        skip=skip,
        version=version,
        gpus=gpus,
        walked=walked,
        scanned=version is None and not priced and scan and dialect == "sqlite",
    )
    if not filters.include_peers:
        stmt = stmt.where(~outranked(version, dialect))
    return laterally(stmt, version, dialect)


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
    scan: bool = False,
    ids_only: bool = False,
) -> Select[Any]:
    """The listing: nulls last, then the sort key, then offer id (a total order).

    ``sort_value`` (what a cursor carries) is the integer key for ``price_per_gpu_hour``,
    ``price`` and ``price_per_pflop_hour`` (:data:`INTEGER_KEYS`).
    ``nulls`` False / True: only the offers whose sort key is set / null, ordered so an
    index on (…, key, id) serves the order (no leading ``key IS NULL`` term).
    ``scan``: filter first (see :func:`base_query`), then sort the matches.
    ``ids_only``: offer ids and keys only (a current read without the observation).
    """
    key = sort_expression(sort, dialect, version)
    stmt = base_query(
        (OFFER.c.id, *([] if ids_only else OFFER_COLUMNS[1:]), key.label("sort_value")),
        filters,
        dialect,
        version,
        compliance,
        gpus=gpus,
        scan=scan,
        walked=nulls is not None and not scan and sort in WALKED_ELSEWHERE,
        priced=not (ids_only and version is None),
        pflop=sort == "price_per_pflop_hour",
    )
    if after is not None and after.value is not None and sort in INTEGER_KEYS:
        after = After(int(Decimal(str(after.value))), after.offer_id)
    if nulls is not None:
        stmt = stmt.where(key.is_(None) if nulls else key.is_not(None))
    if after is not None and nulls is not None:
        if after.value is None:
            stmt = stmt.where(OFFER.c.id > after.offer_id)
        elif not nulls:
            # the first term only bounds the index range; the second is the keyset
            within = key <= after.value if descending else key >= after.value
            beyond = key < after.value if descending else key > after.value
            stmt = stmt.where(
                within, or_(beyond, and_(key == after.value, OFFER.c.id > after.offer_id))
            )
        after = None
    ordering = key
    if scan and dialect == "postgresql":
        # the filters first: no index may give the order. Else PostgreSQL, expecting the
        # LIMIT to stop it early, walked the sort's index with every filter as a Filter
        # (392 ms for a page whose five filters keep a hundred offers of 200,000)
        plus, nothing = ("||", "''") if sort == "provider" else ("+", "0")
        ordering = key.op(plus)(literal_column(nothing))
    order = ordering.desc() if descending else ordering
    if nulls:
        if dialect == "postgresql" and version is None and not scan:
            # every key here is null: by key, then id, is by id, and it is the order of the
            # sort's index (status, key, id) from its nulls on, which PostgreSQL does not
            # infer from `key IS NULL` (it read every keyless offer, filtered and probed
            # them, and sorted: 95-111 ms for a page of 100 at 200,000 offers)
            return laterally(stmt.order_by(key, OFFER.c.id), version, dialect)
        return laterally(stmt.order_by(OFFER.c.id), version, dialect)
    if nulls is False:
        return laterally(stmt.order_by(order, OFFER.c.id), version, dialect)
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
    return laterally(stmt.order_by(key.is_(None), order, OFFER.c.id), version, dialect)


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

    The current listing sorted by a key the offer row holds (:data:`INDEXED_SORTS`) reads
    along an index (status, key, id): the offers with a key first, then (if the page is
    not full, and the key can be null) those without, by id; one transaction, so one
    snapshot. Descending, the index walked backwards gives ties in reverse id order, so
    the page is read in three index ranges (:func:`_descending`).
    """
    dialect = conn.dialect.name
    source = filters.source
    if source is not None:  # see service.query.source_filter
        if not filters.include_peers and not may_be_outranked(conn, source):
            filters = replace(filters, include_peers=True)  # the precedence hides nothing
        if dialect == "sqlite" and holds_most(conn, source):
            filters = replace(filters, source_unindexed=True)
    if (
        version is None
        and filters.bare_metal is not None
        and not bare_metal_offered(conn, filters.bare_metal)
    ):
        return []  # no active offer has that value: nothing to read
    gpus = live_gpu_slugs(conn, filters.gpu) if version is None and filters.gpu else None
    shared: dict[str, Any] = {
        "dialect": dialect,
        "version": version,
        "compliance": compliance,
        "sort": sort,
        "descending": descending,
        "after": after,
        "gpus": gpus,
    }
    query = partial(offers_query, filters, **shared)
    if sort in INDEXED_SORTS and version is None and not offset:
        rows: list[dict[str, Any]] = []
        models = _models(conn, gpus, compliance) if sort in MERGED_PER_GPU else gpus
        if (after is None or after.value is not None) and _may_have_keys(conn, sort, models):
            keyed = query(nulls=False)
            found: list[dict[str, Any]] | None
            if sort in BY_VALUE:
                counts = (filters.min_gpus, filters.max_gpus)
                found = _by_value(conn, keyed, limit, descending, after, counts)
            elif sort in MERGED_PER_GPU and _merged(conn, sort, gpus, models):
                assert models is not None
                found = _merged_per_gpu(conn, keyed, filters, {**shared, "gpus": models}, limit)
            else:
                pages = Pages(keyed, query(nulls=False, ids_only=True), at_key(filters, shared))
                found = _walked(conn, pages, filters, shared, limit)
            if found is None:  # selective filters: first, then the matches sorted
                unfiltered = partial(offers_query, **shared)  # the filters are its argument
                ids = _filtered_first(conn, unfiltered, filters, limit)
                key = sort_expression(sort, dialect)
                by_ids = _by_ids(keyed, key, ids, descending, dialect) if ids else None
                found = _dicts(conn.execute(by_ids)) if by_ids is not None else []
            rows = found
        if len(rows) < limit and sort not in NEVER_NULL:
            unkeyed = query(nulls=True)  # along the index: (status, key IS NULL, id)
            rows += _dicts(conn.execute(unkeyed.limit(limit - len(rows))))
        return finished_rows(conn, rows, filters, compliance)
    if version is not None:
        ids = _pinned_page(
            conn, filters, version, compliance, sort, descending, after, limit, offset
        )
        rows = _pinned_by_ids(conn, ids, version, sort, descending)
        return finished_rows(conn, rows, filters, compliance)
    stmt = query().limit(limit)
    if offset:
        stmt = stmt.offset(offset)
    return finished_rows(conn, _dicts(conn.execute(stmt)), filters, compliance)


def _pinned_page(
    conn: Connection,
    filters: OfferFilters,
    version: int,
    compliance: ComplianceSets | None,
    sort: str,
    descending: bool,
    after: After | None,
    limit: int,
    offset: int,
) -> list[int]:
    """The ids of a pinned page, in the listing's order: every match's price at
    ``version`` is computed and the matches sorted, ids and keys only (a sort of whole rows
    moved ~1 KB a match through the sort: 1.0 against 0.6 s for 100,000 matches on
    PostgreSQL), the peer precedence applied to the rows read (:func:`_outranked_later`)."""
    if sort in PINNED_WALKS and not offset and (after is None or after.value is not None):
        walked = _pinned_walk(conn, filters, version, compliance, descending, after, limit)
        if walked is not None:
            return walked
    if sort == "provider" and not offset:
        found = _pinned_by_provider(conn, filters, version, compliance, descending, after, limit)
        if found is not None:
            return found
    if sort in FROM_CURRENT and not offset:
        found = _pinned_from_current(
            conn, filters, version, compliance, sort, descending, after, limit
        )
        if found is not None:
            return found
    every_source = filters if filters.include_peers else replace(filters, include_peers=True)
    if conn.dialect.name == "sqlite" and _few_closed_since(conn, version):
        # the offers unchanged since, and those closed since, apart (service.query.pinned_union)
        integer = sort in INTEGER_KEYS
        ordered = pinned_sorted(every_source, version, compliance, sort, descending, after, integer)
    else:
        ordered = offers_query(
            every_source,
            conn.dialect.name,
            version=version,
            compliance=compliance,
            sort=sort,
            descending=descending,
            after=after,
            ids_only=True,
        )
    return _pinned_ids(conn, ordered, filters, version, limit, offset)


def _few_closed_since(conn: Connection, version: int) -> bool:
    """Whether at most :data:`CLOSED_SINCE_MAX` observations were closed after ``version``
    (counted up to that bound along the partial ``version_to`` index). Past it, most offers
    were repriced since: reading each one's observation then through that index costs more
    than the plain join of every offer to it."""
    closed = select(CLOSED.c.offer_id).where(CLOSED.c.version_to > version)
    counted = select(func.count()).select_from(closed.limit(CLOSED_SINCE_MAX + 1).subquery())
    return bool(conn.execute(counted).scalar_one() <= CLOSED_SINCE_MAX)


def _pinned_ids(
    conn: Connection,
    ordered: Select[Any],
    filters: OfferFilters,
    version: int,
    limit: int,
    offset: int = 0,
) -> list[int]:
    """The ids of ``ordered`` (a pinned read of every source) from ``offset`` on, at most
    ``limit``: as they come with ``include_peers``, else with the peer precedence applied
    to the rows read (:func:`_outranked_later`)."""
    if filters.include_peers:
        return [row.id for row in conn.execute(ordered.limit(limit).offset(offset))]
    return [row["id"] for row in _outranked_later(conn, ordered, version, limit, offset)]


def _pinned_walk(
    conn: Connection,
    filters: OfferFilters,
    version: int,
    compliance: ComplianceSets | None,
    descending: bool,
    after: After | None,
    limit: int,
) -> list[int] | None:
    """The ids of a pinned page in the default order (USD per GPU-hour) read along the
    observations' price index (``ix_price_observation_gpu_hour[_key]``, the price alone:
    each candidate's offer and versions are read from its row), or None when the walk
    cannot tell: then every match is sorted (:func:`_pinned_page`).

    Every observation of every version is in the index, and those in force at ``version``
    are a fraction of them (one in 25 a month back in the history benchmark), so the walk
    is bounded as a current one is (:class:`Walk`): the price P of the :data:`PREFIX`-th
    entry from where the page starts (read from the index alone), then the observations in
    force at ``version`` priced up to P, matched against the filters, in order. If they
    hold the page, it is the page: every later offer costs more (or as much, with a
    higher id). Else, if that range held a :data:`WIDER`-th of the page at least, the walk
    is tried once more :data:`WIDER` times deeper; then (or at once, for filters that
    selective) it is given up: sorting their matches is cheaper. So it is when the index
    ends short of the page (the offers without a USD price come last: the full path reads
    them). The peer precedence is tested on the rows read (:func:`_outranked_later`)."""
    dialect = conn.dialect.name
    order = pinned_gpu_hour_order(dialect)
    key = sort_expression("price_per_gpu_hour", dialect, version)
    every_source = filters if filters.include_peers else replace(filters, include_peers=True)
    if dialect == "postgresql":
        # each observation's offer matched by a LATERAL probe (OFFSET 0: not flattened):
        # with a plain join PostgreSQL hashed the filters' matches from a scan of every
        # offer (85 ms) even where the walk reads a few hundred observations
        matched = select(OFFER.c.id).where(OFFER.c.id == OBS.c.offer_id)
        matched = apply_filters(matched, every_source, dialect, compliance, version=version)
        offer = matched.offset(0).lateral("walked_offer")
        walk = (
            select(offer.c.id, key.label("sort_value"))
            .select_from(OBS)
            .join(offer, true())
            .where(visible_at(OBS, version), order.is_not(None))
        )
    else:
        walk = (
            select(OFFER.c.id, key.label("sort_value"))
            .select_from(Walked(OBS, OFFER, OFFER.c.id == OBS.c.offer_id))
            .where(in_force_unindexed(version, dialect), order.is_not(None))
        )
        walk = apply_filters(walk, every_source, dialect, compliance, version=version)
    start = None
    if after is not None:
        start = pinned_order_value(int(Decimal(str(after.value))), dialect)
        within = order <= start if descending else order >= start
        beyond = order < start if descending else order > start
        walk = walk.where(
            within, or_(beyond, and_(order == start, OBS.c.offer_id > after.offer_id))
        )
    walk = walk.order_by(order.desc() if descending else order, OBS.c.offer_id)
    cap = None  # the price filter's largest key: where a descending walk starts
    if filters.max_price_per_gpu_hour is not None:
        cap = pinned_order_value(price_key_bound(filters.max_price_per_gpu_hour), dialect)
        if descending:
            walk = walk.where(order <= cap)
    for depth in (PREFIX, PREFIX * WIDER):
        stop = select(order).select_from(OBS).where(order.is_not(None))
        if start is not None:
            stop = stop.where(order <= start if descending else order >= start)
        if cap is not None:
            stop = stop.where(order <= cap)
        stop = stop.order_by(order.desc() if descending else order).offset(depth).limit(1)
        bound = conn.execute(stop).scalar()  # None: fewer entries are left, all walked
        if descending:
            bounded = walk if bound is None else walk.where(order >= bound)
        else:  # one end of the range: SQLite took the looser of two, and read past it
            end = cap if bound is None else bound
            bounded = walk if end is None else walk.where(order <= end)
        ids = _pinned_ids(conn, bounded, filters, version, limit)
        if len(ids) >= limit:
            return ids
        if bound is None or len(ids) * WIDER < limit:  # too selective for a deeper walk
            return None
    return None


FROM_CURRENT = frozenset({"price", "price_per_pflop_hour"})
"""Sorts whose pinned page is read from the current listing's order where it can be
(:func:`_pinned_from_current`): their key is stored on the offer row for its current price
(``hourly_usd_e10``, ``pflop_hour_usd_e10``), and only computing it for every match was
left (the USD per GPU-hour has :func:`_pinned_walk`)."""
CLOSED_SINCE_MAX = 20_000
"""Most observations closed after a pinned version for which :func:`_pinned_from_current`
is tried, and a full sort is read as two parts on SQLite (:func:`_few_closed_since`): past
that, most offers were repriced since, and every match is joined to its observation then
and sorted."""
CLOSED = OBS.alias("closed_since")
FETCH_AT_LEAST = 50
"""The first prefix :func:`_pinned_from_current` reads of the unchanged offers, at least."""


def _pinned_from_current(
    conn: Connection,
    filters: OfferFilters,
    version: int,
    compliance: ComplianceSets | None,
    sort: str,
    descending: bool,
    after: After | None,
    limit: int,
) -> list[int] | None:
    """The ids of a pinned page (a sort of :data:`FROM_CURRENT`) read as two parts,
    merged in the listing's order; None when too many prices changed since ``version``
    (more than :data:`CLOSED_SINCE_MAX` observations closed after it): then every match is
    sorted (:func:`_pinned_page`); so too with a region filter or a GPU filter, which keep
    too few of the index's first entries (a GPU model is 1-5 % of the catalog), except one
    live model sorted by a key with a per-model index (:data:`BY_GPU`): that index is read.

    The offers in force at a version are exactly (1) the active offers whose current
    observation opened at or before it: their price then is their price now, and so is the
    key the offer row stores, so they are read along the current listing's index in its
    order (status, key, id), probing only their observation's opening version, and stop at
    the page (within :data:`PREFIX` entries of the index, else None: :func:`_current_bound`);
    and (2) the offers with an observation closed after the version (repriced or
    withdrawn since: the partial ``ix_price_observation_version_to``), each read with its
    price then. No offer is in both. Part (1) is read a prefix at a time (twice the page,
    then 4x more), part (2) whole; merged, the rows up to part (1)'s last are the listing's
    (a later row of (1) sorts after it). The peer precedence at the version is tested on the
    rows kept, as :func:`_outranked_later` does. Computing every match's key and sorting
    them all cost 60-120 ms for a page of 100 (105,000 matches of 210,000 offers).
    """
    dialect = conn.dialect.name
    gpus = live_gpu_slugs(conn, filters.gpu) if filters.gpu else None
    one_model = gpus is not None and len(gpus) == 1 and sort in BY_GPU
    if filters.region or (gpus is not None and not one_model):
        return None  # a few percent of the index: its first entries hold too few of them
    closed = select(CLOSED.c.offer_id).where(CLOSED.c.version_to > version)
    since: Any
    if dialect == "postgresql":
        # the offers by id, from a list read first: with the subquery PostgreSQL hashed it
        # against a scan of every offer (55 of a page's 140 ms, twice: #306 of the mix)
        closed_ids = conn.execute(closed.limit(CLOSED_SINCE_MAX + 1)).scalars().all()
        if len(closed_ids) > CLOSED_SINCE_MAX:
            return None
        listed = bindparam("closed_ids", sorted(set(closed_ids)), type_=ARRAY(Integer))
        since = OFFER.c.id.in_(select(func.unnest(listed)))
    else:
        if not _few_closed_since(conn, version):
            return None
        since = OFFER.c.id.in_(closed)
    every_source = filters if filters.include_peers else replace(filters, include_peers=True)
    shared: dict[str, Any] = {
        "compliance": compliance,
        "sort": sort,
        "descending": descending,
        "after": after,
        "ids_only": True,
        "gpus": gpus,
    }
    unchanged = exists().where(OBS.c.id == OFFER.c.observation_id, OBS.c.version_from <= version)
    parts = (False, True) if after is None or after.value is not None else (True,)
    part_two: list[list[tuple[Any, ...]]] = []

    def changed() -> list[tuple[Any, ...]]:
        """Part (2), whole: (key is null, key, id) each. Read once, and only once part (1)
        can give the page: a bounded range short of it gives the read up first (the read
        of part (2) cost 15 of #333's 52 ms before the full sort, docs/benchmarks.md)."""
        if not part_two:  # one read for keys and nulls alike (both read every such offer)
            pinned = offers_query(every_source, dialect, version=version, **shared)
            rows = conn.execute(pinned.where(since))
            part_two.append([_order(row, False, descending) for row in rows])
        return part_two[0]

    def read(bound: Any) -> list[int] | None:
        fetch = max(2 * limit, FETCH_AT_LEAST)
        while True:
            current: list[tuple[Any, ...]] = []  # part (1), a prefix in the listing's order
            for nulls in parts:
                if len(current) == fetch:
                    break
                stmt = offers_query(every_source, dialect, nulls=nulls, **shared).where(unchanged)
                if not nulls and bound is not None:
                    key = sort_expression(sort, dialect)
                    stmt = stmt.where(key >= bound if descending else key <= bound)
                rows = conn.execute(stmt.limit(fetch - len(current)))
                current += [_order(row, nulls, descending) for row in rows]
                if not nulls and len(current) < fetch and bound is not None:
                    return None  # the bounded range is short of the page
            merged = sorted([*current, *changed()])
            whole = len(current) < fetch  # part (1) read to its end
            if not whole:
                merged = merged[: merged.index(current[-1]) + 1]
            ids = [entry[-1] for entry in merged]
            if not filters.include_peers:
                hidden = _outranked_ids(conn, ids, version)
                ids = [i for i in ids if i not in hidden]
            if len(ids) >= limit or whole:
                return ids[:limit]
            fetch *= 4

    for depth in (PREFIX, PREFIX * WIDER) if sort in WIDENED else (PREFIX,):
        model = gpus[0] if one_model and gpus else None
        keyed = False in parts
        bound = _current_bound(conn, sort, descending, after, depth, model) if keyed else None
        found = read(bound)
        if found is not None or bound is None:
            return found
    return None  # selective filters: sorting all their matches is cheaper


def _current_bound(
    conn: Connection,
    sort: str,
    descending: bool,
    after: After | None,
    depth: int,
    model: str | None = None,
) -> Any:
    """The current key ``depth`` entries along the sort's index from where a page starts
    (None: fewer are left): :func:`_pinned_from_current` reads the unchanged offers up to
    it, as a current walk (:class:`Walk`) does: :data:`PREFIX` entries, then for a
    :data:`WIDENED` sort :data:`WIDER` times more, then it gives up (filters that keep few
    of the index's offers would have it read the whole index, an offer row and an
    observation probe per entry: 140-220 ms for a page of 100). ``model``: along that GPU
    model's own index."""
    key = sort_expression(sort, conn.dialect.name)
    stop = select(key).where(OFFER.c.status == OfferStatus.active.value, key.is_not(None))
    if model is not None:  # the model's own index (gpu_slug, status, key, id): BY_GPU
        stop = stop.where(OFFER.c.gpu_slug == model)
    if after is not None and after.value is not None:
        value = int(Decimal(str(after.value)))
        stop = stop.where(key <= value if descending else key >= value)
    stop = stop.order_by(key.desc() if descending else key).offset(depth).limit(1)
    return conn.execute(stop).scalar()


def _order(row: Any, nulls: bool, descending: bool) -> tuple[Any, ...]:
    """A row's place in a listing's order: nulls last, then the key (an integer here),
    descending if asked, then the id."""
    if nulls or row.sort_value is None:
        return (1, 0, row.id)
    value = int(row.sort_value)
    return (0, -value if descending else value, row.id)


def _pinned_by_provider(
    conn: Connection,
    filters: OfferFilters,
    version: int,
    compliance: ComplianceSets | None,
    descending: bool,
    after: After | None,
    limit: int,
) -> list[int] | None:
    """The ids of a pinned page sorted by provider, read one provider at a time, or None
    when :data:`PINNED_PROVIDERS` providers in a row were read without filling the page (the
    filters are selective: sorting all their matches is cheaper).

    The order is (provider, id), so the page is the first provider's matches by id, then the
    next provider's... Each provider's matches at ``version`` are read alone (its offers
    from ``ix_offer_identity``, each probed for its observation in force, then sorted by
    id): a page of the largest provider's offers cost what they do, where sorting every
    match of the catalog cost 76-166 ms (listing benchmark, 210,000 offers). The providers
    come from the provider table (those with offers), in the database's own order of the
    column (the offers' provider column refers to it), from the cursor's provider on."""
    dialect = conn.dialect.name
    wanted = set(filters.providers())
    order = PROVIDER.c.slug.desc() if descending else PROVIDER.c.slug
    offered = select(OFFER.c.id).where(OFFER.c.provider == PROVIDER.c.slug)  # ix_offer_identity
    providers = select(PROVIDER.c.slug).where(offered.exists()).order_by(order)
    if after is not None:
        providers = providers.where(
            PROVIDER.c.slug <= after.value if descending else PROVIDER.c.slug >= after.value
        )
    every_source = filters if filters.include_peers else replace(filters, include_peers=True)
    ids: list[int] = []
    short = 0
    for provider in conn.execute(providers).scalars():
        if wanted and provider not in wanted:
            continue
        if short == PINNED_PROVIDERS:
            return None
        one = offers_query(
            replace(every_source, provider=[provider]),
            dialect,
            version=version,
            compliance=compliance,
            sort="provider",
            descending=descending,
            after=after if after is not None and after.value == provider else None,
            ids_only=True,
        )
        needed = limit - len(ids)
        ids += _pinned_ids(conn, one, filters, version, needed)
        if len(ids) >= limit:
            return ids
        short += 1
    return ids  # every provider read


PINNED_PROVIDERS = 4
"""Providers a pinned page sorted by provider reads one at a time without filling the page
before it sorts every match instead (:func:`_pinned_by_provider`)."""


def _pinned_by_ids(
    conn: Connection, ids: list[int], version: int, sort: str, descending: bool
) -> list[dict[str, Any]]:
    """The rows of a pinned page chosen by :func:`_pinned_page`, in the order of ``ids``."""
    if not ids:
        return []
    everything = OfferFilters(include_peers=True)  # chosen already: no filter, no probe
    stmt = offers_query(
        everything, conn.dialect.name, version=version, sort=sort, descending=descending
    ).where(among(OFFER.c.id, ids, conn.dialect.name))
    found = {row["id"]: row for row in _dicts(conn.execute(stmt))}
    return [found[i] for i in ids if i in found]


def _models(
    conn: Connection,
    gpus: Sequence[str] | None,
    compliance: ComplianceSets | None,
    min_memory: Decimal | None = None,
) -> list[str] | None:
    """The live GPU models a current page can hold, when its filters name them (None: any
    model): the GPU filter's (``gpus``), less those ``export_destination`` excludes (of
    every live model, without a GPU filter) and those no offer of which can meet
    ``min_gpu_memory_gb`` (``min_memory``): neither the model's figure nor any memory its
    offers state (:func:`~service.query.facts.stated_gpu_memory`) reaches it. Only what
    the listing's statements also filter: a smaller set only avoids reading offers that
    the filters would drop. (The offers without a model have no key of the sorts that
    read this set, so they are in the page's unkeyed part, filtered there.)"""
    licence = compliance.licence_gpus if compliance is not None else None
    if licence is None and min_memory is None:
        return None if gpus is None else list(gpus)
    facts = catalog_facts(conn, datetime.now(UTC).date())
    models = sorted(facts.live_gpus) if gpus is None else list(gpus)
    if licence is not None:
        models = [slug for slug in models if slug not in licence]
    if min_memory is not None:
        floor = float(min_memory) * (1 - MEMORY_SLACK)
        stated = stated_gpu_memory(conn)
        models = [
            slug
            for slug in models
            if float(facts.gpu_memory.get(slug, 0)) >= floor or stated.get(slug, 0.0) >= floor
        ]
    return models


MEMORY_SLACK = 1e-9
"""A model is kept when its memory is within this share under ``min_gpu_memory_gb``: the
statements compare floats on SQLite, and a model kept too many is only read for nothing."""


def _merged(
    conn: Connection, sort: str, gpus: Sequence[str] | None, models: Sequence[str] | None
) -> bool:
    """Whether a current page of a :data:`MERGED_PER_GPU` sort is read as one walk per GPU
    model (:func:`_merged_per_gpu`): a GPU filter matching several live models, or filters
    leaving at most :data:`MERGED_MODELS` models with a key of that sort, having removed
    some (else a single walk reads no more than the merged ones would). Without a GPU
    filter, ``export_destination`` to China, Russia or Iran leaves the models without an
    export licence requirement (13 of 72 live ones in the seeded catalog, 3 of them with a
    BF16 figure), which are the ends of the USD per PFLOPS-hour index that the filter
    removes: its walk read 16,000 entries for none of them, then sorted every match (95 ms
    in the listing benchmark, against a few walks of one model each)."""
    if models is None:
        return False
    if gpus is not None:
        return len(gpus) > 1
    keyed = [slug for slug in models if _may_have_keys(conn, sort, [slug])]
    if len(keyed) > MERGED_MODELS:
        return False
    # only when the filters removed a model with a key: else one walk reads what they
    # would (export_destination=DE leaves every model: seven walks, each falling back to
    # its filters first under a selective cert, cost 384 against 45-100 ms)
    live = catalog_facts(conn, datetime.now(UTC).date()).live_gpus
    return any(_may_have_keys(conn, sort, [slug]) for slug in live if slug not in models)


def _may_have_keys(conn: Connection, sort: str, gpus: Sequence[str] | None) -> bool:
    """False when no offer of the GPU filter's models can have a USD per PFLOPS-hour key:
    none of them has a BF16 TFLOPS figure (a T4, a V100). Their walk would read the whole
    index for nothing: PostgreSQL, its estimate of such a model's keyed offers taken from
    the model's share of the catalog, walked ``ix_offer_status_pflop_hour`` through every
    keyed offer (184,000 in the listing benchmark, 0.2-0.3 s) to find none."""
    if sort != "price_per_pflop_hour" or gpus is None:
        return True
    figures = catalog_facts(conn, datetime.now(UTC).date()).tflops_bf16
    return any(pflop_hour_key(SORT_KEY_SCALE, figures.get(slug)) is not None for slug in gpus)


def ceiling(
    conn: Connection, sort: str, cap: Decimal | None, gpus: Sequence[str] | None
) -> int | None:
    """The largest sort key an offer under ``max_price_per_gpu_hour`` can have (None: no
    bound): the cap's own key for the price per GPU-hour; for USD per PFLOPS-hour (which
    never decreases with the price for one GPU model) the cap's key on the filter's models
    or every live model, whichever has the fewest TFLOPS."""
    if cap is None or sort not in ("price_per_gpu_hour", "price_per_pflop_hour"):
        return None
    top = price_key_bound(cap)
    if sort == "price_per_gpu_hour":
        return top
    facts = catalog_facts(conn, datetime.now(UTC).date())
    models = facts.live_gpus if gpus is None else gpus
    figures = [facts.tflops_bf16[s] for s in models if facts.tflops_bf16.get(s)]
    return max((pflop_hour_key(top, t) or 0 for t in figures), default=None)


def _walked(
    conn: Connection, pages: Pages, filters: OfferFilters, shared: dict[str, Any], limit: int
) -> list[dict[str, Any]] | None:
    """The page of a current listing read along its sort's index (:class:`Walk`); None when
    the walk gives up (the filters keep too few of its first entries).

    Before giving up, a :data:`MERGED_PER_GPU` sort whose ``min_gpu_memory_gb`` leaves a
    few GPU models, having removed some with a key (:func:`_models`, :func:`_merged`), is
    read as one walk per model: the dearest USD per PFLOPS-hour are small GPUs, whole runs
    of the index that filter removes (``-price_per_pflop_hour min_gpu_memory_gb=80``:
    62-71 ms filters first, against a few walks of one model each). Only after the walk
    gave up: where it does not (the cheapest, big GPUs, first), one walk reads less than
    several (``price_per_pflop_hour min_gpu_memory_gb=48``, six models: 66 ms merged, the
    statements of six walks, against one walk). SQLite only: on PostgreSQL the largest
    memories offers state are read again whenever the server's snapshot has moved (any
    transaction of the server moves it), 36-63 ms at 210,000 offers, and its walks' round
    trips cost more: pages of that kind took 196-210 ms there, against 125-170 ms filters
    first (docs/benchmarks.md, "Tenth round")."""
    sort, gpus = shared["sort"], shared["gpus"]
    top = ceiling(conn, sort, filters.max_price_per_gpu_hour, gpus)
    walk = Walk(sort, shared["descending"], limit, shared["after"], gpus, top)
    try:
        return walk.rows(conn, pages, _give_up)
    except _GaveUp:
        pass
    memory = filters.min_gpu_memory_gb
    if sort not in MERGED_PER_GPU or memory is None or conn.dialect.name != "sqlite":
        return None
    models = _models(conn, gpus, shared["compliance"], memory)
    if not _merged(conn, sort, gpus, models):
        return None
    assert models is not None
    return _merged_per_gpu(conn, pages.keyed, filters, {**shared, "gpus": models}, limit)


def _merged_per_gpu(
    conn: Connection,
    keyed: Select[Any],
    filters: OfferFilters,
    shared: dict[str, Any],
    limit: int,
) -> list[dict[str, Any]] | None:
    """The first ``limit`` offers with a key of a current listing whose GPU filter matches
    several live models (a family: ``h100`` is three), or whose filters leave a few models
    (``shared["gpus"]``, see :func:`_merged`), for a sort with a per-GPU index
    (:data:`MERGED_PER_GPU`): each model's first ``limit`` offers, walked along its own
    index as a one-model filter is (:class:`Walk`), merged by (key, id). Same rows, same
    order: an offer past its model's first ``limit`` has ``limit`` offers before it. The
    walks read ids and keys only; the page's rows are read once, by id, after the merge
    (each walk read its ``limit`` whole rows before: six models, six times the page's
    rows, 47 statements and 55-67 ms for ``-price_per_pflop_hour min_gpu_memory_gb=48`` with
    three more filters).

    None when a model's walk gives up (its filters keep too few of its index's first
    entries): the caller then reads the filters first once, for every model. Each model
    read filters first on its own read its offers row by row through its index and sorted
    them (24 ms a model at 26,000 offers each), against one scan of the covering index for
    all (35 ms): ``-price_per_pflop_hour min_gpu_memory_gb=141 min_gpus=4`` took 90 ms
    over three models (docs/benchmarks.md, "Tenth round")."""
    sort, descending, dialect = shared["sort"], shared["descending"], shared["dialect"]
    keys = offers_query(filters, **shared, nulls=False, ids_only=True)
    at = offers_query(filters, **{**shared, "after": None}, nulls=False, ids_only=True)
    found: list[dict[str, Any]] = []
    for slug in shared["gpus"]:
        if not _may_have_keys(conn, sort, [slug]):
            continue
        top = ceiling(conn, sort, filters.max_price_per_gpu_hour, [slug])
        walk = Walk(sort, descending, limit, shared["after"], [slug], top)
        mine = OFFER.c.gpu_slug == slug
        model = Pages(keys.where(mine), keys.where(mine), at.where(mine))
        try:
            found += walk.rows(conn, model, _give_up)
        except _GaveUp:
            return None
    found.sort(key=lambda row: row["id"])
    found.sort(key=lambda row: row["sort_value"], reverse=descending)
    ids = [row["id"] for row in found[:limit]]
    if not ids:
        return []
    key = sort_expression(sort, dialect)
    return _dicts(conn.execute(_by_ids(keyed, key, ids, descending, dialect)))


class _GaveUp(Exception):
    """A model's walk of :func:`_merged_per_gpu` would read its filters first."""


def _give_up(limit: int) -> list[int]:
    raise _GaveUp


def _filtered_first(conn: Connection, query: Any, filters: OfferFilters, limit: int) -> list[int]:
    """The first ``limit`` offers with a key of a current listing, the filters first (their
    own indexes, or one scan) and the matches sorted: what a walk falls back on when the
    filters keep too few of the index's first entries. The precedence test is applied to
    the rows read (:func:`_outranked_later`), not to every match before the sort: two
    probes per match were most of its cost (0.39 s against 0.16 s without them, for a filter
    keeping 105,000 of 200,000 offers). Only ids and keys are sorted (no observation, no
    columns): the caller reads the page's rows by id."""
    if filters.include_peers or filters.source is not None:
        # a source filter: its own index, and often a peer source whose offers are mostly
        # outranked (read a prefix at a time, it would be read nearly whole, many times)
        ordered = query(filters, nulls=False, scan=True, ids_only=True)
        return [row.id for row in conn.execute(ordered.limit(limit))]
    every_source = replace(filters, include_peers=True)
    ordered = query(every_source, nulls=False, scan=True, ids_only=True)
    return [row["id"] for row in _outranked_later(conn, ordered, None, limit, 0)]


def _outranked_later(
    conn: Connection, ordered: Select[Any], version: int | None, limit: int, offset: int
) -> list[dict[str, Any]]:
    """A page (pinned, or a current one filtered first) with the peer precedence applied to
    the rows read, not to every match.

    A pinned listing sorts every match (each offer's price at the version is computed), and
    the precedence test (:func:`service.query.sql.outranked`, two probes per offer) in the
    statement ran for every match before the sort. Whether an offer is outranked does not
    depend on the other rows, so the ordered rows of every source are read a prefix at a
    time (twice the page, then 4x more while outranked rows leave it short), and only those
    are tested: the first ``offset + limit`` rows kept are the deduplicated listing's. The
    order is total and the transaction's snapshot one, so a longer read starts with the
    rows already tested: they are not tested again. (Reading four times the prefix at once,
    to spare a second sort when peers' copies fill the first, cost SQLite's sorter more than
    it saved: a pinned page of 100 at 5 million observations, 32 → 51 ms.)
    """
    wanted = offset + limit
    fetch = max(2 * wanted, 50)
    kept: list[dict[str, Any]] = []
    tested = 0  # rows of the ordered read already tested (a prefix of every read)
    while True:
        rows = _dicts(conn.execute(ordered.limit(fetch)))
        part = rows[tested:]
        hidden = _outranked_ids(conn, [r["id"] for r in part], version)
        kept += [r for r in part if r["id"] not in hidden]
        tested = len(rows)
        if len(kept) >= wanted or len(rows) < fetch:
            return kept[offset:wanted]
        fetch *= 4


def _outranked_ids(conn: Connection, ids: list[int], version: int | None) -> set[int]:
    """Those of ``ids`` that a more authoritative source's offer outranks at ``version``
    (:func:`service.query.sql.outranked`), tested a thousand at a time."""
    hidden: set[int] = set()
    dialect = conn.dialect.name
    for start in range(0, len(ids), 1000):
        part = ids[start : start + 1000]
        test = select(OFFER.c.id).where(
            among(OFFER.c.id, part, dialect), outranked(version, dialect)
        )
        hidden.update(conn.execute(test).scalars())
    return hidden


PINNED_WALKS = frozenset({"price_per_gpu_hour"})
"""Sorts whose pinned page is first walked along an index of the observations
(:func:`_pinned_walk`)."""
INDEXED_SORTS = frozenset(
    {"price_per_gpu_hour", "price", "provider", "gpu_count", "price_per_pflop_hour"}
)
"""Sorts whose current key is an offer column after ``status`` in an index (…, key, id)."""
WALKED_ELSEWHERE = frozenset({"price", "provider", "gpu_count", "price_per_pflop_hour"})
"""Sorts walked along an index other than the price per GPU-hour's: the price filter is kept
off that index on SQLite (see :func:`service.query.filters.apply_filters`), for the offers
with a key and for those without (read by id along the same index: with the price range
taken instead, SQLite sorted every offer under the cap by id, 0.55 s)."""
BY_VALUE = frozenset({"gpu_count"})
"""Keys with few distinct values, read one value at a time (:func:`_by_value`): on SQLite
the exact decimal is text, so its index order is not the numeric order."""
BY_GPU = frozenset({"price_per_gpu_hour", "price_per_pflop_hour"})
"""Keys with a per-GPU index (gpu_slug, status, key, id): a filter on one live GPU model
walks it (:class:`Walk`)."""
MERGED_PER_GPU = frozenset({"price_per_pflop_hour"})
"""Keys whose listing filtered to several GPU models merges one walk per model
(:func:`_merged_per_gpu`)."""
MERGED_MODELS = 8
"""Without a GPU filter, the most models with a key that a :data:`MERGED_PER_GPU` page is
read one model at a time for (:func:`_merged`): past that, one walk of the whole index."""
INTEGER_KEYS = frozenset({"price_per_gpu_hour", "price", "price_per_pflop_hour"})
"""Keys that are exact integers (USD x 10^10, :func:`service.query.sql.gpu_hour_key`,
:func:`service.query.sql.hourly_key`, :func:`service.query.sql.pflop_hour_key`), current
and pinned alike: a cursor's value is one."""
NEVER_NULL = frozenset({"provider", "gpu_count"})
"""Sort keys of NOT NULL columns: no second statement for offers without a key."""


PREFIX = 4000
"""Index entries a walk reads first (:class:`Walk`)."""
WIDER = 4
"""If those hold too few matches, a walk of a :data:`WIDENED` sort is tried once more over
this many times as many entries before the filters go first (:class:`Walk`)."""
WIDENED = frozenset({"price_per_pflop_hour"})
"""Sorts whose walk may be tried twice (when the first range held a :data:`WIDER`-th of
the page): GPU-model filters (``min_gpu_memory_gb``, ``export_destination``) remove whole
runs of the USD per PFLOPS-hour index (its dearest entries are all small GPUs). For
the other sorts the second walk cost more in the listing benchmark's selective filters
(10-37 ms CPU each for ``-price``) than it saved."""


@dataclass(frozen=True)
class Walk:
    """The first ``limit`` offers with a key (``ORDER BY key, id`` or ``key DESC, id``) of a
    current listing whose key is an offer column indexed (status, key, id): read along that
    index while the filters keep enough of it, else filtered first and sorted.

    An index walk costs what it reads: ``limit`` rows for a filter that keeps most offers,
    the whole index for one that keeps none (``bare_metal``, a high ``min_gpu_memory_gb``,
    a rare certification...). So the walk is bounded: the key K of the index's
    :data:`PREFIX`-th active offer from the start (or the cursor) is read from the index
    alone, and the walk reads the offers with keys up to K. Every offer past K comes after
    every offer of that range in the listing's order, so if the range holds ``limit``
    matches they are the page. If not, and the range held a :data:`WIDER`-th of the page at
    least (an ascending walk: a descending one, :func:`_descending`, reports only that it
    came short), a :data:`WIDENED` sort's walk is tried once more to the entry :data:`WIDER`
    times further (the matches are there, only sparser than the page needs). Otherwise the
    filters are selective and the page is computed the other way round: the filters first
    (their own indexes, or one scan), and the matches sorted. Same rows, same order; the
    bound only decides the cost. (The deeper walk was tried whatever the first one held
    until 2026-12-05: for a filter that keeps none of the first entries, ``min_gpu_memory_gb``
    and the dearest USD per PFLOPS-hour, all small GPUs, it cost 8-24 ms before the same
    scan, and set the listing mix's p99: docs/benchmarks.md, "The source filter".)

    The bound is also a range on the sort's index, which keeps SQLite's planner (no
    statistics) on the walk where a filter's own range (``max_price_per_gpu_hour`` on the
    price index) would otherwise look as good, and then sorts everything it keeps."""

    sort: str
    descending: bool
    limit: int
    after: After | None
    gpus: Sequence[str] | None
    ceiling: int | None = None
    """The largest key ``max_price_per_gpu_hour`` leaves (:func:`ceiling`): where a
    descending walk starts, and the walk's upper end."""

    def rows(
        self, conn: Connection, pages: Pages | Select[Any], filtered_first: Any
    ) -> list[dict[str, Any]]:
        """The page: the rows of ``pages.keyed`` (or of ``pages``, a query alone)."""
        if not isinstance(pages, Pages):
            pages = Pages(pages)
        dialect = conn.dialect.name
        key = sort_expression(self.sort, dialect)
        by_gpu = self.sort in BY_GPU and self.gpus is not None and len(self.gpus) == 1
        if self.ceiling is not None:  # implied by the filters: where a descending walk starts
            pages = pages.capped(key, self.ceiling)
        keyed = pages.keyed
        depths = (PREFIX, PREFIX * WIDER) if self.sort in WIDENED else (PREFIX,)
        for depth in depths:
            bound = self.bound(conn, key, by_gpu, depth)  # None: fewer offers left
            if self.descending:
                rows = _descending(conn, pages, key, self.limit, bound, self.after, self.sort)
            else:
                walk = keyed if bound is None else keyed.where(key <= bound)
                rows = _dicts(conn.execute(walk.limit(self.limit)))
            if rows is not None and (len(rows) >= self.limit or bound is None):
                return rows
            if rows is None or len(rows) * WIDER < self.limit:
                break  # too selective for a deeper walk: the filters go first
        ids = filtered_first(self.limit)
        if not ids:
            return []
        return _dicts(conn.execute(_by_ids(keyed, key, ids, self.descending, conn.dialect.name)))

    def bound(self, conn: Connection, key: Any, by_gpu: bool, depth: int) -> Any:
        """The key ``depth`` active offers along the index from where the page starts
        (None: the index ends before), read from the index alone."""
        stmt = select(key).where(OFFER.c.status == OfferStatus.active.value, key.is_not(None))
        if by_gpu:
            assert self.gpus is not None
            stmt = stmt.where(OFFER.c.gpu_slug == self.gpus[0])
        after = self.after
        if after is not None and after.value is not None:
            start = after.value
            if self.sort in INTEGER_KEYS:
                start = int(Decimal(str(start)))
            stmt = stmt.where(key <= start if self.descending else key >= start)
        if self.ceiling is not None:
            stmt = stmt.where(key <= self.ceiling)
        order = key.desc() if self.descending else key
        return conn.execute(stmt.order_by(order).offset(depth).limit(1)).scalar()


def _by_value(
    conn: Connection,
    keyed: Select[Any],
    limit: int,
    descending: bool,
    after: After | None,
    counts: tuple[Decimal | None, Decimal | None] = (None, None),
) -> list[dict[str, Any]] | None:
    """The first ``limit`` rows of ``keyed`` (``ORDER BY gpu_count, id``, or descending)
    through ``ix_offer_status_gpu_count`` (status, gpu_count, id): the distinct counts of
    active offers (one index seek each), in numeric order, then each count's offers by id
    (an index range, in id order) until the page is full. Same rows, same order.

    Bounded as a :class:`Walk` is: the counts' offers are read :data:`PREFIX` index entries
    at most in all (the id of the last one allowed bounds each range). None when they run
    out before the page is full: the filters are selective, and the caller reads their
    matches first (a filter that kept none of them read every offer of every count, four
    ranges of ~40,000 offers with their correlated tests: 127 ms in the listing benchmark).

    ``counts``: ``min_gpus`` and ``max_gpus``, whose counts outside them are not walked
    (the filters would keep none of their offers; compared as the statements compare them,
    floats on SQLite). Their offers used up the budget before: ``sort=gpu_count
    min_gpus=2`` read the 4,000 first offers of one GPU, gave up and read the filters first
    (44-59 ms at 210,000 offers)."""
    column = OFFER.c.gpu_count
    active = OFFER.c.status == OfferStatus.active.value
    values: list[Decimal] = []
    while True:
        above = [column > values[-1]] if values else []
        value = conn.execute(select(func.min(column)).where(active, *above)).scalar()
        if value is None:
            break
        values.append(value)
    values.sort(reverse=descending)
    as_compared: Any = float if conn.dialect.name == "sqlite" else Decimal
    least, most = counts
    if least is not None:
        values = [v for v in values if as_compared(v) >= as_compared(least)]
    if most is not None:
        values = [v for v in values if as_compared(v) <= as_compared(most)]
    mark = None if after is None else after.value  # a float on SQLite (CAST(... AS FLOAT))
    number: Any = float if isinstance(mark, float) else Decimal
    if mark is not None:  # skip the counts before the cursor
        values = [v for v in values if (number(v) <= mark if descending else number(v) >= mark)]
    rows: list[dict[str, Any]] = []
    budget = PREFIX  # index entries left to read
    for value in values:
        wanted = limit - len(rows)
        if wanted <= 0:
            break
        if budget <= 0:
            return None
        entries = select(OFFER.c.id).where(active, column == value)
        if after is not None and mark is not None and number(value) == mark:
            entries = entries.where(OFFER.c.id > after.offer_id)
        stop = entries.order_by(OFFER.c.id).offset(budget - 1).limit(1)
        bound = conn.execute(stop).scalar()  # None: the count's entries fit in the budget
        same = keyed.where(column == value).order_by(None).order_by(OFFER.c.id)
        if bound is not None:
            same = same.where(OFFER.c.id <= bound)
        got = _dicts(conn.execute(same.limit(wanted)))
        rows += got
        if len(got) >= wanted:
            break
        if bound is not None:
            return None
        budget -= conn.execute(select(func.count()).select_from(entries.subquery())).scalar() or 0
    return rows


@dataclass(frozen=True)
class Pages:
    """The reads of one listing's page along its sort's index: ``keyed``, the offers with a
    key, filtered, after the cursor, in order; ``keys``, the same offers' ids and keys
    alone (no observation read); ``at_key``, the offers with a key, filtered, without the
    cursor's terms (read at one key: with them, SQLite bounded the index by the cursor's
    range instead of the key, 18 ms for 100 rows against 0.3)."""

    keyed: Select[Any]
    keys: Select[Any] | None = None
    at_key: Select[Any] | None = None

    def capped(self, key: Any, ceiling: Any) -> Pages:
        """The same reads below ``ceiling`` (``max_price_per_gpu_hour``'s largest key)."""
        keys = None if self.keys is None else self.keys.where(key <= ceiling)
        at_key = None if self.at_key is None else self.at_key.where(key <= ceiling)
        return Pages(self.keyed.where(key <= ceiling), keys, at_key)


def at_key(filters: OfferFilters, shared: dict[str, Any]) -> Select[Any]:
    """:attr:`Pages.at_key` of a current listing (``shared``: :func:`offers_query`'s
    keywords)."""
    return offers_query(filters, **{**shared, "after": None}, nulls=False)


def _at(pages: Pages, key: Any, value: Any, after: After | None, sort: str) -> Select[Any]:
    """The offers of ``pages`` whose key is ``value``, past the cursor, by id."""
    if pages.at_key is None:
        stmt = pages.keyed.where(key == value)
    else:
        stmt = pages.at_key.where(key == value)
        mark = None if after is None else after.value
        if mark is not None and sort in INTEGER_KEYS:
            mark = int(Decimal(str(mark)))
        if mark is not None and mark == value:
            stmt = stmt.where(OFFER.c.id > after.offer_id)  # type: ignore[union-attr]
    # by key (all equal) then id: the index's order
    return stmt.order_by(None).order_by(key, OFFER.c.id)


def _descending(
    conn: Connection,
    pages: Pages | Select[Any],
    key: Any,
    limit: int,
    bound: Any = None,
    after: After | None = None,
    sort: str = "",
) -> list[dict[str, Any]] | None:
    """The first ``limit`` rows of ``keyed`` (offers with a key, ``ORDER BY key DESC, id``)
    read along an ascending (…, key, id) index: the ``limit`` largest keys (the index walked
    backwards, ties in any order), from ``keys`` (the same offers' ids and keys, without
    their observation) when given; if there are fewer, those offers by id, sorted; else
    with K the last of them, the rows above K (those of the walk: every match above K
    comes before K's) by id, sorted, then those at K by id (the index range of K,
    forwards). Same rows, same order.

    The rows above K are read by id, not as a second range with the filters: that range
    tested every filter again, and with a cursor its two terms kept SQLite from bounding
    it (18 ms for the second page of 100, unfiltered, against 0.3 ms by id).

    ``bound`` (see :class:`Walk`): the first walk reads keys down to it only; None is
    returned when fewer than ``limit`` rows have such keys."""
    if not isinstance(pages, Pages):
        pages = Pages(pages)
    keyed = pages.keyed
    walked = keyed if pages.keys is None else pages.keys
    walk = walked.with_only_columns(key, OFFER.c.id).order_by(None).order_by(key.desc())
    if bound is not None:
        walk = walk.where(key >= bound)
    largest = conn.execute(walk.limit(limit)).all()
    if len(largest) < limit and bound is not None:
        return None
    if len(largest) < limit:  # every row left: read them by id (one walk, however sparse)
        if not largest:
            return []
        return _dicts(
            conn.execute(_by_ids(keyed, key, [i for _, i in largest], True, conn.dialect.name))
        )
    bound = largest[-1][0]
    above = [offer_id for value, offer_id in largest if value != bound]
    rows = (
        _dicts(conn.execute(_by_ids(keyed, key, above, True, conn.dialect.name))) if above else []
    )
    at_bound = _at(pages, key, bound, after, sort)
    return rows + _dicts(conn.execute(at_bound.limit(limit - len(rows))))


def _by_ids(
    keyed: Select[Any], key: Any, ids: list[int], descending: bool, dialect: str
) -> Select[Any]:
    """The current read of ``keyed``'s columns for offers already chosen by ``keyed``, by
    id, in the listing's order: no filter left to tempt the planner off the primary key."""
    return (
        select(*keyed.selected_columns)
        .select_from(OFFER)
        .join(OBS, OBS.c.id == OFFER.c.observation_id)
        .where(among(OFFER.c.id, ids, dialect))
        .order_by(key.desc() if descending else key, OFFER.c.id)
    )


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
    stmt = stmt.where(among(mine.c.id, ids, conn.dialect.name))
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


def live_gpu_slugs(conn: Connection, gpu: str) -> list[str]:
    """The slugs a current ``gpu`` filter (a slug or a family) can match: those with offers.

    Read from :func:`service.query.facts.catalog_facts` of the same snapshot, so an equality
    (one live slug, the common case) can replace ``slug = x OR slug IN (family)`` and walk the
    per-GPU index.
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
    # closed also when the reader stops early (an export whose client went away)
    with conn.execution_options(stream_results=True, yield_per=batch).execute(stmt) as result:
        for part in result.mappings().partitions(batch):
            yield finished_rows(conn, [dict(r) for r in part], filters, compliance)


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
    with conn.execution_options(stream_results=True, yield_per=batch).execute(stmt) as streamed:
        yield from streamed.partitions(batch)


def get_offer(conn: Connection, offer_id: int) -> dict[str, Any]:
    if not 1 <= offer_id <= MAX_ROW_ID:  # no row has it (PostgreSQL: out of range)
        raise NotFound(f"offer {offer_id} does not exist")
    stmt = (
        select(*OFFER_COLUMNS, OFFER.c.withdrawn_at)
        .join(OBS, OBS.c.id == OFFER.c.observation_id)
        .where(OFFER.c.id == offer_id)
    )
    row = conn.execute(stmt).mappings().first()
    if row is None:
        raise NotFound(f"offer {offer_id} does not exist")
    return finished_rows(conn, [dict(row)])[0]
