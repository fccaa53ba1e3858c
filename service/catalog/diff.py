"""The diff of one ingest: the source's current offers read from the database, compared
with the crawl (new, changed, reopened, touched, withdrawn), and the plausibility check
that decides whether it may be applied.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from itertools import repeat
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, select

from schema.crawl import CrawlRun
from schema.enums import CrawlStatus
from schema.records import OfferRecord
from schema.types import decimal_to_text
from service.catalog.columns import ACTIVE, KEY_SEP, Key
from service.catalog.resolver import Resolver
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

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.reopened or self.touched or self.withdrawn)

    @cached_property
    def in_key_order(self) -> list[tuple[Key, OfferRecord, tuple[Any, ...], str]]:
        """:attr:`new` in identity key order, the order of their offer ids (keys are
        unique, so the order is total)."""
        return sorted(self.new, key=key_of)

    @cached_property
    def added(self) -> list[tuple[OfferRecord, tuple[Any, ...], str]]:
        """The added offers (record, attributes, fingerprint), in key order; built only
        when read (by the outbox, when some subscription is live)."""
        return [(record, attributes, digest) for _, record, attributes, digest in self.in_key_order]


def diff_offers(
    records: list[OfferRecord],
    keys: list[Key],
    current: dict[Key, str],
    resolver: Resolver,
    protected: set[Key] | None,
    lines: list[bytes | None] | None = None,
    placed: Collection[str] = (),
) -> Diff:
    """Compare the crawl with the source's current offers; pure, writes nothing.

    The hot path is an unchanged offer: its expected state text (canonical amount,
    currency, attributes fingerprint, active) is compared with the stored one, and
    nothing else is built for it. ``lines``: each record's line digest (None: no line),
    stored for an unchanged offer with no unmapped name outside the regions ``placed``
    (see service.catalog.lines); an offer whose state changes loses its stored one."""
    diff = Diff()
    added, new_provider, lined = diff.new, diff.providers.add, diff.lines.append
    attributes_of, digests, digest_of = resolver.attributes, resolver.digests, resolver.digest
    state_of, amount_text = current.get, decimal_to_text
    active_suffix = f"{STATE_SEP}{ACTIVE}{STATE_SEP}"
    for record, key, line in zip(records, keys, lines or repeat(None, len(keys)), strict=True):
        fields = record.__dict__
        missed = resolver.missed
        attributes = attributes_of(fields)
        digest = digests.get(attributes) or digest_of(attributes)  # memoized fingerprint
        state = state_of(key)
        if state is None:
            added.append((key, record, attributes, digest))
            new_provider(fields["provider"])
            continue
        if state.startswith(
            f"{amount_text(fields['amount'])}{STATE_SEP}{fields['currency']}{STATE_SEP}"
            f"{digest}{active_suffix}"
        ):  # unchanged: the common case of a re-crawl
            if (
                line is not None
                and not state.endswith(line.hex().upper())
                and resolver.missed == missed
                and fields["region"] not in placed
            ):
                lined((int(state.split(STATE_SEP)[4]), line))
            continue
        old = Current.parse(key, state)
        if old.line is not None:  # the line that gave the old state gives it no more
            lined((old.id, None))
        if old.status != ACTIVE:
            diff.reopened.append((old, record, attributes, digest))
        elif old.amount != fields["amount"] or old.currency != fields["currency"]:
            diff.changed.append((old, record, attributes, digest))
        elif old.fingerprint != digest:
            diff.touched.append((old, attributes, digest))
    if protected is not None:  # a complete crawl: what it omits is withdrawn
        omitted = current.keys() - set(keys) - protected
        withdrawn = [
            Current.parse(key, current[key])
            for key in omitted
            if active_suffix in current[key]  # only the status field can hold "active"
        ]
        diff.withdrawn = sorted((o for o in withdrawn if o.status == ACTIVE), key=_offer_id)
    return diff


key_of: Callable[[tuple[Key, Any, Any, Any]], Key] = itemgetter(0)


def _offer_id(offer: Current) -> int:
    return offer.id


def load_current(conn: Connection, source: str, *, lines: bool = True) -> dict[Key, str]:
    """The source's offers: identity key -> state text (canonical amount, currency,
    fingerprint, status, offer id, observation id, line digest (``offer_line``) in
    upper-case hex or empty; always empty without ``lines``).

    The hot path of every re-crawl (hundreds of thousands of offers). The database
    assembles each offer's key and state and aggregates them into one text per window of
    :data:`STATE_WINDOW` ids, which Python splits in C: no row objects, no per-row
    conversion, and the one long step runs without the GIL, so the crawl's validation
    proceeds on the other core meanwhile (see :func:`service.catalog.ingest.ingest`). Keys
    and states never hold the separators: validated text holds no control characters."""
    key_parts = ("provider", "sku", "region", "price_kind", "unit")
    if conn.dialect.name == "postgresql":
        marker = "%s"
        key = " || chr(31) || ".join(key_parts)
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
        aggregate = f"string_agg({key} || chr(30) || {state}, chr(30))"
    else:  # one printf per offer: faster than chained || in SQLite (NULL -> '')
        marker = "?"
        state_parts = (
            "amount",
            "currency",
            "fingerprint",
            "status",
            "id",
            "observation_id",
            "hex(digest)" if lines else "''",
        )
        template = KEY_SEP.join(["%s"] * 5) + RECORD_SEP + STATE_SEP.join(["%s"] * 7)
        aggregate = (
            f"group_concat(printf('{template}', {', '.join((*key_parts, *state_parts))}), char(30))"
        )
    tables = "offer LEFT JOIN offer_line ON offer_id = id" if lines else "offer"
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    current: dict[Key, str] = {}
    try:
        cursor.execute("SELECT max(id) FROM offer")
        last = cursor.fetchone()[0] or 0
        for low in range(1, last + 1, STATE_WINDOW):
            cursor.execute(
                f"SELECT {aggregate} FROM {tables} "
                f"WHERE source = {marker} AND id >= {marker} AND id < {marker}",
                (source, low, low + STATE_WINDOW),
            )
            text_ = cursor.fetchone()[0]
            if text_:
                parts = text_.split(RECORD_SEP)
                current.update(zip(parts[::2], parts[1::2], strict=True))
        return current
    finally:
        cursor.close()


RECORD_SEP = "\x1e"
"""Between an offer's key and state, and between offers, in :func:`load_current`."""
STATE_WINDOW = 1_000_000
"""Offer ids per aggregated text of :func:`load_current` (a few hundred MB at most:
far below SQLite's and PostgreSQL's 1 GB limit on one value)."""


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
