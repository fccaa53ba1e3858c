"""A crawl's records validated, batch by batch: each valid record with its identity key,
each invalid one rejected with a reason, and the offers that must not be withdrawn.

:class:`StreamValidator` keeps what a crawl's later records need of its earlier ones,
and nothing else: the amount first seen under each identity key (an offer reported twice
with two prices keeps neither), the keys that must not be withdrawn or written
(``protected``), the region codes, and the rejections. A key can become protected after
its first record was handed on (a later duplicate with another price, or a later invalid
record of the same identity): :attr:`StreamValidator.late` says so, and the ingest then
applies the crawl again with every protected key known from the start (see
:mod:`service.catalog.stream`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol, runtime_checkable

from pydantic import ValidationError

from schema.records import OFFER_RECORDS, OfferRecord, describe_validation_error
from service.catalog.columns import KEY_COLUMNS, KEY_SEP, Key, join_key
from service.catalog.lines import Fresh, Known, LineIndex, read_known
from service.catalog.results import Rejection, safe_excerpt
from service.catalog.state import (
    AS_LINE,
    NOT_SEEN,
    CurrentState,
    SeenKeys,
    StateHandle,
    amount_number,
    key_digest,
)


@dataclass
class Validated:
    records: list[OfferRecord]
    keys: list[Key]
    """The identity of each record, in ``records`` order (computed once)."""
    rejections: list[Rejection]
    protected: set[Key]
    """Keys of offers whose record this crawl rejected: they must not be withdrawn."""
    regions: set[str] = field(default_factory=set)
    """The records' region codes (whether any offer needs locations: see
    service.catalog.locations)."""


class Batch(NamedTuple):
    """A batch's valid records, each one's identity key (and its row in the current state,
    ``rows``) and line digest (``lines``: None when the records come from no lines; see
    service.catalog.lines) and the sha256 of the
    raw payload each one was parsed from (``payloads``: None when the records come as
    they are, not :class:`Sourced`)."""

    records: list[OfferRecord]
    keys: list[Key]
    lines: list[bytes | None] | None = None
    payloads: list[str | None] | None = None
    rows: list[int] | None = None
    """Each record's row in the source's current state (-1: a new offer), found once."""


class Sourced:
    """A crawl's record (raw or validated) with the sha256 of the raw payload it was
    parsed from: its provenance travels with it, batch by batch, to the writer."""

    __slots__ = ("payload", "value")

    def __init__(self, value: Any, payload: str | None) -> None:
        self.value, self.payload = value, payload


@runtime_checkable
class SourcedRecords(Protocol):
    """Records that can be read with their payloads, as :class:`Sourced` items (a crawl
    of several payloads: ``service.crawl.records.CrawlRecords``)."""

    def sourced(self) -> Iterator[Any]: ...


class StreamValidator:
    """Validates one crawl's records, a batch at a time, in the crawl's order.

    A :data:`~service.catalog.lines.Known` line is counted as seen without a record, with
    its offer's stored amount (``index``); a second record of its offer is read after all,
    so duplicates are judged as on the full path."""

    def __init__(
        self,
        source: str,
        upstream: Sequence[Rejection],
        protected: Iterable[Key] = (),
        index: LineIndex | None = None,
        handle: StateHandle | None = None,
    ) -> None:
        self.source = source
        self.upstream = upstream
        """Rejections made before ingest (the pipeline's, a file's unreadable lines); the
        list may grow while the records are read."""
        self.rejections: list[Rejection] = []
        """This validation's own rejections, in position order."""
        self.protected: set[Key] = set(protected)
        self.handle = handle
        self.state: CurrentState | None = None
        """The source's current state once the handle gives it: the keys seen of its offers
        are kept in it (:attr:`CurrentState.seen_amounts`), the others in :attr:`seen`."""
        self.seen = SeenKeys()
        """Each key seen that no current offer has, with the amount first seen under it,
        compactly (service.catalog.state)."""
        self._seen_current = 0
        """How many current offers the crawl has seen."""
        self._providers: dict[str, int] = {}
        """How many keys of :attr:`seen` each provider has."""
        self.index = index
        self.skipped = 0
        """Lines skipped as unchanged."""
        self.regions: set[str] = set()
        self.position = 0
        """Records read so far: a rejection's position in the crawl (see :attr:`locate`)."""
        self.locate: Callable[[int], int] | None = None
        """Where a record's position is in the crawl's own numbering, when the records are
        not numbered one by one (a JSON Lines file's lines: blank and unreadable lines
        hand no record on); None: as read."""
        self.late = False
        """Whether a key was protected after a record of it was handed on."""
        self._upstream_read = 0
        self._batch_keys: set[Key] = set()
        self._protect_upstream()

    def _protect_upstream(self) -> None:
        """Rejected upstream (pipeline): never withdraw those."""
        for rejection in self.upstream[self._upstream_read :]:
            self._protect(_loose_key(rejection.record, self.source))
        self._upstream_read = len(self.upstream)

    def _protect(self, key: Key | None) -> None:
        if not key or key in self.protected:
            return
        if key not in self._batch_keys and self._is_seen(key):
            self.late = True  # handed on in an earlier batch
        self.protected.add(key)

    def batch(self, items: Sequence[Any]) -> Batch:
        """The valid records of the next ``items`` of the crawl with their keys (and line
        digests), without the offers protected so far."""
        first = self.position
        self.position += len(items)
        self._batch_keys = batch_keys = set()
        items, origins = _sourced(items)
        items, digests = _unwrapped(items)
        validated = _validated(items)
        records: list[OfferRecord] = []
        keys: list[Key] = []
        rows: list[int] = []
        lines: list[bytes | None] | None = None if digests is None else []
        payloads: list[str | None] | None = None if origins is None else []
        source, seen, join = self.source, self.seen, join_key
        add_seen = seen.add
        providers = self._providers if ":" in self.source else None  # a peer's: see providers()
        add_region = self.regions.add
        state = self._state()
        row_of = state.keys.find if state is not None else _no_row
        seen_amounts = state.seen_amounts if state is not None else array("q")
        marked = state.marked if state is not None else bytearray()
        for offset, (item, record) in enumerate(zip(items, validated, strict=True)):
            position = first + offset
            if type(record) is Known:
                assert state is not None  # only an open index makes lines Known
                row = state.line_rows[record[0]]
                if seen_amounts[row] == NOT_SEEN:  # the offer as stored: nothing to read
                    seen_amounts[row] = AS_LINE - record[0]  # its amount, when compared
                    marked[row] = 1
                    self._seen_current += 1
                    if providers is not None:
                        provider = state.provider_names[state.providers[row]]
                        providers[provider] = providers.get(provider, 0) + 1
                    self.skipped += 1
                    continue
                fresh = read_known(record[1], source)  # a second record: judged
                item, record = fresh.value, None
                if digests is not None:
                    digests[offset] = fresh.digest
            if record is None:
                try:
                    record = OfferRecord.model_validate(item)
                except ValidationError as exc:
                    self.rejections.append(
                        Rejection(position, describe_validation_error(exc), safe_excerpt(item))
                    )
                    self._protect(_loose_key(item, source))
                    continue
            fields = record.__dict__
            if fields["source"] != source:
                self.rejections.append(
                    Rejection(
                        position,
                        f"source: record says {record.source!r}, crawl is {source!r}",
                        safe_excerpt(record),
                    )
                )
                continue
            add_region(fields["region"])
            key = join(
                (
                    fields["provider"],
                    fields["sku"],
                    fields["region"],
                    fields["price_kind"],
                    fields["unit"],
                )
            )
            pair = key_digest(key)
            amount = amount_number(fields["amount"])
            row = row_of(*pair)
            if row >= 0:
                first_amount = seen_amounts[row]
                if first_amount <= AS_LINE:  # a skipped line's: the offer's amount as stored
                    assert state is not None  # a row is found in a state only
                    first_amount = state.line_amount(AS_LINE - first_amount)
                elif first_amount == NOT_SEEN:
                    seen_amounts[row] = amount
                    marked[row] = 1
                    self._seen_current += 1
            else:
                first_amount = add_seen(pair, amount)
            if first_amount != NOT_SEEN:
                if first_amount != amount:
                    self.rejections.append(
                        Rejection(
                            position,
                            "duplicate offer with a different price",
                            safe_excerpt(record),
                        )
                    )
                    self._protect(key)
                continue
            if providers is not None:
                provider = fields["provider"]
                providers[provider] = providers.get(provider, 0) + 1
            batch_keys.add(key)
            records.append(record)
            keys.append(key)
            rows.append(row)
            if lines is not None and digests is not None:
                lines.append(digests[offset])
            if payloads is not None and origins is not None:
                payloads.append(origins[offset])
        self._protect_upstream()
        self._batch_keys = set()
        # An offer reported twice with two prices is ambiguous: keep neither price.
        protected = self.protected
        if protected:
            kept = [i for i, k in enumerate(keys) if k not in protected]
            records, keys = [records[i] for i in kept], [keys[i] for i in kept]
            rows = [rows[i] for i in kept]
            if lines is not None:
                lines = [lines[i] for i in kept]
            if payloads is not None:
                payloads = [payloads[i] for i in kept]
        return Batch(records, keys, lines, payloads, rows)

    def _state(self) -> CurrentState | None:
        """The current state, once the handle gives it (waited for at the first batch)."""
        if self.state is None and self.handle is not None:
            self.state = self.handle.wait()
            self.handle = None
        return self.state

    def _is_seen(self, key: Key) -> bool:
        pair = key_digest(key)
        state = self.state
        row = state.row(pair) if state is not None else -1
        if row >= 0:
            assert state is not None
            return state.seen_amounts[row] != NOT_SEEN
        return self.seen.find(pair) >= 0

    @property
    def offers(self) -> int:
        """Valid offers of the crawl so far, protected ones excluded."""
        protected = self.protected
        seen = len(self.seen) + self._seen_current
        if not protected:
            return seen
        return seen - sum(1 for key in protected if self._is_seen(key))

    def providers(self) -> set[str]:
        """The providers of the keys seen, protected ones excluded (counted for a peer
        catalog's crawl only: a source named ``peer:...``)."""
        counts = dict(self._providers)
        for key in self.protected:
            if self._is_seen(key):
                provider = key.partition(KEY_SEP)[0]
                counts[provider] = counts.get(provider, 0) - 1
        return {provider for provider, count in counts.items() if count > 0}

    def all_rejections(self) -> list[Rejection]:
        """Upstream rejections first, then this validation's (the order they are stored),
        each at its place in the crawl (:attr:`locate`)."""
        self._protect_upstream()
        locate, own = self.locate, self.rejections
        if locate is not None:
            own = [replace(rejection, position=locate(rejection.position)) for rejection in own]
        return [*self.upstream, *own]


def _no_row(hi: int, lo: int) -> int:
    return -1


def validate(source: str, records: Iterable[Any], upstream: Sequence[Rejection] = ()) -> Validated:
    """A whole crawl validated in one go (the streaming ingest validates it in batches)."""
    validator = StreamValidator(source, upstream)
    items = list(records)
    kept, keys, *_ = validator.batch(items)
    protected = validator.protected
    kept_keys = [(r, k) for r, k in zip(kept, keys, strict=True) if k not in protected]
    return Validated(
        [r for r, _ in kept_keys],
        [k for _, k in kept_keys],
        validator.all_rejections(),
        protected,
        validator.regions,
    )


def _validated(items: Sequence[Any]) -> list[OfferRecord | None]:
    """Each item as an OfferRecord where it already is one or the batch validates in one
    call; None for the items of a batch with an invalid record (validated again one by one
    by the caller, for each one's reason)."""
    raw = [index for index, item in enumerate(items) if not isinstance(item, OfferRecord | Known)]
    out: list[OfferRecord | None] = list(items)
    if not raw:
        return out
    try:
        records = OFFER_RECORDS.validate_python([items[index] for index in raw])
    except ValidationError:
        for index in raw:
            out[index] = None
        return out
    for index, record in zip(raw, records, strict=True):
        out[index] = record
    return out


def _sourced(items: Sequence[Any]) -> tuple[Sequence[Any], list[str | None] | None]:
    """:class:`Sourced` items unwrapped, with each one's payload; other items as they are,
    with None."""
    if not items or type(items[0]) is not Sourced:
        return items, None
    return [item.value for item in items], [item.payload for item in items]


def _unwrapped(items: Sequence[Any]) -> tuple[Sequence[Any], list[bytes | None] | None]:
    """Items read from lines (:class:`~service.catalog.lines.Fresh` values unwrapped,
    :data:`~service.catalog.lines.Known` ones kept) with each fresh line's digest; other
    items as they are, with None."""
    if not items or type(items[0]) not in (Fresh, Known):
        return items, None
    values = [item.value if type(item) is Fresh else item for item in items]
    return values, [item.digest if type(item) is Fresh else None for item in items]


def _loose_key(item: Any, source: str) -> Key | None:
    """The offer identity of an invalid record, when its identity fields are readable."""
    if not isinstance(item, Mapping):
        return None
    try:
        parts = [str(item[name]) for name in KEY_COLUMNS]
    except KeyError:
        return None
    if str(item.get("source", source)) != source:
        return None
    return join_key(parts)
