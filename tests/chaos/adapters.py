"""Every adapter of the provider farm, by source name (the farm serves these sources).

The base classes and the first sources' adapters are in ``farm.py``; the other pricing
pages are in ``farm_web.py`` and the peer catalogs (SkyPilot, gpuhunt) and AWS in
``farm_peers.py``.
"""

from __future__ import annotations

from tests.chaos import farm_peers, farm_web
from tests.chaos.farm import CORE_ADAPTERS, Adapter, HtmlAdapter

ADAPTERS: dict[str, type[Adapter]] = {
    a.name: a for a in (*CORE_ADAPTERS, *farm_web.ADAPTERS, *farm_peers.ADAPTERS)
}
HTML_SOURCES = frozenset(n for n, a in ADAPTERS.items() if issubclass(a, HtmlAdapter))
"""Scrapy spiders: each crawl runs the real Scrapy child process (a slower start)."""
