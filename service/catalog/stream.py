"""A crawl's records in batches: read and validated on a thread of their own, a batch or
two ahead of the writes, and the diff kept for the alert outbox when it wants one.

Only a batch at a time is held (plus, in :class:`~service.catalog.validation.
StreamValidator`, the amount of each offer seen), so an ingest's memory follows the
batch size and the source's current state, not the size of the crawl.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from operator import itemgetter
from typing import Any

from service.catalog.columns import Key
from service.catalog.diff import Diff
from service.catalog.lines import LineIndex, LineRecords
from service.catalog.results import Rejection
from service.catalog.state import StateHandle
from service.catalog.validation import Batch, SourcedRecords, StreamValidator

BATCH_SIZE = 2_500
"""Records per batch: read, validated, diffed and written together. At most three are
held at once (one validated ahead, one being validated, one being written): 2,500
records a batch keep a 1,000,000-offer first ingest under 250 MB (5,000: 285-292 MB;
three batches of validated records were ~49 MB of it), at the CPU time of 5,000 within
this machine's noise (docs/ingest.md, "Memory"; docs/benchmarks.md, "Batches of 2,500")."""

_END = object()


def expected_records(records: Iterable[Any]) -> int | None:
    """How many records a crawl's ``records`` hold at most, when that is known cheaply: a
    sequence's length, or what ``records.expected()`` answers (a JSON Lines file: its
    lines; a crawl: its sources' counts); None when unknown. A size hint only: the ingest
    uses it to rebuild a table's indexes from a large load's first batch (writer.py)."""
    expected = getattr(records, "expected", None)
    if callable(expected):
        answer = expected()
        return answer if isinstance(answer, int) else None
    if isinstance(records, Sequence):
        return len(records)
    return None


class Batches:
    """The valid records of a crawl with their keys, a batch at a time, in crawl order.

    A thread reads and validates the batches while the caller writes the ones before
    (the database's work and much of the reading run without the GIL); at most one
    validated batch waits. Iterate once; :meth:`close` stops the thread early."""

    def __init__(
        self,
        source: str,
        records: Iterable[Any],
        upstream: Sequence[Rejection],
        protected: Iterable[Key] = (),
        size: int = BATCH_SIZE,
        index: LineIndex | None = None,
        handle: StateHandle | None = None,
    ) -> None:
        self.validator = StreamValidator(source, upstream, protected, index, handle)
        if isinstance(records, LineRecords):  # a rejection names its line
            self.validator.locate = records.line_position
        self._index, self._handle = index, handle
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(records, size), name="gpuatlas-validate", daemon=True
        )
        self._thread.start()

    def _run(self, records: Iterable[Any], size: int) -> None:
        try:
            if self._index is not None and isinstance(records, LineRecords):
                items = records.items(self._index)
            elif isinstance(records, SourcedRecords):
                items = records.sourced()
            else:
                items = iter(records)
            while not self._stop.is_set():
                chunk = list(islice(items, size))
                if not chunk:
                    break
                self._put(self.validator.batch(chunk))
            self._put(_END)
        except BaseException as exc:  # handed to the caller's thread, raised there
            self._put(exc)

    def _put(self, item: Any) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def __iter__(self) -> Iterator[Batch]:
        while True:
            item = self._queue.get()
            if item is _END:
                self._thread.join()
                return
            if isinstance(item, BaseException):
                self._thread.join()
                raise item
            yield item

    def close(self) -> None:
        self._stop.set()
        if self._index is not None:
            self._index.release()  # a reader still waiting for it goes on, to stop
        if self._handle is not None:
            self._handle.release()  # and so does a validator waiting for the state
        self._thread.join()


class DiffBuffer:
    """The batches' diffs and observation rows gathered into the one diff of the ingest,
    in the order a whole-crawl diff has them (what the alert outbox reads)."""

    def __init__(self) -> None:
        self.diff = Diff()
        self._new: list[tuple[Key, tuple[Any, ...]]] = []
        self._changed: list[tuple[Any, ...]] = []
        self._reopened: list[tuple[Any, ...]] = []

    def add(self, diff: Diff, rows: list[tuple[Any, ...]]) -> None:
        """One batch's diff and the observation rows its write inserted (added offers in
        key order, then changed, then reopened ones)."""
        added, changed = len(diff.new), len(diff.changed)
        self._new += [(key, row) for (key, *_), row in zip(diff.in_key_order, rows, strict=False)]
        self._changed += rows[added : added + changed]
        self._reopened += rows[added + changed :]
        whole = self.diff
        whole.new += diff.new
        whole.providers |= diff.providers
        whole.changed += diff.changed
        whole.reopened += diff.reopened
        whole.touched += diff.touched
        whole.withdrawn += diff.withdrawn

    def observations(self) -> list[tuple[Any, ...]]:
        """Every observation row, as one writer of the whole diff lists them."""
        new = [row for _, row in sorted(self._new, key=itemgetter(0))]
        return new + self._changed + self._reopened
