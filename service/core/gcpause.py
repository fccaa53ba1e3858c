"""Python's cyclic garbage collector: paused around work that builds many long-lived
objects (a crawl's records, an ingest's rows), and settled for a long-running server."""

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


SERVING_THRESHOLD = 50_000
"""Allocations (less deallocations) between two collections of the youngest generation in
a server (Python's default is 700)."""


def settle_for_serving() -> None:
    """Make the collector's pauses short and rare in a long-running server, once its
    application is built: every object alive now (the imported modules, the application and
    its routes, a few hundred thousand objects) is collected once and then frozen (never
    scanned again; reference counting still frees it), and the youngest generation is
    collected every :data:`SERVING_THRESHOLD` allocations instead of 700.

    A full collection walks every tracked object: in the listing benchmark's process
    (640,000 of them, most of them SQLAlchemy's cached compiled statements and the imported
    modules) each took 130-530 ms on this 2-core machine and landed on some request; with
    the start-up frozen and fewer young collections, none ran in 450 requests and the
    collector's time fell from 1.65 s to 0.33 s (docs/benchmarks.md)."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, SERVING_THRESHOLD), middle, old)
