"""Every source, found by scanning ``crawlers.providers`` (one module per source)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Any

from crawlers import providers
from crawlers.base import ApiSource


def _is_source(obj: Any) -> bool:
    return (
        isinstance(obj, type)
        and obj.__dict__.get("name") is not None
        and (issubclass(obj, ApiSource) or getattr(obj, "is_gpuatlas_spider", False))
    )


@cache
def all_sources() -> dict[str, type]:
    """Source name -> class (ApiSource subclass or Scrapy spider class)."""
    found: dict[str, type] = {}
    for module_info in sorted(pkgutil.iter_modules(providers.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{providers.__name__}.{module_info.name}")
        for obj in vars(module).values():
            if _is_source(obj) and obj.__module__ == module.__name__:
                name = obj.__dict__["name"]
                if name in found and found[name] is not obj:
                    raise RuntimeError(f"two sources named {name!r}")
                found[name] = obj
        for obj in getattr(module, "SOURCES", ()):
            found[obj.name] = obj
    return dict(sorted(found.items()))


def get_source(name: str) -> type:
    sources = all_sources()
    if name not in sources:
        known = ", ".join(sources) or "none"
        raise KeyError(f"unknown source {name!r} (known: {known})")
    return sources[name]
