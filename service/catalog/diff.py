"""The diff of one ingest: the source's current offers read from the database, compared
with the crawl (new, changed, reopened, touched, withdrawn), and the plausibility check
that decides whether it may be applied.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property, partial
from itertools import repeat
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, select

from schema.crawl import CrawlRun
from schema.enums import CrawlStatus
from schema.records import OfferRecord
from schema.types import decimal_to_text
from service.catalog.columns import ACTIVE, KEY_COLUMNS, KEY_SEP, Key
from service.catalog.resolver import Resolver
from service.catalog.state import DIGEST_BYTES, RECORD_SEP, CurrentState, folded, same_digest
from service.core.config import Settings

RUN = CrawlRun.__table__  # type: ignore[attr-defined]


@dataclass(slots=True)
class Current:
    provider: str
    id: int
    amount: Decimal
    currency: str
    status: str
    observation_id: int
    fingerprint: str | None
    line: str | None = None
    """The digest of the line last seen with this state (see service.catalog.lines)."""

    @classmethod
    def parse(cls, key: Key, state: str) -> Current:
        """An offer's current state from its :func:`load_current` text."""
        amount, currency, digest, status, offer_id, observation_id, line = state.split(STATE_SEP)
        return cls(
            key.partition(KEY_SEP)[0],
            int(offer_id),
            Decimal(amount),
            currency,
            status,
            int(observation_id),
            digest or None,
            line or None,
        )


STATE_SEP = "\x1f"


@dataclass
class Diff:
    new: list[tuple[Key, OfferRecord, tuple[Any, ...], str]] = field(default_factory=list)
    """The added offers with their identity keys, in the crawl's order (see
    :attr:`in_key_order`)."""
    providers: set[str] = field(default_factory=set)
    """The providers of the added offers."""
    changed: list[tuple[Current, OfferRecord, tuple[Any, ...], str]] = field(default_factory=list)
    reopened: list[tuple[Current, OfferRecord, tuple[Any, ...], str]] = field(default_factory=list)
    touched: list[tuple[Current, tuple[Any, ...], str]] = field(default_factory=list)
    withdrawn: list[Current] = field(default_factory=list)
    lines: list[tuple[int, bytes | None]] = field(default_factory=list)
    """(offer id, line digest or None): the line digests to store (see
    service.catalog.lines), written even when the diff is otherwise empty."""
    new_lines: dict[Key, bytes] = field(default_factory=dict)
    """The line digests of added offers, by key: stored once their ids are known
    (:meth:`added_lines`)."""

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.reopened or self.touched or self.withdrawn)

    @cached_property
    def in_key_order(self) -> list[tuple[Key, OfferRecord, tuple[Any, ...], str]]:
        """:attr:`new` in identity key order, the order of their offer ids (keys are
        unique, so the order is total)."""
        return sorted(self.new, key=key_of)

    def added_lines(self, first_id: int) -> list[tuple[int, bytes]]:
        """(offer id, line digest) of the added offers in :attr:`new_lines`, the first of
        :attr:`in_key_order` having been written with id ``first_id``."""
        lines = self.new_lines
        if not lines:
            return []
        return [
            (offer_id, lines[key])
            for offer_id, (key, *_) in enumerate(self.in_key_order, first_id)
            if key in lines
        ]

    @cached_property
    def added(self) -> list[tuple[OfferRecord, tuple[Any, ...], str]]:
        """The added offers (record, attributes, fingerprint), in key order; built only
        when read (by the outbox, when some subscription is live)."""
        return [(record, attributes, digest) for _, record, attributes, digest in self.in_key_order]


def diff_offers(
    records: list[OfferRecord],
    keys: list[Key],
    rows: list[int],
    current: CurrentState,
    resolver: Resolver,
    lines: list[bytes | None] | None = None,
    placed: Collection[str] = (),
) -> Diff:
    """Compare a batch of the crawl with the source's current offers; writes nothing.

    ``rows``: each record's row in ``current`` (-1: a new offer), found by the validator.
    The hot path is an unchanged offer: the digest of its expected state text (canonical
    amount, currency, attributes fingerprint, active) is compared with the stored one, and
    nothing else is built for it. The others (changed, reopened, updated in place) have
    their stored state read back from the database by offer id, once for the batch.
    ``lines``: each record's line digest (None: no line). It is stored for the offer when
    the record has no unmapped name and lies outside the regions ``placed`` (see
    service.catalog.lines): the offer then holds what the line gives, whether it was
    unchanged, or added, changed, reopened or updated by the record. Otherwise an offer
    whose state changes loses its stored digest."""
    diff = Diff()
    added, new_provider, lined = diff.new, diff.providers.add, diff.lines.append
    new_lines = diff.new_lines
    attributes_of, digests, digest_of = resolver.attributes, resolver.digests, resolver.digest
    line_row, stored_same = current.line_row, current.same
    ids, amount_text = current.ids, decimal_to_text
    others: list[tuple[int, OfferRecord, tuple[Any, ...], str, bytes | None]] = []
    for record, key, row, line in zip(
        records, keys, rows, lines or repeat(None, len(keys)), strict=True
    ):
        fields = record.__dict__
        missed = resolver.missed
        attributes = attributes_of(fields)
        digest = digests.get(attributes) or digest_of(attributes)  # memoized fingerprint
        if line is not None and (resolver.missed != missed or fields["region"] in placed):
            line = None  # what the line gives is not all the offer holds
        if row < 0:
            added.append((key, record, attributes, digest))
            new_provider(fields["provider"])
            if line is not None:
                new_lines[key] = line
            continue
        at = row * DIGEST_BYTES
        if stored_same[at : at + DIGEST_BYTES] == same_digest(
            f"{amount_text(fields['amount'])}{STATE_SEP}{fields['currency']}{STATE_SEP}"
            f"{digest}{STATE_SEP}{ACTIVE}"
        ):  # unchanged (see CurrentState.unchanged): the common case of a re-crawl
            if line is not None and line_row(line) != row:  # not the line last seen with it
                lined((ids[row], line))
            continue
        others.append((row, record, attributes, digest, line))
    if not others:
        return diff
    stored = current.read([ids[row] for row, *_ in others])
    for row, record, attributes, digest, line in others:
        fields = record.__dict__
        old = stored[ids[row]]
        if line is not None:
            lined((old.id, line))  # the state written is what the line gives
        elif old.line is not None:  # the line that gave the old state gives it no more
            lined((old.id, None))
        if old.status != ACTIVE:
            diff.reopened.append((old, record, attributes, digest))
        elif old.amount != fields["amount"] or old.currency != fields["currency"]:
            diff.changed.append((old, record, attributes, digest))
        elif old.fingerprint != digest:
            diff.touched.append((old, attributes, digest))
    return diff


def withdrawn(current: CurrentState, protected: Collection[Key]) -> list[Current]:
    """The active offers a complete crawl omitted (none of its records marked them seen),
    except ``protected`` ones, in offer id order, with their stored state."""
    ids = current.ids
    omitted = [ids[row] for row in current.unmarked(protected)]
    if not omitted:
        return []
    stored = current.read(omitted)
    return sorted((o for o in stored.values() if o.status == ACTIVE), key=_offer_id)


key_of: Callable[[tuple[Key, Any, Any, Any]], Key] = itemgetter(0)


def _offer_id(offer: Current) -> int:
    return offer.id


def _state_sql(dialect: str, lines: bool) -> tuple[str, str]:
    """The text of one offer (key, RECORD_SEP, state), and the tables it is read from."""
    tables = "offer LEFT JOIN offer_line ON offer_id = id" if lines else "offer"
    if dialect == "postgresql":
        key = " || chr(31) || ".join(KEY_COLUMNS)
        state = " || chr(31) || ".join(
            (
                "trim_scale(amount)::text",
                "currency",
                "coalesce(fingerprint, '')",
                "status",
                "id::text",
                "observation_id::text",
                "coalesce(upper(encode(digest, 'hex')), '')" if lines else "''",
            )
        )
        return f"{key} || chr(30) || {state}", tables
    # one printf per offer: faster than chained || in SQLite (NULL -> '')
    state_parts = (
        "amount",
        "currency",
        "fingerprint",
        "status",
        "id",
        "observation_id",
        "hex(digest)" if lines else "''",
    )
    template = (
        KEY_SEP.join(["%s"] * len(KEY_COLUMNS))
        + RECORD_SEP
        + STATE_SEP.join(["%s"] * len(state_parts))
    )
    return f"printf('{template}', {', '.join((*KEY_COLUMNS, *state_parts))})", tables


def _offer_sql(dialect: str, lines: bool) -> tuple[str, str]:
    """The :data:`~service.catalog.state.FIELDS` texts of one offer for
    :meth:`~service.catalog.state.CurrentState.add`, joined by RECORD_SEP, and the tables
    they are read from."""
    tables = "offer LEFT JOIN offer_line ON offer_id = id" if lines else "offer"
    if dialect == "postgresql":
        same = ("trim_scale(amount)::text", "currency", "coalesce(fingerprint, '')", "status")
        line = "coalesce(upper(encode(digest, 'hex')), '')" if lines else "''"
        fields = (
            "provider",
            " || chr(31) || ".join(KEY_COLUMNS),
            " || chr(31) || ".join(same),
            "id::text",
            "status",
            line,
        )
        return " || chr(30) || ".join(fields), tables
    # one printf per offer: faster than chained || in SQLite (NULL -> '')
    template = RECORD_SEP.join(
        [
            "%s",
            KEY_SEP.join(["%s"] * len(KEY_COLUMNS)),
            STATE_SEP.join(["%s"] * 4),
            "%s",
            "%s",
            "%s",
        ]
    )
    values = (
        "provider",
        *KEY_COLUMNS,
        "amount",
        "currency",
        "fingerprint",
        "status",
        "id",
        "status",
        "hex(digest)" if lines else "''",
    )
    return f"printf('{template}', {', '.join(values)})", tables


def load_current(conn: Connection, source: str, *, lines: bool = False) -> CurrentState:
    """The source's offers, compactly (:class:`~service.catalog.state.CurrentState`): each
    one's key digest, the digest of its compared state (canonical amount, currency,
    fingerprint, status), offer id and status; with ``lines``, the line digests of the
    active offers (``offer_line``) and their amounts, for the lines a reader may skip
    (service.catalog.lines).

    The hot path of every re-crawl (hundreds of thousands of offers). The database
    assembles each offer's texts into one (no per-column conversion by the driver), read
    :data:`STATE_CHUNK` offers at a time (:func:`_state_chunks`). Each chunk is split and
    folded into the arrays on a thread of its own while this one reads the next
    (:func:`~service.catalog.state.folded`): the read is the database's work, without the
    GIL, and the fold is the interpreter's, so the two take about as long as the longer
    of them instead of their sum. What the read holds beyond the compact state is three
    chunks at most (about 3 MB each). The crawl's validation proceeds on the other core
    meanwhile (see :func:`service.catalog.ingest.ingest`). Keys and states never hold the
    separators: validated text holds no control characters."""
    dialect = conn.dialect.name
    driver: Any = conn.connection.driver_connection
    count = "SELECT count(*) FROM offer WHERE source = " + (
        "%s" if dialect == "postgresql" else "?"
    )
    counter = driver.cursor()
    try:  # the tables sized at once (an index-only count)
        counter.execute(count, (source,))
        expected = counter.fetchone()[0]
    finally:
        counter.close()
    current = CurrentState(partial(read_current, conn), expected)
    add = current.add
    folded(_state_chunks(driver, dialect, source, lines), lambda text: add(text, lines=lines))
    return current


def _state_chunks(driver: Any, dialect: str, source: str, lines: bool) -> Iterator[str]:
    """The offers of ``source`` as :func:`_offer_sql` gives them, each chunk of up to
    :data:`STATE_CHUNK` offers as one text (joined by RECORD_SEP).

    PostgreSQL: a server-side cursor, fetched a chunk at a time. SQLite: each chunk is one
    row, assembled by the database in one step (``group_concat`` over a range of the unique
    key, ending where a walk of the index finds the chunk's last key): the driver releases
    the GIL around each step and must win it back after, so a row per offer would wait
    for the thread folding the chunks once per offer (see :func:`read_current`)."""
    one, tables = _offer_sql(dialect, lines)
    if dialect == "postgresql":
        cursor = driver.cursor(name="gpuatlas_current_state")
        try:
            cursor.execute(f"SELECT {one} FROM {tables} WHERE source = %s", (source,))
            first = itemgetter(0)
            while rows := cursor.fetchmany(STATE_CHUNK):
                yield RECORD_SEP.join(map(first, rows))
        finally:
            cursor.close()
        return
    key = ", ".join(KEY_COLUMNS)
    marks = ", ".join("?" * len(KEY_COLUMNS))
    after, until = f" AND ({key}) > ({marks})", f" AND ({key}) <= ({marks})"
    # the key ending a chunk: a walk of the unique index alone
    end = f"SELECT {key} FROM offer WHERE source = ?{{}} ORDER BY {key} LIMIT 1 OFFSET {{}}"
    chunk = f"SELECT group_concat({one}, char({ord(RECORD_SEP)})) FROM {tables} WHERE source = ?"
    cursor = driver.cursor()
    try:
        start: tuple[str, ...] = ()
        while True:
            lower = after if start else ""
            cursor.execute(end.format(lower, STATE_CHUNK - 1), (source, *start))
            last = cursor.fetchone()
            upper = until if last is not None else ""
            cursor.execute(chunk + lower + upper, (source, *start, *(last or ())))
            text = cursor.fetchone()[0]
            if text:
                yield text
            if last is None:
                return
            start = tuple(last)
    finally:
        cursor.close()


def read_current(conn: Connection, ids: list[int]) -> dict[int, Current]:
    """The stored state of the offers ``ids`` (offer id -> :class:`Current`, with its line
    digest), read in chunks of :data:`READ_CHUNK` ids.

    SQLite: each chunk comes back as one row (its offers' texts joined by
    :data:`GROUP_SEP`), built in one step of the database. The driver releases the GIL
    around every step and must win it back after, so a row a step waited once per offer
    for the validation thread (up to its switch interval): 24 ms for 250 offers while it
    ran, 1-2 ms after it ended; one row a chunk waits once (docs/benchmarks.md, "One
    row a chunk")."""
    dialect = conn.dialect.name
    one, tables = _state_sql(dialect, True)
    found: dict[int, Current] = {}
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        for start in range(0, len(ids), READ_CHUNK):
            chunk = ids[start : start + READ_CHUNK]
            if dialect == "postgresql":
                cursor.execute(f"SELECT {one} FROM {tables} WHERE id = ANY(%s)", (chunk,))
                texts = [text_ for (text_,) in cursor.fetchall()]
            else:  # the chunk as one row, assembled in one step (see the docstring)
                markers = ", ".join("?" * len(chunk))
                cursor.execute(
                    f"SELECT group_concat({one}, char({ord(GROUP_SEP)})) FROM {tables} "
                    f"WHERE id IN ({markers})",
                    chunk,
                )
                joined = cursor.fetchone()[0]
                texts = joined.split(GROUP_SEP) if joined else []
            for text_ in texts:
                key, _, state = text_.partition(RECORD_SEP)
                old = Current.parse(key, state)
                found[old.id] = old
        return found
    finally:
        cursor.close()


READ_CHUNK = 900
"""Offer ids per statement of :func:`read_current` (SQLite's default limit of bound
parameters was 999 before 3.32)."""
GROUP_SEP = "\x1d"
"""Between offers in :func:`read_current`'s one row of a chunk (SQLite)."""
STATE_CHUNK = 10_000
"""Offers per chunk of :func:`load_current` (about 3 MB of text; at most three chunks are
held at once)."""


def implausible(
    conn: Connection,
    settings: Settings,
    source: str,
    offers: int,
    out_of_band: str | None,
) -> str | None:
    """Why this crawl must not be applied, or None: ``offers`` valid offers, and the
    reason of the first changed price outside the plausibility band (see
    :func:`price_out_of_band`), if any. Decided before anything becomes visible."""
    if not offers:
        return "empty result: no valid offers"
    last_good = conn.execute(
        select(RUN.c.seen)
        .where(RUN.c.source == source, RUN.c.status == CrawlStatus.ok.value)
        .order_by(RUN.c.id.desc())
        .limit(1)
    ).scalar()
    last_good = int(last_good or 0)
    enough_history = last_good >= max(1, settings.min_offers_for_ratio_check)
    if enough_history and Decimal(offers) < settings.min_offer_ratio * last_good:
        share = Decimal(offers * 100) / last_good
        return (
            f"offer count dropped from {last_good} to {offers} "
            f"({share:.0f} % < {settings.min_offer_ratio * 100:.0f} %)"
        )
    return out_of_band


def price_out_of_band(old: Current, record: OfferRecord, factor: Decimal) -> str | None:
    """Why a changed price is implausible (it moved by more than ``factor`` either way in
    its own currency), or None."""
    if old.currency != record.currency:
        return None
    ratio = record.amount / old.amount
    if ratio > factor or ratio < 1 / factor:
        return (
            f"price of {record.sku} in {record.region} ({record.price_kind}) moved "
            f"from {old.amount} to {record.amount} {record.currency}: ×{ratio:.3g} "
            f"exceeds the ×{factor} plausibility band"
        )[:200]
    return None
