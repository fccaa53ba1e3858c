"""A crawl's records each tied to one of its payloads (pages) by sha256, the way a crawl
of several payloads hands them to the ingest (``service.catalog.validation.
SourcedRecords``): record ``i`` to ``digests[i % len(digests)]``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from service.catalog.validation import Sourced


class PagedRecords:
    def __init__(self, records: Sequence[Any], digests: Sequence[str]) -> None:
        self.records, self.digests = records, digests

    def __iter__(self) -> Iterator[Any]:
        return iter(self.records)

    def sourced(self) -> Iterator[Sourced]:
        digests = self.digests
        return (Sourced(r, digests[i % len(digests)]) for i, r in enumerate(self.records))
