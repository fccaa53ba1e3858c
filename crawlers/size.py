"""A source may say how many records it is about to hand on (a size hint), before it
hands them on: a peer CSV knows its offers once its first pass has read the file
(``crawlers.platforms.skypilot.collapsed``).

The crawl's reader listens on the thread that reads the records
(``service.crawl.records.CrawlRecords``): a large load learns from it, at its first batch,
that it will add enough rows to rebuild its indexes then (``service.catalog.writer``). A
hint only: nothing is decided from it but when to rebuild, and a source that says nothing
is read as before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

_local = threading.local()


def announce(records: int) -> None:
    """Say that ``records`` more records are coming (heard by the reader listening on this
    thread, if any)."""
    heard: list[int] | None = getattr(_local, "heard", None)
    if heard is not None:
        heard.append(records)


def heard_while(items: Iterable[T], heard: list[int]) -> Iterator[T]:
    """``items``, with what their sources announce while each is made (on this thread)
    added to ``heard``."""
    iterator = iter(items)
    while True:
        outer = getattr(_local, "heard", None)
        _local.heard = heard
        try:
            item = next(iterator)
        except StopIteration:
            return
        finally:
            _local.heard = outer
        yield item
