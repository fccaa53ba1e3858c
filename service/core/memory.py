"""The C allocator's settings for the batch commands (glibc on Linux; elsewhere nothing
is changed).

* **One arena.** glibc's ``malloc`` gives each new thread an arena of its own (up to
  eight per core), and memory freed in one arena is reused by that arena only. An
  ingest's threads (the crawl's validation, the payload's compression, the ingest's own)
  each grew an arena to their peak, so the process kept the sum of three peaks. With one
  arena the memory one thread frees is what the next allocation of any thread reuses: a
  5 %-changed re-ingest of 1,000,000 offers peaked at 239 MB instead of 257-261 MB, at
  the same CPU time (docs/benchmarks.md, "One malloc arena").
* **A fixed mmap threshold.** A block of at least ``M_MMAP_THRESHOLD`` bytes is mapped on
  its own and given back to the system when freed. glibc starts at 128 KiB but raises
  the threshold to the size of every mapped block freed, up to 32 MiB: after a crawl's
  first large arrays and joined texts were freed, blocks of up to that size came from the
  heap, which only shrinks from its top, so what they left between live blocks stayed in
  the process. Kept at 128 KiB, a 1,000,000-row peer-CSV crawl peaked at 226 MB instead
  of 270 MB, in the same time (docs/benchmarks.md, "A crawl imports its own source").
"""

from __future__ import annotations

import ctypes
import sys

M_ARENA_MAX = -8
"""``mallopt``'s parameter number for the most arenas (glibc's malloc.h)."""
M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the mmap threshold (glibc's malloc.h)."""
MMAP_THRESHOLD = 128 * 1024
"""Blocks of this many bytes or more are mapped on their own (glibc's starting value,
kept: setting it turns off glibc's raising it)."""


def tune_allocator() -> bool:
    """One arena for every thread and a fixed mmap threshold (see the module's
    docstring). Call it before the process starts threads. True when both applied."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    arena = bool(mallopt(M_ARENA_MAX, 1))
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and arena
