"""OfferRecords as JSON Lines: read a file (bad lines rejected, never fatal) and ingest it,
a batch of lines at a time."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import chain, repeat
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from sqlalchemy import Engine

from schema.enums import CrawlStatus
from service.catalog.ingest import Progress, ingest
from service.catalog.lines import Fresh, LineIndex, line_digest, parse_line
from service.catalog.results import CrawlResult, IngestResult, Payload, Rejection
from service.catalog.runs import finish_crawl_run, start_crawl_run
from service.catalog.unchanged import confirm_unchanged
from service.core.config import Settings

MAX_LINE_BYTES = 1 << 20
READ_AHEAD = 20_000
"""Lines read and digested while the source's state is being read (about 10 MB of lines
of 500 bytes)."""
END: Any = object()


class JsonlRecords:
    """A JSON Lines file's records: each line's object (``source`` filled in when absent),
    read afresh, a line at a time, each time it is iterated; one rejection per bad line in
    :attr:`rejections` (refilled by each reading). A line longer than
    :data:`MAX_LINE_BYTES` is rejected without being held in memory."""

    def __init__(self, path: Path, source: str) -> None:
        self.path, self.source = path, source
        self.rejections: list[Rejection] = []
        self._skipped_at = array("q")
        self._skipped_before = array("q")
        """The lines a reading handed nothing on for (blank, too long, invalid JSON), as
        runs: before the item numbered ``_skipped_at[k]``, ``_skipped_before[k]`` lines
        in all were skipped (a run per item at most: see :meth:`line_position`)."""

    def __iter__(self) -> Iterator[Any]:
        return self.items()

    def expected(self) -> int:
        """The file's lines (a size hint: blank, unreadable and duplicate lines count),
        counted in 1 MiB reads: about 0.05 s for 100 MB in the page cache."""
        lines, last = 0, b"\n"
        with self.path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        return lines + (last != b"\n")

    def items(self, index: LineIndex | None = None) -> Iterator[Any]:
        """Each line's value; with ``index`` (once it is open), each line as
        :data:`~service.catalog.lines.Known` when an active offer holds its digest, else
        as :class:`~service.catalog.lines.Fresh` (see :mod:`service.catalog.lines`).

        While the index is being read (the source's state: the database's steps, which
        hold no interpreter lock, and their folding), up to :data:`READ_AHEAD` lines are
        read and digested ahead."""
        self.rejections.clear()
        del self._skipped_at[:], self._skipped_before[:]
        reject, source, skip = self.rejections.append, self.source, self._skip
        with self.path.open("rb") as handle:
            raw = _lines(handle)
            lines: Iterator[Any] = zip(raw, repeat(None))
            line_number = None
            if index is not None:
                lines = _digested(raw, index)
                line_number = index.wait()
            for number, (line, digest) in enumerate(lines, start=1):
                position = number - 1
                if line is None:
                    reject(
                        Rejection(position, f"line {number}: longer than {MAX_LINE_BYTES} bytes")
                    )
                    skip(position)
                    continue
                if not line.strip():
                    skip(position)
                    continue
                if line_number is not None:
                    known = line_number(digest)
                    if known >= 0:
                        yield (known, line)  # Known
                        continue
                try:
                    value = parse_line(line, source)
                except orjson.JSONDecodeError as exc:
                    reject(Rejection(position, f"line {number}: invalid JSON ({exc})"))
                    skip(position)
                    continue
                yield value if digest is None else Fresh(value, digest)

    def _skip(self, line: int) -> None:
        """Line ``line`` (0-based) hands nothing on."""
        before = self._skipped_before[-1] if self._skipped_before else 0
        item = line - before  # the number of the next item handed on
        if self._skipped_at and self._skipped_at[-1] == item:
            self._skipped_before[-1] += 1
        else:
            self._skipped_at.append(item)
            self._skipped_before.append(before + 1)

    def line_position(self, item: int) -> int:
        """The line (0-based) of the ``item``-th item the last reading handed on (a
        record's position in the validation's numbering), past the lines it skipped."""
        runs = bisect_right(self._skipped_at, item)
        return item + (self._skipped_before[runs - 1] if runs else 0)


def _digested(lines: Iterator[bytes | None], index: LineIndex) -> Iterator[Any]:
    """Each line of ``lines`` with its digest (None for a line too long). The first ones
    are read and digested now, until ``index`` opens (up to :data:`READ_AHEAD`)."""
    ahead: list[tuple[bytes | None, bytes | None]] = []
    while len(ahead) < READ_AHEAD and not index.ready:
        line = next(lines, END)
        if line is END:
            break
        ahead.append((line, None if line is None else line_digest(line)))
    ahead.reverse()
    return chain(_drained(ahead), ((x, None if x is None else line_digest(x)) for x in lines))


def _drained(items: list[Any]) -> Iterator[Any]:
    """The items of ``items`` from last to first, each let go once handed on."""
    while items:
        yield items.pop()


def _lines(handle: BinaryIO) -> Iterator[bytes | None]:
    """Each line of ``handle`` (with its newline), None for a line longer than
    :data:`MAX_LINE_BYTES` (its newline included), which is skipped in chunks."""
    readline = handle.readline
    while line := readline(MAX_LINE_BYTES + 1):
        if len(line) <= MAX_LINE_BYTES:
            yield line
            continue
        while not line.endswith(b"\n") and (line := readline(1 << 20)):
            pass
        yield None


def read_jsonl(path: Path, source: str) -> JsonlRecords:
    """The records of a JSON Lines file, read when iterated (see :class:`JsonlRecords`)."""
    return JsonlRecords(path, source)


def ingest_jsonl(
    engine: Engine,
    settings: Settings,
    path: Path,
    source: str | None = None,
    *,
    complete: bool = True,
    trigger: str = "cli:ingest",
    on_progress: Progress | None = None,
) -> IngestResult:
    """Ingest a JSON Lines file as one crawl of ``source`` (default: the file's stem).

    The file is the crawl's one payload: when it is byte-identical to the last good
    crawl's of ``source`` (wherever either is: the records are the file's lines) and the
    reference data is the same, the run is confirmed without reading the records (see
    :mod:`~service.catalog.unchanged`).
    ``on_progress``: lines read, as :func:`~service.catalog.ingest.ingest` reports them
    (not called for a confirmed file)."""
    source = source or path.stem
    url = path.resolve().as_uri()
    payload = Payload(url, None, datetime.now(UTC), "application/jsonl", path=path)
    run_id = start_crawl_run(engine, source, trigger=trigger)
    try:
        if complete:
            confirmed = confirm_unchanged(
                engine, source, run_id, [payload], [url], None, compare_urls=False
            )
            if confirmed is not None:
                return confirmed
        records = read_jsonl(path, source)
        return ingest(
            engine,
            settings,
            CrawlResult(
                source=source,
                records=records,
                rejections=records.rejections,
                payloads=[payload],
                source_urls=[url],
                complete=complete,
                trigger=trigger,
            ),
            crawl_run_id=run_id,
            on_progress=on_progress,
        )
    except OSError as exc:  # hashed, then read while it is ingested: nothing was written
        finish_crawl_run(engine, run_id, CrawlStatus.failed, "unreadable file", error=str(exc))
        raise
