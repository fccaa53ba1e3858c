"""What a crawl hands to ingest and what ingest answers: the raw payloads, the
rejections, the crawl result and the ingest result.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from schema.enums import CrawlStatus
from schema.records import OfferRecord

MAX_STORED_FIELD = 500


@dataclass
class Payload:
    """A raw response body as fetched, kept compressed and content-addressed.

    Large bodies stay on disk (``path``): they are hashed and compressed in chunks."""

    url: str
    body: bytes | None
    fetched_at: datetime
    content_type: str | None = None
    status_code: int | None = None
    path: Path | None = None
    _digest: str | None = field(default=None, repr=False)
    _ahead: Future[bytearray] | None = field(default=None, repr=False, compare=False)
    compressed_ahead: bool = field(default=False, repr=False, compare=False)
    """Whether :func:`compress_ahead` took this payload."""

    def chunks(self) -> Iterator[bytes]:
        if self.path is not None:
            with self.path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    yield chunk
        elif self.body:
            yield self.body

    @property
    def size(self) -> int:
        return self.path.stat().st_size if self.path is not None else len(self.body or b"")

    @property
    def sha256(self) -> str:
        if self._digest is None:
            digest = hashlib.sha256()
            for chunk in self.chunks():
                digest.update(chunk)
            self._digest = digest.hexdigest()
        return self._digest

    def compressing(self) -> bool:
        """Whether the body is being compressed ahead (:func:`compress_ahead`), not done yet."""
        return self._ahead is not None and not self._ahead.done()

    def compressed(self) -> bytes | bytearray:
        """The body, zlib-compressed: what :func:`compress_ahead` made, or made now."""
        ahead, self._ahead = self._ahead, None  # not held past its one use
        if ahead is not None:
            return ahead.result()
        return self._compress()

    def _compress(self) -> bytearray:
        """Compressed into one growing buffer: joining the parts at the end held the
        compressed body twice for a moment (20 MB more at the peak of a 1,000,000-offer
        re-ingest, whose state was being read meanwhile)."""
        compressor = zlib.compressobj(6)
        out = bytearray()
        for chunk in self.chunks():
            out += compressor.compress(chunk)
        out += compressor.flush()
        return out


AHEAD_MIN_BYTES = 1 << 20
"""Payloads from this size on are compressed ahead (:func:`compress_ahead`); a smaller one
is compressed when it is stored (a thread would cost more than it gives)."""


def compress_ahead(payloads: Iterable[Payload]) -> None:
    """Compress the large ``payloads`` on a thread of their own, one after the other, while
    the caller goes on: zlib and the file reads run without the GIL, so on another core.
    :meth:`Payload.compressed` then waits for the result (and raises what the compression
    raised). A 96 MB JSON Lines file takes about 0.45 s of zlib, which the ingest paid on
    its critical path before (docs/ingest.md, "How a large crawl stays fast")."""
    large = [p for p in payloads if not p.compressed_ahead and p.size >= AHEAD_MIN_BYTES]
    if not large:
        return
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuatlas-compress")
    for payload in large:
        payload._ahead = executor.submit(payload._compress)
        payload.compressed_ahead = True
    executor.shutdown(wait=False)  # the thread ends once the queue is done


@dataclass
class Rejection:
    position: int
    reason: str
    record: Mapping[str, Any] | None = None


@dataclass
class CrawlResult:
    """What a crawl hands to ingest: records (validated or raw) plus their provenance.

    Records of a crawl of several payloads carry each one's payload along
    (``service.catalog.validation.SourcedRecords``); otherwise every record comes from the
    one payload (or from none)."""

    source: str
    records: Iterable[OfferRecord | Mapping[str, Any]]
    rejections: list[Rejection] = field(default_factory=list)
    payloads: list[Payload] = field(default_factory=list)
    source_urls: list[str] = field(default_factory=list)
    parser_version: str | None = None
    complete: bool = True
    """False when the crawl may have missed offers: then nothing is withdrawn."""
    trigger: str = "cli"
    log: str | None = None


@dataclass
class IngestResult:
    crawl_run_id: int
    status: CrawlStatus
    reason: str | None = None
    catalog_version: int | None = None
    seen: int = 0
    added: int = 0
    changed: int = 0
    withdrawn: int = 0
    updated: int = 0
    rejected: int = 0
    unmapped: int = 0
    rejections: list[Rejection] = field(default_factory=list)
    skipped: int = 0
    """Lines skipped as unchanged (service.catalog.lines): counted in ``seen`` as the full
    path counts them; not one of the stored :attr:`counts`."""

    @property
    def counts(self) -> dict[str, int]:
        return {
            "seen": self.seen,
            "added": self.added,
            "changed": self.changed,
            "withdrawn": self.withdrawn,
            "updated": self.updated,
            "rejected": self.rejected,
            "unmapped": self.unmapped,
        }


class IngestError(Exception):
    """The ingest could not run at all (e.g. database unreachable)."""


def clip(value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    return value if len(value) <= limit else value[: limit - 1] + "…"


def safe_excerpt(record: Any) -> dict[str, Any] | None:
    """A JSON-safe, size-bounded copy of a rejected input, so nothing is lost for review."""
    if isinstance(record, OfferRecord):
        record = record.model_dump(mode="json")
    if not isinstance(record, Mapping):
        return {"value": clip(repr(record), MAX_STORED_FIELD)}
    excerpt: dict[str, Any] = {}
    for index, (key, value) in enumerate(record.items()):
        if index >= 50:
            excerpt["…"] = f"{len(record) - 50} more fields"
            break
        name = clip(str(key), 100) or ""
        if value is None or isinstance(value, bool | int):
            excerpt[name] = value
        else:
            excerpt[name] = clip(str(value).replace("\x00", "\\x00"), MAX_STORED_FIELD)
    return excerpt
