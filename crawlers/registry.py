"""Every source, found by scanning ``crawlers.providers`` (one module per source, or per
family of sources).

A crawl of one source imports only the module its name points to (:func:`find_source`):
importing every provider also imports Scrapy, Twisted, lxml and the TLS stack, about
0.3 s and 33 MB of a process that crawls an API source (docs/benchmarks.md, "A crawl
imports its own source").
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache
from types import ModuleType
from typing import Any

from crawlers import providers
from crawlers.base import ApiSource

_NAME = re.compile(r"[a-z0-9][a-z0-9-]*(?::[a-z0-9][a-z0-9-]*)?")
"""A source name that may follow the module convention (:func:`conventional_module`)."""


def _is_source(obj: Any) -> bool:
    return (
        isinstance(obj, type)
        and obj.__dict__.get("name") is not None
        and (issubclass(obj, ApiSource) or getattr(obj, "is_gpuatlas_spider", False))
    )


@cache
def provider_modules() -> tuple[str, ...]:
    """The names of the modules of ``crawlers.providers`` (listed, not imported)."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(providers.__path__)))


@cache
def sources_in(module_name: str) -> dict[str, type]:
    """Source name -> class of the sources provider module ``module_name`` defines or
    lists in ``SOURCES``; imports that module only."""
    module = importlib.import_module(f"{providers.__name__}.{module_name}")
    return _sources_of(module)


def _sources_of(module: ModuleType) -> dict[str, type]:
    found: dict[str, type] = {}
    for obj in vars(module).values():
        if _is_source(obj) and obj.__module__ == module.__name__:
            name = obj.__dict__["name"]
            if name in found and found[name] is not obj:
                raise RuntimeError(f"two sources named {name!r}")
            found[name] = obj
    for obj in getattr(module, "SOURCES", ()):
        found[obj.name] = obj
    return found


@cache
def all_sources() -> dict[str, type]:
    """Source name -> class (ApiSource subclass or Scrapy spider class), every provider
    module imported. Raises ``RuntimeError`` when two classes share a name."""
    found: dict[str, type] = {}
    for module_name in provider_modules():
        for name, obj in sources_in(module_name).items():
            if name in found and found[name] is not obj:
                raise RuntimeError(f"two sources named {name!r}")
            found[name] = obj
    return dict(sorted(found.items()))


def conventional_module(name: str) -> str | None:
    """The provider module a source's name points to: the part before any ``:``, with
    ``-`` as ``_`` (``gpuhunt:gcp`` → ``gpuhunt``, ``aws-china`` → ``aws_china``), when
    such a module exists; else None."""
    if not _NAME.fullmatch(name):
        return None
    stem = name.split(":", 1)[0].replace("-", "_")
    return stem if stem in provider_modules() else None


def find_source(name: str) -> type | None:
    """The class of source ``name``, or None. Imports only the module its name points to
    (:func:`conventional_module`) when that module holds it; every module otherwise (a
    source named against the convention, such as ``lambda`` in ``lambda_api``, or an
    unknown name)."""
    stem = conventional_module(name)
    if stem is not None:
        found = sources_in(stem).get(name)
        if found is not None:
            return found
    return all_sources().get(name)


def get_source(name: str) -> type:
    """The class of source ``name`` (:func:`find_source`); ``KeyError`` when unknown."""
    found = find_source(name)
    if found is None:
        known = ", ".join(all_sources()) or "none"
        raise KeyError(f"unknown source {name!r} (known: {known})")
    return found
