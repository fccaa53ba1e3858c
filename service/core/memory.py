"""The C allocator's arenas, for the batch commands.

glibc's ``malloc`` gives each new thread an arena of its own (up to eight per core), and
memory freed in one arena is reused by that arena only. An ingest's threads (the crawl's
validation, the payload's compression, the ingest's own) each grow an arena to their
peak, so the process keeps the sum of three peaks. With one arena the memory one thread
frees is what the next allocation of any thread reuses: a 5 %-changed re-ingest of
1,000,000 offers peaked at 239 MB instead of 257-261 MB, at the same CPU time
(docs/benchmarks.md, "One malloc arena").
"""

from __future__ import annotations

import ctypes
import sys

M_ARENA_MAX = -8
"""``mallopt``'s parameter number for the most arenas (glibc's malloc.h)."""


def one_malloc_arena() -> bool:
    """Have every thread allocate from the main arena (glibc on Linux; elsewhere nothing
    is changed). Call it before the process starts threads. True when it applied."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, 1))
