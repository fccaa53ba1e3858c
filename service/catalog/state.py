"""What an ingest holds per offer, held compactly: a source's current state and the
offers its crawl has seen, in arrays of fixed-size digests and numbers, not dictionaries
of text.

Held as key text -> state text, a source's state took about 260 bytes an offer in Python
(280 with its line digest, and 110 more for the map of line digests), and the amount seen
under each key of the crawl about 140 more. Here (docs/ingest.md, "Memory"):

* an offer's identity key is held as its **key digest**, 16 bytes of blake2b
  (:func:`key_digest`), numbered in a :class:`DigestTable` (open addressing over arrays:
  no object per entry; 24-32 bytes a key with its slots);
* what decides whether a record leaves its offer unchanged (canonical amount, currency,
  attributes fingerprint and status: the text the diff compared before) is held as 16
  bytes of blake2b of that text (:func:`same_digest`); the offer id, whether it is active,
  its provider and what the crawl has seen of it (the first amount, and a mark) as
  numbers: about 36 bytes. An offer with a line digest that a reader may skip adds the
  digest in a table of its own, its row and its amount: 36-44 bytes;
* a key of the crawl that no current offer has is held in :class:`SeenKeys` (its digest
  and the amount first seen: 32-40 bytes);
* an offer that is not unchanged (changed, reopened, updated in place, withdrawn: the few)
  has its full state read back from the database by its id (:meth:`CurrentState.read`).

Collisions. Two different keys with one digest, or an offer's stored and expected state
texts with one digest, need two different inputs with the same 128-bit blake2b output: a
2^-128 chance per pair, about 2^-88 for a million stored keys against a million crawled
ones (and 2^-108 for the states of a million offers compared), and a collision made on
purpose costs about 2^64 hash evaluations (the same argument as the line digests of
:mod:`service.catalog.lines`, which are used as they are). The amounts the duplicate rule
compares are held exactly (:func:`amount_number`).
"""

from __future__ import annotations

import queue
import struct
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from functools import partial
from hashlib import blake2b
from itertools import accumulate, compress, islice, repeat
from operator import and_, itemgetter
from typing import Any

from service.catalog.columns import ACTIVE, Key

DIGEST_BYTES = 16
_KEY_PERSON = b"gpuatlas-key-1"
_STATE_PERSON = b"gpuatlas-state-1"
_pair: Callable[[bytes], tuple[int, int]] = struct.Struct("<QQ").unpack  # type: ignore[assignment]

Pair = tuple[int, int]
"""A 16-byte digest as two 64-bit numbers (how the tables hold and compare it)."""


_key_hasher = partial(blake2b, digest_size=DIGEST_BYTES, person=_KEY_PERSON)
_same_hasher = partial(blake2b, digest_size=DIGEST_BYTES, person=_STATE_PERSON)
"""(A partial: blake2b's keyword arguments parsed at each call cost three times the hash.)"""


def key_digest(key: Key) -> Pair:
    """An offer key's digest, as a :data:`Pair`."""
    return _pair(_key_hasher(key.encode()).digest())


def same_digest(state: str) -> bytes:
    """The digest of the compared part of an offer's state: ``amount␟currency␟fingerprint␟
    status`` (canonical amount text, fingerprint empty when unknown)."""
    return _same_hasher(state.encode()).digest()


def amount_number(amount: Decimal) -> int:
    """An amount as a number equal for equal amounts and different for different ones.

    ``hash()`` of a decimal is its exact value modulo the prime 2^61 - 1 (Python's
    numeric hash, never randomized). A valid record's amount is positive, at most 10^8
    with at most 10 decimal places (``schema.records``), so it is ``m / 10^10`` with a
    whole ``m`` below 10^18 < 2^61 - 1: two valid amounts have the same number only when
    they are equal (``20``, ``20.00`` and ``2E+1`` are one amount)."""
    return hash(amount)


_ZERO = (0,)
"""An empty slot (the slot arrays are built by repeating it: no zeroed bytes copied)."""


class DigestTable:
    """A set of 16-byte digests, each numbered by when it was added (0, 1, ...).

    Open addressing with linear probing: ``slots`` holds row + 1 (0: empty), at most half
    full; the digests are two arrays of 64-bit numbers by row. About 24-32 bytes a digest,
    no Python object per entry."""

    __slots__ = ("his", "los", "mask", "slots")

    def __init__(self, expected: int = 0) -> None:
        size = 1024
        while size < 2 * expected:
            size <<= 1
        self.slots = array("I", _ZERO) * size  # no transient copy
        self.mask = size - 1
        self.his = array("Q")
        self.los = array("Q")

    def __len__(self) -> int:
        return len(self.his)

    def find(self, hi: int, lo: int) -> int:
        """The row of the digest (hi, lo), or -1."""
        slots, his, mask = self.slots, self.his, self.mask
        i = hi & mask
        while row := slots[i]:
            if his[row - 1] == hi and self.los[row - 1] == lo:
                return row - 1
            i = (i + 1) & mask
        return -1

    def insert(self, hi: int, lo: int) -> int:
        """The row of the digest (hi, lo) when it is in the table; else it is added, and
        the result is ``-1 - row`` (one probe for both)."""
        slots, his, mask = self.slots, self.his, self.mask
        i = hi & mask
        while row := slots[i]:
            if his[row - 1] == hi and self.los[row - 1] == lo:
                return row - 1
            i = (i + 1) & mask
        row = len(his)
        his.append(hi)
        self.los.append(lo)
        if 2 * (row + 1) > len(slots):
            self._grow()
        else:
            slots[i] = row + 1
        return -1 - row

    def add(self, hi: int, lo: int) -> int:
        """Add a digest not in the table; its row."""
        row = len(self.his)
        self.his.append(hi)
        self.los.append(lo)
        if 2 * (row + 1) > len(self.slots):
            self._grow()
            return row
        slots, mask = self.slots, self.mask
        i = hi & mask
        while slots[i]:
            i = (i + 1) & mask
        slots[i] = row + 1
        return row

    def extend(self, digests: bytes) -> None:
        """Add the 16-byte digests ``digests`` (concatenated), none in the table yet."""
        first = len(self.his)
        pairs = array("Q", digests)
        self.his += pairs[0::2]
        self.los += pairs[1::2]
        if 2 * len(self.his) > len(self.slots):
            self._grow()
            return
        slots, mask = self.slots, self.mask
        for row, hi in enumerate(pairs[0::2], start=first + 1):
            i = hi & mask
            while slots[i]:
                i = (i + 1) & mask
            slots[i] = row

    def _grow(self) -> None:
        size = len(self.slots)
        while size < 2 * len(self.his):
            size <<= 1
        size <<= 1
        slots = array("I", _ZERO) * size  # no transient copy
        mask = size - 1
        for row, hi in enumerate(self.his, start=1):
            i = hi & mask
            while slots[i]:
                i = (i + 1) & mask
            slots[i] = row
        self.slots, self.mask = slots, mask


NOT_SEEN = -1
"""The first amount of an offer the crawl has not seen yet (an amount's number is never
negative)."""
AS_LINE = -2
"""A first amount at or below this is the amount of line number ``AS_LINE - value``'s offer
as stored: a skipped line's amount, computed only when another record of the offer is
compared with it (:meth:`CurrentState.line_amount`)."""


class SeenKeys:
    """The offer keys a crawl has seen, each with the amount first seen under it
    (:func:`amount_number`): what the duplicate rule needs, about 32-40 bytes a key."""

    __slots__ = ("amounts", "table")

    def __init__(self, expected: int = 0) -> None:
        self.table = DigestTable(expected)
        self.amounts = array("q")

    def __len__(self) -> int:
        return len(self.table)

    def find(self, pair: Pair) -> int:
        return self.table.find(*pair)

    def __contains__(self, key: Key) -> bool:
        return self.table.find(*key_digest(key)) >= 0

    def add(self, pair: Pair, amount: int) -> int:
        """The amount first seen under the key ``pair``, or :data:`NOT_SEEN` when it is
        new (then ``amount`` is kept as its first)."""
        row = self.table.insert(*pair)
        if row >= 0:
            return self.amounts[row]
        self.amounts.append(amount)
        return NOT_SEEN


_digests_of = blake2b.digest
_encode = str.encode
_partition = str.partition
_first = itemgetter(0)


class CurrentState:
    """A source's current offers, compactly (see the module's docstring): by row, each
    offer's key digest (:attr:`keys`), the digest of its compared state (:attr:`same`,
    16 bytes a row), its id, whether it is active, its provider (a number into
    :attr:`provider_names`) and, when lines are read, the line digest of each active offer
    that has one, with its amount's text (what a skipped line's record says, read as
    :func:`amount_number` when compared: :meth:`line_amount`).

    What the crawl has seen of these offers is kept here too, by row: the first amount
    seen (:attr:`seen_amounts`, :data:`NOT_SEEN` until then, :data:`AS_LINE` minus the
    line number for a skipped line) and :attr:`marked` (1 once seen, or when the offer is
    not active: what is left 0 at the end is withdrawn).

    ``read``: a function returning the full :class:`~service.catalog.diff.Current` of
    offers by id (the database's rows, read by the ingest's connection)."""

    def __init__(
        self, read: Callable[[list[int]], dict[int, Any]] | None = None, expected: int = 0
    ) -> None:
        self._expected = expected
        """How many offers are coming (the tables are sized for them at once)."""
        self.keys = DigestTable(expected)
        self.same = bytearray()
        self.ids = array("q")
        self.flags = bytearray()
        self.providers = array("H")
        self.provider_names: list[str] = []
        self._provider_numbers: dict[str, int] = {}
        self.lines: DigestTable | None = None
        """The line digests of the active offers that have one, each numbered (a *line
        number*); None when the lines were not read."""
        self.line_rows = array("I")
        """By line number: the row of the offer holding it."""
        self._amount_texts = bytearray()
        self._amount_ends = array("I")
        """By line number: where its offer's amount text ends in :attr:`_amount_texts`
        (the texts one after the other, about 5 bytes each: what the duplicate rule may
        need of a skipped line, rarely; computing every :func:`amount_number` up front
        took 0.13 s of the interpreter's time at 200,000 offers)."""
        self.marked = bytearray()
        self.seen_amounts = array("q")
        self._read = read

    def __len__(self) -> int:
        return len(self.ids)

    def __bool__(self) -> bool:
        return bool(self.ids)

    def add(self, offers: list[str], *, lines: bool) -> None:
        """Offers from their texts, :data:`FIELDS` each, one after the other: provider, key,
        compared state (amount, currency, fingerprint, status, joined by US), offer id,
        status and line digest in hex (or empty)."""
        keys, sames = offers[1::FIELDS], offers[2::FIELDS]
        statuses, hexes = offers[4::FIELDS], offers[5::FIELDS]
        first = len(self.ids)
        self.keys.extend(b"".join(map(_digests_of, map(_key_hasher, map(_encode, keys)))))
        self.same += b"".join(map(_digests_of, map(_same_hasher, map(_encode, sames))))
        self.ids.extend(map(int, offers[3::FIELDS]))
        active = bytes(map(ACTIVE.__eq__, statuses))
        self.flags += active
        self.marked += active.translate(_UNSEEN)
        self.seen_amounts.extend(repeat(NOT_SEEN, len(keys)))
        names = offers[0::FIELDS]
        numbers = self._provider_numbers
        for name in set(names) - numbers.keys():
            numbers[name] = len(self.provider_names)
            self.provider_names.append(name)
        self.providers.extend(map(numbers.__getitem__, names))
        if not lines:
            return
        lined = bytes(map(and_, map(bool, hexes), active))  # active, with a line digest
        if self.lines is None:
            self.lines = DigestTable(self._expected)
        self.lines.extend(bytes.fromhex("".join(compress(hexes, lined))))
        self.line_rows.extend(compress(range(first, first + len(keys)), lined))
        amounts = list(map(_first, map(_partition, compress(sames, lined), repeat("\x1f"))))
        texts = self._amount_texts
        self._amount_ends.extend(islice(accumulate(map(len, amounts), initial=len(texts)), 1, None))
        texts += "".join(amounts).encode("ascii")  # canonical decimal text

    def row(self, pair: Pair) -> int:
        """The row of the offer with key digest ``pair``, or -1."""
        return self.keys.find(*pair)

    def line_number(self, digest: bytes) -> int:
        """The number of line digest ``digest`` if an active offer holds it, or -1."""
        lines = self.lines
        return -1 if lines is None else lines.find(*_pair(digest))

    def line_amount(self, number: int) -> int:
        """The :func:`amount_number` of the amount of line number ``number``'s offer."""
        ends = self._amount_ends
        start = ends[number - 1] if number else 0
        return amount_number(Decimal(self._amount_texts[start : ends[number]].decode()))

    def line_row(self, digest: bytes) -> int:
        """The row of the active offer holding line digest ``digest``, or -1."""
        found = self.line_number(digest)
        return -1 if found < 0 else self.line_rows[found]

    def unchanged(self, row: int, same: bytes) -> bool:
        """Whether the offer at ``row`` has the compared state whose digest is ``same``."""
        start = row * DIGEST_BYTES
        return self.same[start : start + DIGEST_BYTES] == same

    def pair(self, row: int) -> Pair:
        keys = self.keys
        return keys.his[row], keys.los[row]

    def read(self, ids: list[int]) -> dict[int, Any]:
        """The full current state of the offers ``ids`` (offer id -> Current)."""
        assert self._read is not None
        return self._read(ids)

    def unmark(self) -> None:
        """Forget what a pass over the crawl has seen (a second pass starts afresh)."""
        self.marked = bytearray(self.flags.translate(_UNSEEN))
        self.seen_amounts = array("q", repeat(NOT_SEEN, len(self.ids)))

    def unmarked(self, protected: Iterable[Key]) -> Iterator[int]:
        """The rows of the active offers the crawl has not seen, except ``protected``."""
        spared = {key_digest(key) for key in protected}
        find = self.marked.find
        row = find(0)
        while row >= 0:
            if not spared or self.pair(row) not in spared:
                yield row
            row = find(0, row + 1)


FIELDS = 6
"""Texts per offer handed to :meth:`CurrentState.add`."""
_UNSEEN = bytes(0 if active else 1 for active in range(256))
"""Whether an offer is active -> its mark before the crawl is read (only an active one can
be withdrawn)."""


def folded(chunks: Iterator[str], fold: Callable[[list[str]], None]) -> None:
    """``fold(chunk.split(RECORD_SEP))`` for each of ``chunks``, in order, on a thread of its
    own while this one produces the next chunk (at most one waits between them).

    For a producer that mostly waits on the database without the GIL: the two overlap.
    An error of either side stops both and is raised here once the thread has ended: the
    fold's first error when there is one, else the reading's."""
    waiting: queue.Queue[Any] = queue.Queue(maxsize=1)
    failed: list[BaseException] = []

    def consume() -> None:
        while (chunk := waiting.get()) is not _DONE:
            if failed:
                continue  # drained: the producer stops at its next chunk
            try:
                fold(chunk.split(RECORD_SEP))
            except BaseException as exc:  # raised on the producer's thread
                failed.append(exc)

    worker = threading.Thread(target=consume, name="gpuatlas-state", daemon=True)
    worker.start()
    try:
        for chunk in chunks:
            if failed:
                break
            waiting.put(chunk)
    finally:
        waiting.put(_DONE)
        worker.join()
        if failed:  # the fold's error wins (a reading's error, if any, is its context)
            raise failed[0]


RECORD_SEP = "\x1e"
"""Between an offer's key and state (``service.catalog.diff.read_current``), between the
texts of an offer and between offers (``load_current``'s chunks)."""
_DONE: Any = object()


class StateHandle:
    """The current state, handed by the ingest (once it holds the lock and has read it) to
    the thread validating the crawl, which waits for it before it judges the first batch's
    keys (their validation proper runs meanwhile)."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self.state: CurrentState | None = None

    def open(self, state: CurrentState) -> None:
        self.state = state
        self._ready.set()

    def release(self) -> None:
        """Let a waiting validator go on (the ingest ends before the state is read)."""
        self._ready.set()

    def wait(self) -> CurrentState | None:
        self._ready.wait()
        return self.state
