"""The farm's other pricing pages (Scrapy spiders), beyond those in ``farm.py``."""

from __future__ import annotations

from tests.chaos.farm import Adapter

ADAPTERS: tuple[type[Adapter], ...] = ()
