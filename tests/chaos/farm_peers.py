"""The farm's AWS price list and peer catalogs (SkyPilot clouds, gpuhunt) beyond ``farm.py``."""

from __future__ import annotations

from tests.chaos.farm import Adapter

ADAPTERS: tuple[type[Adapter], ...] = ()
