"""Unchanged lines skipped: a raw line seen before with an offer's current state is not
parsed, validated or diffed again.

An ingest of a JSON Lines file digests each line (:func:`line_digest`). The offer whose
current state a line was last seen with, unchanged, stores that line's digest
(``offer_line``). When the ingest runs with the parser version and the reference
data of the source's last good ingest (:func:`lines_apply`), the same bytes give the same
record, so a line whose digest an active offer holds is that offer, unchanged: the reader
hands it on as :data:`Known` (its key and bytes, not parsed), and the validator counts it
as seen, with the amount the offer has. Every other line takes the full path as
:class:`Fresh` (its parsed value and its digest).

What keeps a stored digest true (docs/ingest.md, "Unchanged lines"):

* it is written only for a line the full path found unchanged, with no unmapped name, so
  what the line gives is what the offer holds (never from a write: a stored amount may be
  rounded);
* a change, an update in place or a reopening clears it, as does a reference load that
  re-resolves the offer (whose next ingest runs with other reference data anyway);
* an ingest with another parser version or other reference data skips nothing and clears
  the source's digests first, then records those of its own unchanged lines;
* it is not written for offers in ``global`` or group regions, which are never skipped
  (their locations are re-derived from what each line states; which regions those are
  is reference data).

The digest is 16 bytes of blake2b: a line of another offer or price taken for a stored one
needs two different lines with one digest, a 2^-128 chance per pair (about 2^-88 for a
million lines against a million stored ones), and a collision made on purpose costs
about 2^64 hash evaluations.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from hashlib import blake2b
from typing import Any, Protocol, runtime_checkable

import orjson
from sqlalchemy import Connection, delete, select

from schema.crawl import CrawlRun
from schema.enums import CrawlStatus
from schema.prices import Offer, OfferLine
from service.catalog.state import CurrentState

OFFER = Offer.__table__  # type: ignore[attr-defined]
LINE = OfferLine.__table__  # type: ignore[attr-defined]
RUN = CrawlRun.__table__  # type: ignore[attr-defined]

BOM = b"\xef\xbb\xbf"
DIGEST_BYTES = 16
PERSON = b"gpuatlas-line-1"
"""Salts the digest; a new value (a change to how a line becomes a record outside the
parser version and the reference data) makes every stored digest unknown."""


def line_digest(line: bytes) -> bytes:
    """A raw line's digest (the last line of a file counts as ending with a newline)."""
    if not line.endswith(b"\n"):
        line += b"\n"
    return blake2b(line, digest_size=DIGEST_BYTES, person=PERSON).digest()


def parse_line(line: bytes, source: str) -> Any:
    """A JSON Lines line's value (``source`` filled in when absent); raises
    ``orjson.JSONDecodeError``. A UTF-8 byte order mark before it (a file saved by a
    Windows editor starts with one) is no part of the JSON."""
    if line.startswith(BOM):
        line = line[len(BOM) :]
    value = orjson.loads(line)
    if isinstance(value, dict):
        value.setdefault("source", source)
    return value


Known = tuple
"""A line whose digest an active offer holds, handed on as the tuple (the digest's line
number in the current state, the line's bytes): that offer, unchanged, not parsed (a tuple: the
cheapest object to build, and one that JSON never parses into)."""


class Fresh:
    """A line read and parsed, with its digest (recorded when it turns out unchanged)."""

    __slots__ = ("digest", "value")

    def __init__(self, value: Any, digest: bytes) -> None:
        self.value, self.digest = value, digest


def read_known(line: bytes, source: str) -> Fresh:
    """A :data:`Known` line read after all (a second record of an offer already seen)."""
    return Fresh(parse_line(line, source), line_digest(line))


class LineIndex:
    """The source's skippable offers by line digest (the current state's line digests,
    :meth:`~service.catalog.state.CurrentState.line_row`), handed by the ingest (once it
    holds the lock and has read the current state) to the thread reading the lines, which
    waits for it."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self.state: CurrentState | None = None
        self.refused = False
        """Whether the stored digests do not hold for this ingest (nothing is skipped, and
        they are forgotten)."""

    def refuse(self) -> None:
        """Let the reader go on, skipping nothing: the stored digests do not hold."""
        self.refused = True
        self._ready.set()

    def open(self, state: CurrentState) -> None:
        """Let the reader go on, skipping the lines whose digest an active offer of
        ``state`` holds."""
        self.state = state
        self._ready.set()

    @property
    def ready(self) -> bool:
        """Whether the index is open (or refused, or released)."""
        return self._ready.is_set()

    def release(self) -> None:
        """Let a waiting reader go on (the ingest ends before opening the index)."""
        self._ready.set()

    def wait(self) -> Callable[[bytes], int]:
        """Once the index is open (or refused): line digest -> its number in the state
        (:meth:`~service.catalog.state.CurrentState.line_number`), or -1."""
        self._ready.wait()
        state = self.state
        return state.line_number if state is not None else _none


def _none(digest: bytes) -> int:
    return -1


@runtime_checkable
class LineRecords(Protocol):
    """Records read from lines, which can be handed on as :class:`Known` and :class:`Fresh`
    (``service.catalog.snapshot.JsonlRecords``)."""

    def items(self, index: LineIndex | None = None) -> Iterator[Any]: ...

    def line_position(self, item: int) -> int:
        """The line of the ``item``-th item the last reading handed on."""
        ...


def lines_apply(
    conn: Connection, source: str, parser_version: str | None, reference_digest: str
) -> bool:
    """Whether stored line digests of ``source`` hold for this ingest: its last good
    ingest (the newest ``ok`` run) had the same parser version and reference data."""
    last = conn.execute(
        select(RUN.c.parser_version, RUN.c.reference_digest)
        .where(RUN.c.source == source, RUN.c.status == CrawlStatus.ok.value)
        .order_by(RUN.c.finished_at.desc(), RUN.c.id.desc())
        .limit(1)
    ).first()
    return last is not None and tuple(last) == (parser_version, reference_digest)


def clear_lines(conn: Connection, source: str) -> None:
    """Forget the source's line digests (they were recorded under another parser version
    or other reference data)."""
    conn.execute(
        delete(LINE).where(LINE.c.offer_id.in_(select(OFFER.c.id).where(OFFER.c.source == source)))
    )


def store_lines(
    conn: Connection, rows: Sequence[tuple[int, bytes | None]], *, added: bool = False
) -> None:
    """Set each (offer id, digest) given, remove those given as (offer id, None).
    ``added``: the offers were added by this ingest, so none has a digest yet: the rows
    are inserted as they are (copied, on PostgreSQL)."""
    if not rows:
        return
    if added:
        _insert_added(conn, rows)
        return
    if conn.dialect.name != "postgresql":
        gone = [(offer_id,) for offer_id, digest in rows if digest is None]
        if gone:
            conn.exec_driver_sql("DELETE FROM offer_line WHERE offer_id = ?", gone)  # type: ignore[arg-type]
        kept = [row for row in rows if row[1] is not None]
        if kept:
            conn.exec_driver_sql(
                "INSERT OR REPLACE INTO offer_line (offer_id, digest) VALUES (?, ?)",
                kept,  # type: ignore[arg-type]
            )
        return
    driver: Any = conn.connection.driver_connection
    with driver.cursor() as cursor:  # COPY, then one statement each way
        cursor.execute(
            "CREATE TEMPORARY TABLE staged_line (offer_id integer, digest bytea) ON COMMIT DROP"
        )
        with cursor.copy("COPY staged_line (offer_id, digest) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(
            "DELETE FROM offer_line AS l USING staged_line AS s "
            "WHERE l.offer_id = s.offer_id AND s.digest IS NULL"
        )
        cursor.execute(
            "INSERT INTO offer_line (offer_id, digest) "
            "SELECT offer_id, digest FROM staged_line WHERE digest IS NOT NULL "
            "ON CONFLICT (offer_id) DO UPDATE SET digest = excluded.digest"
        )
        cursor.execute("DROP TABLE staged_line")


def _insert_added(conn: Connection, rows: Sequence[tuple[int, bytes | None]]) -> None:
    if conn.dialect.name != "postgresql":
        conn.exec_driver_sql(
            "INSERT INTO offer_line (offer_id, digest) VALUES (?, ?)",
            rows,  # type: ignore[arg-type]
        )
        return
    driver: Any = conn.connection.driver_connection
    with (
        driver.cursor() as cursor,
        cursor.copy("COPY offer_line (offer_id, digest) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)
