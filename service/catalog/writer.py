"""The writes of one ingest: a new catalog version, its offer and observation rows (in
bulk, per database), and the providers and instance types first seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any

from sqlalchemy import Connection, func, insert, literal_column, select, update
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect

from schema.catalog import GpuModel, Provider
from schema.enums import OfferStatus, PricePer, UnmappedKind
from schema.prices import (
    USD,
    CatalogVersion,
    Offer,
    OfferLine,
    PriceObservation,
    pflop_hour_key,
    pflop_hour_key_scaled_sql,
    sort_key_e10,
    tflops_scaled,
)
from schema.records import OfferRecord
from service.catalog.bulk import (
    bulk_binder,
    bulk_insert,
    bulk_update,
    indexes_deferred,
    indexes_worth_rebuilding,
    sqlite_literal,
    staged,
)
from service.catalog.columns import (
    ACTIVE,
    ATTRIBUTES,
    GPU_SLUG,
    KEY_COLUMNS,
    KEY_SEP,
    OBS_COLUMNS,
    OFFER_COLUMNS,
    REPRICED_COLUMNS,
    REPRICED_ONLY_COLUMNS,
    TOUCHED_COLUMNS,
    Key,
)
from service.catalog.diff import Diff, key_of
from service.catalog.fx import FxTable
from service.catalog.lines import store_lines
from service.catalog.refcheck import Load, foreign_keys_checked_per_load
from service.catalog.resolver import Resolver, trim_memos
from service.catalog.results import CrawlResult
from service.catalog.runs import run_payload_ids
from service.catalog.sort_keys import refresh_pflop_keys
from service.core.units import gpu_hourly, instance_hourly, q

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]
LINE = OfferLine.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
PROVIDER = Provider.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
CHUNK = 5000

STAGED_MIN_ROWS = 1000
"""From this many new offers on, SQLite writes them through staging tables (see
:meth:`Writer._insert_new_staged`). PostgreSQL never does: it copies every new offer's
row while the rows are built (see :meth:`Writer._insert_new_rows`)."""
PER_LOAD_CHECKS_MIN_ROWS = 5000
"""From this many new offers on (a first crawl of a large source), PostgreSQL checks the
new rows' foreign keys once for the load instead of once per row, where the ingest's
role may (see :mod:`service.catalog.refcheck`). Not for repriced offers alone: their
observations refer to offers already stored, and checking those once costs as much as
the per-row checks (5 % of 200,000 offers repriced: 1.29 s against 1.21 s)."""
STAGED_PRICE_COLUMNS = ("pid", *OBS_COLUMNS[2:-1], "gpu_hour_usd_e10", "hourly_usd_e10")
"""A distinct price as staged: the observation's figures (``gpu_hour_usd`` as bound text,
which is also the offer's) and the offer's two sort keys."""

_Price = tuple[tuple[Any, ...], tuple[Any, ...]]
"""A price's derived figures as bound: the observation's and the offer's (see
:meth:`Writer._price`)."""


def _price_key(fields: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a price's derived figures depend on: amount, unit, price basis, GPU count and
    currency (``fields`` is a record's ``__dict__``)."""
    return (
        fields["amount"],
        fields["unit"],
        fields["price_per"],
        fields["gpu_count"],
        fields["currency"],
    )


class Writer:
    """The writes of one ingest, executed in bulk: one version, its rows, and nothing else."""

    def __init__(
        self,
        conn: Connection,
        fx: FxTable,
        run_id: int,
        now: datetime,
        version: int,
        crawl: CrawlResult,
        expected_new: Callable[[], int] | None = None,
    ) -> None:
        self.conn, self.fx, self.run_id, self.now, self.version = conn, fx, run_id, now, version
        self._expected_new = expected_new
        """How many offers the load will add at least, asked (once) when a batch first
        adds some: a load known to add a quarter of the table rebuilds its indexes from
        its first batch (see :meth:`_scale`)."""
        self._foreseen = 0
        payloads = crawl.payloads
        self._payload_ids = run_payload_ids(conn, run_id) if payloads else {}
        self.payload_id = self._payload(payloads[0].sha256) if len(payloads) == 1 else None
        """The ``crawl_run_payload`` row of the crawl's one payload."""
        self.record_payloads: Mapping[int, int | None] = {}
        """The batch being written: id(record) -> the ``crawl_run_payload`` row of the
        payload it was parsed from (a crawl of several payloads; empty:
        :attr:`payload_id`, the one payload's)."""
        self.observations: list[tuple[Any, ...]] = []
        """Observation rows bound in Python (all of them, or the repriced ones only when
        the new offers' were staged: see :meth:`observation_rows`)."""
        self._lazy_new_observations: tuple[Any, int, int] | None = None
        self._next_obs = (conn.execute(select(func.max(OBS.c.id))).scalar() or 0) + 1
        self._fx_cache: dict[str, Any] = {}
        gpus = select(GPU.c.slug, GPU.c.tflops_bf16)
        self._tflops: dict[str, Decimal | None] = dict(conn.execute(gpus).all())  # type: ignore[arg-type]
        self._tflops_scaled = {slug: tflops_scaled(t) for slug, t in self._tflops.items()}
        """Each GPU model's TFLOPS as the PFLOPS key's divisor (staged with the attributes)."""
        self._pflop_keys: dict[tuple[int | None, str | None], int | None] = {}
        self._prices: dict[tuple[Any, ...], _Price] = {}
        self._bases: dict[tuple[Any, ...], tuple[tuple[Any, ...], Decimal | None]] = {}
        self.bind = bulk_binder(conn)
        day = OBS.c.fx_date.type.bind_processor(conn.dialect)  # CompactDate: days on SQLite
        self._bind_day: Callable[[Any], Any] = day if day is not None else self.bind
        self.stamp = self.bind(now)
        self._binds_text = self._stages = conn.dialect.name == "sqlite"
        self._bound: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        self.first_new_offer = 0
        """The id of this ingest's first new offer (set by :meth:`write`; 0: none)."""
        self._next_offer: int | None = None
        self._held = (0, 0)
        """Rows of the offer and observation tables before this ingest (by their ids)."""
        self._adding = (0, 0)
        self._deferred: set[str] = set()
        self._checked_per_load = False
        self._load = ExitStack()

    def bound_attributes(self, attributes: tuple[Any, ...], digest: str) -> tuple[Any, ...]:
        """``attributes`` as bound for the bulk writes, memoized per fingerprint (offers
        of one SKU share them). The memo is used only for equal attributes: the same
        fingerprint text and equal values are the same stored values."""
        if not self._binds_text:
            return attributes
        entry = self._bound.get(digest)
        if entry is not None and entry[0] == attributes:
            return entry[1]
        values = tuple(map(self.bind, attributes))
        if entry is None:
            self._bound[digest] = (attributes, values)
        return values

    def _price(self, fields: Mapping[str, Any]) -> _Price:
        """The derived figures of a price, as bound for the bulk writes: the
        observation's (``OBS_COLUMNS[2:-1]``, USD per GPU-hour there as a Decimal, which
        the outbox reads) and the offer's (amount, currency, USD per GPU-hour and its
        sort key, the sort key of USD per instance-hour).

        Memoized on :func:`_price_key`, in two levels: what does not depend on the GPU
        count (the hourly amount of a per-instance price, the USD figures, the FX rate)
        is shared by every GPU count of one amount, unit and currency, so a catalog's
        SKUs of one list price convert it once. Every figure is rounded and normalized
        by :func:`q`, so equal inputs give identical results whatever their decimal
        spelling (and the bound amount is canonical text on SQLite, an equal NUMERIC on
        PostgreSQL)."""
        memo_key = _price_key(fields)
        price = self._prices.get(memo_key)
        if price is not None:
            return price
        amount, unit, per, gpu_count, currency = memo_key
        per_gpu = per == PricePer.gpu
        base_key = (amount, unit, currency, gpu_count if per_gpu else None)
        base = self._bases.get(base_key)
        if base is None:
            base = self._bases[base_key] = self._base(amount, unit, per, gpu_count, currency)
        observed, hourly_usd = base
        if hourly_usd is None:
            gpu_usd = None
        else:
            gpu_usd = gpu_hourly(hourly_usd, gpu_count)
            observed = (*observed[:5], gpu_usd, *observed[6:])
        price = self._prices[memo_key] = (
            observed,
            (
                observed[0],
                currency,
                self.bind(gpu_usd),
                sort_key_e10(gpu_usd),
                sort_key_e10(hourly_usd),
            ),
        )
        return price

    def pflop_key(self, gpu_hour_e10: int | None, gpu_slug: str | None) -> int | None:
        """The offer's USD per PFLOPS-hour sort key (:func:`schema.prices.pflop_hour_key`),
        memoized per price key and GPU model (offers of one SKU share them)."""
        memo = (gpu_hour_e10, gpu_slug)
        if memo in self._pflop_keys:
            return self._pflop_keys[memo]
        tflops = self._tflops.get(gpu_slug) if gpu_slug is not None else None
        key = self._pflop_keys[memo] = pflop_hour_key(gpu_hour_e10, tflops)
        return key

    def _base(
        self, amount: Decimal, unit: Any, per: Any, gpu_count: Decimal, currency: str
    ) -> tuple[tuple[Any, ...], Decimal | None]:
        """The figures of a price that do not depend on its GPU count (unless the price
        is per GPU): the observation's as bound, USD per GPU-hour left None, and the USD
        hourly amount it is computed from (None without an FX rate)."""
        hourly = instance_hourly(amount, unit, per, gpu_count)
        if currency not in self._fx_cache:
            self._fx_cache[currency] = self.fx.to_usd(currency, self.now.date())
        conversion = self._fx_cache[currency]
        if conversion is None:
            usd = hourly_usd = rate = rate_date = None
        else:
            rate, rate_date = conversion.usd_per_unit, conversion.rate_date
            usd = q(amount * rate)
            hourly_usd = q(hourly * rate)
        bind = self.bind
        same = currency == USD  # its USD figures are its own: not stored again (prices.USD)
        hourly_same = hourly == amount  # a price per instance-hour (prices.HOURLY_SAME)
        observed = (
            bind(amount),
            currency,
            None if hourly_same else bind(hourly),
            None if same else bind(usd),
            None if same or hourly_same else bind(hourly_usd),
            None,
            None if same else bind(rate),
            self._bind_day(rate_date),
        )
        return observed, hourly_usd

    def _payload_of(self, record: OfferRecord) -> int | None:
        return self.record_payloads.get(id(record), self.payload_id)

    def _payload(self, sha256: str) -> int:
        """The ``crawl_run_payload`` row this run stored for the payload ``sha256``."""
        found = self._payload_ids.get(sha256)
        if found is None:  # the ingest stores the crawl's payloads before its writes
            raise LookupError(f"crawl run {self.run_id} stored no payload {sha256}")
        return found

    def open_version(self, source: str) -> None:
        """Insert this ingest's catalog version (its counts are set by
        :meth:`close_version`)."""
        self.conn.execute(
            insert(VERSION).values(
                id=self.version,
                created_at=self.now,
                source=source,
                crawl_run_id=self.run_id,
                added=0,
                changed=0,
                withdrawn=0,
                updated=0,
            )
        )

    def close_version(self, *, added: int, changed: int, withdrawn: int, updated: int) -> None:
        self.conn.execute(
            update(VERSION)
            .where(VERSION.c.id == self.version)
            .values(added=added, changed=changed, withdrawn=withdrawn, updated=updated)
        )

    def write(
        self, source: str, diff: Diff, payloads: Mapping[int, str | None] | None = None
    ) -> None:
        """Write one batch of the ingest's diff (its observation rows are
        :meth:`observation_rows` until the next batch); ``payloads``: the sha256 of each
        of its records' payload, by ``id(record)``, when the crawl has several payloads
        (the caller holds the batch's records while it is written, so ids are sound)."""
        conn = self.conn
        payload = self._payload
        self.record_payloads = {
            record: None if sha256 is None else payload(sha256)
            for record, sha256 in (payloads or {}).items()
        }
        self.observations = []
        self._lazy_new_observations = None
        trim_memos(self._prices, self._bases, self._bound, self._pflop_keys)
        if self._next_offer is None:
            self._next_offer = (conn.execute(select(func.max(OFFER.c.id))).scalar() or 0) + 1
            self._held = (self._next_offer - 1, self._next_obs - 1)
        next_offer = self._next_offer
        if diff.new and not self.first_new_offer:
            self.first_new_offer = next_offer
        self._scale(len(diff.new), len(diff.new) + len(diff.changed) + len(diff.reopened))
        self._write_rows(source, diff, next_offer)
        self._next_offer = next_offer + len(diff.new)

    def _scale(self, new: int, observing: int) -> None:
        """Large loads: once the rows this ingest adds (this batch included), or the new
        offers it is known to add at least (``expected_new``), make it worth it, the
        secondary indexes of a table are rebuilt after the load instead of updated row by
        row (ids are never reused: the next id bounds a table's row count), and PostgreSQL
        checks the foreign keys of the rows from here on once, at the end. Entered once,
        for the rest of the ingest (:meth:`finish_load`)."""
        self._adding = (self._adding[0] + new, self._adding[1] + observing)
        if new and self._expected_new is not None:
            self._foreseen, self._expected_new = self._expected_new(), None
        foreseen = self._foreseen  # each new offer has a new observation
        conn, stack = self.conn, self._load
        deferring = [
            table.name
            for table, adding, holding in (
                (OFFER, max(self._adding[0], foreseen), self._held[0]),
                (OBS, max(self._adding[1], foreseen), self._held[1]),
            )
            if table.name not in self._deferred and indexes_worth_rebuilding(adding, holding)
        ]
        if deferring:
            self._deferred.update(deferring)
            stack.enter_context(indexes_deferred(conn, deferring))
        if not self._checked_per_load and self._adding[0] >= PER_LOAD_CHECKS_MIN_ROWS:
            self._checked_per_load = True
            first_offer = self._next_offer or 1
            # the line digests of the new offers too (service.catalog.lines): they are
            # written in the load, keyed by their offer's id
            loads = [Load(OFFER, first_offer), Load(OBS, self._next_obs)]
            loads.append(Load(LINE, first_offer, key="offer_id"))
            stack.enter_context(foreign_keys_checked_per_load(conn, loads))

    def finish_load(self) -> None:
        """After the last batch: rebuild the deferred indexes, check the foreign keys of
        a large load."""
        self._load.close()

    def abandon_load(self) -> None:
        """The writes are being rolled back: nothing to rebuild or check."""
        self._load.pop_all()

    def _write_rows(self, source: str, diff: Diff, next_offer: int) -> None:
        conn, version = self.conn, self.version
        offer_constants = {
            "source": source,
            "status": ACTIVE,
            "first_seen_at": self.stamp,
            "first_seen_version": version,
            "last_changed_at": self.stamp,
            "last_changed_version": version,
        }
        # valid_from and crawl_run_id are the version's: stored null (VERSIONS_OWN)
        obs_constants = {"version_from": version}
        # New offers get their ids in identity key order, so the ids follow the unique
        # index (appends to it where it is kept up to date row by row).
        # Their line digests (service.catalog.lines) are written with them.
        if self._stages and len(diff.new) >= STAGED_MIN_ROWS:
            self._insert_new_staged(diff, next_offer, offer_constants, obs_constants)
        elif diff.new:
            self._insert_new_rows(diff.in_key_order, next_offer, offer_constants)
            store_lines(conn, diff.added_lines(next_offer), added=True)

        repriced = []
        obs_id, observe = self._next_obs, self.observations.append
        for old, record, attributes, digest in diff.changed + diff.reopened:
            observed, offered = self._price(record.__dict__)
            observe((obs_id, old.id, *observed, self._payload_of(record)))
            repriced.append((old, record, attributes, digest, obs_id, offered))
            obs_id += 1
        self._next_obs = obs_id
        closing = [old.observation_id for old, *_ in diff.changed]
        closing += [old.observation_id for old in diff.withdrawn]
        for start in range(0, len(closing), CHUNK):
            conn.execute(
                update(OBS)
                .where(OBS.c.id.in_(closing[start : start + CHUNK]))
                .values(version_to=version)  # valid_to: the version's time (VERSIONS_OWN)
            )
        bulk_insert(conn, OBS, OBS_COLUMNS, self.observations, obs_constants)
        self._update_offers(repriced, diff)

    def _insert_new_rows(
        self,
        new: list[tuple[Key, OfferRecord, tuple[Any, ...], str]],
        next_offer: int,
        constants: dict[str, Any],
    ) -> None:
        """Insert the new offers, one bound row each; their observation rows are kept in
        :attr:`observations`, inserted with the repriced ones.

        The rows are handed to :func:`bulk_insert` as they are built. On PostgreSQL the
        server stores each one as it arrives while this loop builds the next ones, on the
        other core: a 200,000-offer first ingest took 5.1 s this way, against 5.9 s with
        the list built first and 5.8 s through staging tables (docs/benchmarks.md)."""
        rows = self._new_offer_rows(new, next_offer, self._next_obs)
        self._next_obs += len(new)
        bulk_insert(self.conn, OFFER, OFFER_COLUMNS, rows, constants)

    def _new_offer_rows(
        self,
        new: list[tuple[Key, OfferRecord, tuple[Any, ...], str]],
        next_offer: int,
        obs_id: int,
    ) -> Iterator[tuple[Any, ...]]:
        """The offer rows of :meth:`_insert_new_rows`, one by one; each one's observation
        row goes to :attr:`observations` as it is built."""
        # The hot loop of a first ingest: one offer row and one observation row per new
        # offer, each built by unpacking memoized parts (key, attributes, price).
        observe = self.observations.append
        prices, price_of = self._prices, self._price
        memo, bound_of, as_is = self._bound, self.bound_attributes, not self._binds_text
        payload_of = self._payload_of if self.record_payloads else None
        raw, split, pflop_key = self.payload_id, str.split, self.pflop_key
        for offer_id, (key, record, attributes, digest) in enumerate(new, next_offer):
            fields = record.__dict__
            price = prices.get(  # _price_key(fields), inlined: hot loop
                (
                    fields["amount"],
                    fields["unit"],
                    fields["price_per"],
                    fields["gpu_count"],
                    fields["currency"],
                )
            )
            observed, offered = price or price_of(fields)
            if as_is:
                values = attributes
            else:
                entry = memo.get(digest)
                values = (
                    entry[1]
                    if entry is not None and entry[0] == attributes
                    else bound_of(attributes, digest)
                )
            observe((obs_id, offer_id, *observed, payload_of(record) if payload_of else raw))
            pflop = pflop_key(offered[3], attributes[GPU_SLUG])
            yield (offer_id, *split(key, KEY_SEP), *values, digest, *offered, pflop, obs_id)
            obs_id += 1

    def _insert_new_staged(
        self,
        diff: Diff,
        next_offer: int,
        offer_constants: dict[str, Any],
        obs_constants: dict[str, Any],
    ) -> None:
        """Many new offers, on SQLite: bind each offer's own values only (its key parts
        and the numbers of its attributes and price) into a temporary table, the distinct
        attributes and prices into two more, and let two ``INSERT ... SELECT`` joins
        write the offer and observation rows, and a third the new offers' line digests.
        Binding is most of what a row costs the client; the rows stored are exactly those
        :meth:`_insert_new_rows` and :func:`~service.catalog.lines.store_lines` write (the
        same bound values, through the same column affinities).

        The records are read in the crawl's order, which is the order they lie in memory
        (a crawl parses them one after the other): reading 200,000 records in key order
        instead missed the CPU's cache on nearly every field (1.1 s for this loop, against
        0.86 s now with the sort). Only the compact staged rows are sorted into key
        order, the order of the ids."""
        aids: dict[tuple[Any, ...], int] = {}
        pids: dict[tuple[Any, ...], int] = {}
        attribute_rows: list[tuple[Any, ...]] = []
        price_rows: list[tuple[Any, ...]] = []
        compact: list[tuple[Any, ...]] = []
        stage_attributes, stage_price, stage_offer = (
            aids.get,
            pids.get,
            compact.append,
        )
        payload_of = self._payload_of if self.record_payloads else None
        line_of = diff.new_lines.get
        for key, record, attributes, digest in diff.new:  # the crawl's order
            fields = record.__dict__
            aid = stage_attributes(attributes)
            if aid is None:  # equal attributes have equal bound values and fingerprint
                aid = aids[attributes] = len(aids)
                slug = attributes[GPU_SLUG]
                divisor = None if slug is None else self._tflops_scaled.get(slug)
                bound = self.bound_attributes(attributes, digest)
                attribute_rows.append((aid, *bound, digest, divisor))
            price_key = (  # _price_key(fields), inlined: hot loop
                fields["amount"],
                fields["unit"],
                fields["price_per"],
                fields["gpu_count"],
                fields["currency"],
            )
            pid = stage_price(price_key)
            if pid is None:
                pid = pids[price_key] = len(pids)
                observed, offered = self._price(fields)
                # the observation's USD per GPU-hour as bound (the offer's, as text)
                price_rows.append(
                    (pid, *observed[:5], offered[2], *observed[6:], offered[3], offered[4])
                )
            if payload_of:
                stage_offer((key, aid, pid, line_of(key), payload_of(record)))
            else:
                stage_offer((key, aid, pid, line_of(key)))
        compact.sort(key=key_of)  # numbered 1, 2, ... in key order (the keys are unique)
        split = str.split  # after the sort: the parts then lie in memory in binding order
        if payload_of:
            offer_rows = [(*split(k, KEY_SEP), a, p, n, r) for k, a, p, n, r in compact]
        else:
            offer_rows = [(*split(k, KEY_SEP), a, p, n) for k, a, p, n in compact]
        del compact
        first_obs = self._next_obs
        self._next_obs += len(offer_rows)
        self._lazy_new_observations = (diff.in_key_order, next_offer, first_obs)
        offers: tuple[str, ...] = ("n", *KEY_COLUMNS, "aid", "pid", "line")
        if payload_of:
            offers += ("payload_id",)
        conn = self.conn
        shared = (self.payload_id, *offer_constants.values(), *obs_constants.values())
        literals = [sqlite_literal(value) for value in shared]
        raw = "n.payload_id" if payload_of else literals[0]
        offer_literals = literals[1 : 1 + len(offer_constants)]
        obs_literals = literals[1 + len(offer_constants) :]
        offer_id, obs_id = f"n.n + {next_offer - 1}", f"n.n + {first_obs - 1}"
        with (
            staged(
                conn,
                "stage_attributes",
                ("aid", *ATTRIBUTES, "fingerprint", "tflops_e4"),
                attribute_rows,
            ) as a,
            staged(conn, "stage_price", STAGED_PRICE_COLUMNS, price_rows) as p,
            staged(
                conn,
                "stage_offer",
                offers,
                offer_rows,
                numbered=True,
            ) as n,
        ):
            del offer_rows
            # CROSS JOIN: SQLite walks the offers in id order and looks up the rest (it
            # does not reorder CROSS JOINs).
            offers_by_id = f"FROM {n} AS n CROSS JOIN {p} AS p WHERE p.pid = n.pid ORDER BY n.n"
            with_attributes = (
                f"FROM {n} AS n CROSS JOIN {a} AS a CROSS JOIN {p} AS p "
                "WHERE a.aid = n.aid AND p.pid = n.pid ORDER BY n.n"
            )
            offer_values = (
                offer_id,
                *(f"n.{c}" for c in KEY_COLUMNS),
                *(f"a.{c}" for c in (*ATTRIBUTES, "fingerprint")),
                "p.amount",
                "p.currency",
                "p.gpu_hour_usd",
                "p.gpu_hour_usd_e10",
                "p.hourly_usd_e10",
                _staged_pflop_key(),
                obs_id,
                *offer_literals,
            )
            conn.exec_driver_sql(
                f"INSERT INTO {OFFER.name} ({', '.join((*OFFER_COLUMNS, *offer_constants))}) "
                f"SELECT {', '.join(offer_values)} {with_attributes}"
            )
            obs_values = (
                obs_id,
                offer_id,
                *(f"p.{c}" for c in OBS_COLUMNS[2:-1]),
                raw,
                *obs_literals,
            )
            conn.exec_driver_sql(
                f"INSERT INTO {OBS.name} ({', '.join((*OBS_COLUMNS, *obs_constants))}) "
                f"SELECT {', '.join(obs_values)} {offers_by_id}"
            )
            if diff.new_lines:
                conn.exec_driver_sql(
                    f"INSERT INTO {LINE.name} (offer_id, digest) "
                    f"SELECT {offer_id}, n.line FROM {n} AS n WHERE n.line IS NOT NULL ORDER BY n.n"
                )

    def observation_rows(self) -> list[tuple[Any, ...]]:
        """Every observation row this ingest inserted, as :data:`OBS_COLUMNS` (USD per
        GPU-hour as a Decimal): the added offers' first, then the repriced ones. Built
        on demand where the rows were written by the database (the outbox reads them
        only when some subscription is live)."""
        if self._lazy_new_observations is None:
            return self.observations
        new, next_offer, first_obs = self._lazy_new_observations
        payload_of, raw = self._payload_of, self.payload_id
        rows = [
            (
                first_obs + i,
                next_offer + i,
                *self._prices[_price_key(record.__dict__)][0],
                payload_of(record) if self.record_payloads else raw,
            )
            for i, (_, record, _, _) in enumerate(new)
        ]
        return rows + self.observations

    def _update_offers(self, repriced: list[tuple[Any, ...]], diff: Diff) -> None:
        """Set the new prices (only the price columns of an active offer whose attributes
        are the same: the common change), the attributes updated in place, and withdraw."""
        conn, now, version, stamp = self.conn, self.now, self.version, self.stamp
        pflop_key = self.pflop_key
        priced = []
        whole = []
        for old, _, attributes, digest, obs_id, offered in repriced:
            prices = (
                offered[0],
                offered[1],
                obs_id,
                offered[2],
                offered[3],
                offered[4],
                pflop_key(offered[3], attributes[GPU_SLUG]),
                stamp,
                version,
            )
            if old.status == ACTIVE and old.fingerprint == digest:
                priced.append((old.id, *prices))
            else:
                whole.append((old.id, *attributes, digest, ACTIVE, *prices, None, None))
        bulk_update(conn, OFFER, REPRICED_ONLY_COLUMNS, priced)
        bulk_update(conn, OFFER, REPRICED_COLUMNS, whole)
        bulk_update(
            conn,
            OFFER,
            TOUCHED_COLUMNS,
            [(old.id, *attributes, digest) for old, attributes, digest in diff.touched],
        )
        # an offer updated in place may have another GPU model: its PFLOPS key follows
        refresh_pflop_keys(conn, [old.id for old, _, _ in diff.touched])
        withdrawn = [old.id for old in diff.withdrawn]
        for start in range(0, len(withdrawn), CHUNK):
            conn.execute(
                update(OFFER)
                .where(OFFER.c.id.in_(withdrawn[start : start + CHUNK]))
                .values(
                    status=OfferStatus.withdrawn.value, withdrawn_at=now, withdrawn_version=version
                )
            )


@cache
def _staged_pflop_key() -> str:
    """The PFLOPS sort key of a staged offer (SQLite): its staged price's key and its staged
    attributes' GPU model's TFLOPS, scaled in Python once per model
    (:func:`schema.prices.tflops_scaled`), as :func:`schema.prices.pflop_hour_key`.
    Compiled once per process (every batch of a first ingest wrote it: 80 compilations,
    0.27 s holding the interpreter lock, at 200,000 offers). The TFLOPS figure staged
    instead of looked up per offer: the lookup and its scaling, a subquery per row, were
    0.27-0.35 s of a 200,000-offer first ingest (docs/benchmarks.md)."""
    key = pflop_hour_key_scaled_sql(
        literal_column("p.gpu_hour_usd_e10"), literal_column("a.tflops_e4")
    )
    sql = key.compile(dialect=sqlite_dialect(), compile_kwargs={"literal_binds": True})
    return str(sql)


def ensure_providers(conn: Connection, slugs: set[str], resolver: Resolver) -> None:
    """A provider missing from reference data is registered minimally and reported."""
    missing = sorted(slugs - resolver.reference.providers)
    if missing:
        conn.execute(
            insert(PROVIDER),
            [{"slug": s, "name": s, "kind": "unknown", "status": "active"} for s in missing],
        )
        for slug in missing:
            resolver.unmapped[(UnmappedKind.provider.value, slug)] += 1
        resolver.reference.providers.update(missing)


def ensure_instance_types(conn: Connection, first_new_offer: int) -> None:
    """Register SKUs first seen in this crawl (an SKU already offered is already known).

    Done by the database from the offers this ingest just inserted (ids from
    ``first_new_offer`` on): each new (provider, SKU) not registered yet is inserted
    with the attributes of its first new offer in identity order, in identity order
    (an ingest numbers its new offers in identity order one batch at a time, so the
    lowest id is not always the first in identity order). Nothing is read back into
    Python or bound again."""
    if conn.dialect.name == "postgresql":
        # ON CONFLICT would cost PostgreSQL a speculative insertion per row; only ingests
        # write instance types, and they hold the ingest lock, so NOT EXISTS is exact.
        conn.exec_driver_sql("SET LOCAL work_mem = '64MB'")  # the two sorts, in memory
        conn.exec_driver_sql(
            f"INSERT INTO instance_type ({SKU_LIST}) SELECT {SKU_LIST} FROM ("
            f"SELECT DISTINCT ON (provider, sku) {SKU_SOURCE}, region, price_kind, unit "
            "FROM offer AS o "
            "WHERE id >= %(first)s AND NOT EXISTS (SELECT 1 FROM instance_type AS i "
            "WHERE i.provider = o.provider AND i.name = o.sku) "
            f"ORDER BY provider, sku, {IN_KEY_ORDER}) AS new "
            "ORDER BY provider, name",
            {"first": first_new_offer},
        )
        return
    # NOT INDEXED keeps SQLite's plan on the id range, the new rows only, in id order.
    conn.exec_driver_sql(
        f"INSERT INTO instance_type ({SKU_LIST}) "
        f"SELECT {SKU_SOURCE} FROM offer NOT INDEXED WHERE id >= :first "
        "ORDER BY provider, sku, region, price_kind, unit "
        "ON CONFLICT (provider, name) DO NOTHING",
        {"first": first_new_offer},
    )


SKU_COLUMNS = ("provider", "name", "gpu_slug", "gpu_count", "vcpus", "memory_gb", "bare_metal")
SKU_LIST = ", ".join(SKU_COLUMNS)
SKU_SOURCE = ", ".join(("provider", "sku AS name", *SKU_COLUMNS[2:]))
IN_KEY_ORDER = "region, price_kind, unit"
"""The rest of an identity key, in the order of its text (byte order, as Python's: every
character column is ``COLLATE "C"`` on PostgreSQL, migration 0037)."""
"""The offer columns an instance type is registered from, in SKU_COLUMNS order."""
