"""Pausing Python's cyclic garbage collector around work that builds many long-lived
objects (a crawl's records, an ingest's rows)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_gc_pauses() -> Iterator[None]:
    """Pause the cyclic garbage collector for the body.

    Parsing or ingesting a large crawl allocates hundreds of thousands of small objects
    that live until it ends (records, keys, rows); each full collection would walk all of
    them again, which cost a third of the time of a large re-crawl's ingest and of
    validating 200,000 parsed records. Reference counting still frees everything as
    usual; only reference cycles wait until the body is over. Nested or concurrent pauses
    are harmless: the collector is turned back on by the pause that turned it off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
