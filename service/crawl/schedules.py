"""Crawl intervals: parsing, configuration overrides, next due runs (pure; no crawlers)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from service.core.config import Settings

INTERVAL_RE = re.compile(r"^(\d+)\s*([smhd])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_interval(value: str) -> int:
    match = INTERVAL_RE.match(value.strip().lower())
    if not match:
        raise ValueError(f"bad schedule {value!r}: use e.g. 10m, 1h, 6h, 1d")
    seconds = int(match.group(1)) * UNIT_SECONDS[match.group(2)]
    if seconds < 10:
        raise ValueError(f"schedule {value!r} is shorter than 10 s")
    return seconds


def check_source_settings(settings: Settings, sources: Iterable[str]) -> None:
    """Raise ValueError when a per-source setting (``GPUATLAS_SCHEDULES``,
    ``GPUATLAS_SOURCE_BASE_URLS``) names a source that is not one of ``sources`` (every
    registered source): a misspelt name would be ignored, and the source crawled on its
    default schedule, at its default URL."""
    known = set(sources)
    problems = []
    for variable, names in (
        ("GPUATLAS_SCHEDULES", settings.schedules),
        ("GPUATLAS_SOURCE_BASE_URLS", settings.source_base_urls),
    ):
        unknown = sorted(set(names) - known)
        if unknown:
            listed = ", ".join(repr(name) for name in unknown)
            problems.append(f"{variable} names unknown sources: {listed}")
    if problems:
        raise ValueError("; ".join(problems) + " (`gpuatlas sources` lists the known ones)")


def intervals(settings: Settings, defaults: Mapping[str, str]) -> dict[str, int]:
    """Source -> interval in seconds; configuration overrides a source's default; "off"
    leaves the source out."""
    result = {}
    for name, default in defaults.items():
        configured = settings.schedules.get(name)
        if configured == "off":
            continue
        result[name] = parse_interval(str(configured or default or "6h"))
    return result


def next_runs(
    settings: Settings, defaults: Mapping[str, str], last_started: Mapping[str, datetime]
) -> dict[str, Any]:
    """Each source's interval (seconds, None when off) and the next run it is due.

    The due time is the last run's start plus the interval (the scheduler adds up to 10 %
    jitter); a source never crawled is due when a scheduler starts."""
    every = intervals(settings, defaults)
    overview: dict[str, Any] = {}
    for name in defaults:
        seconds = every.get(name)
        previous = last_started.get(name)
        due = previous + timedelta(seconds=seconds) if seconds and previous else None
        overview[name] = {"interval_seconds": seconds, "next_run_due": due}
    return overview
