"""The source registry: a crawl of one source imports that source's module only, and
finds exactly the class the full scan finds."""

from __future__ import annotations

import subprocess
import sys

import pytest

from crawlers.registry import (
    all_sources,
    conventional_module,
    find_source,
    get_source,
    provider_modules,
    sources_in,
)

AGAINST_THE_CONVENTION = {"lambda"}
"""Sources whose module their name does not point to (``lambda`` is a Python keyword: its
module is ``lambda_api``); found by the full scan."""


def test_every_source_is_found_as_the_full_scan_finds_it() -> None:
    sources = all_sources()
    assert len(sources) > 50
    for name, cls in sources.items():
        assert find_source(name) is cls
        assert get_source(name) is cls


def test_every_source_but_the_listed_ones_is_in_the_module_its_name_points_to() -> None:
    against = set()
    for name, cls in all_sources().items():
        stem = conventional_module(name)
        if stem is None or sources_in(stem).get(name) is not cls:
            against.add(name)
    assert against == AGAINST_THE_CONVENTION


def test_the_convention_reads_the_part_before_the_colon_with_underscores() -> None:
    assert conventional_module("gpuhunt:gcp") == "gpuhunt"
    assert conventional_module("skypilot:aws") == "skypilot"
    assert conventional_module("aws-china") == "aws_china"
    assert conventional_module("runpod-serverless") == "runpod_serverless"
    assert conventional_module("lambda") is None  # no such module: the full scan finds it
    assert "lambda_api" in provider_modules()


@pytest.mark.parametrize(
    "name",
    [
        "no-such-source",
        "gpuhunt:no-such-cloud",  # the module exists, the source does not
        "GPUHUNT:gcp",  # names are lower case
        "../registry",
        "crawlers.registry",
        "gpuhunt:gcp:extra",
        "gpuhunt\x00:gcp",
        "",
        ":",
        "a" * 10_000,
        "__init__",
        "base",
    ],
)
def test_an_unknown_or_hostile_name_is_unknown(name: str) -> None:
    assert find_source(name) is None
    with pytest.raises(KeyError, match="unknown source"):
        get_source(name)


def _imported_after(code: str) -> set[str]:
    """The top-level packages imported by ``code`` in a fresh interpreter."""
    probe = (
        f"import sys\n{code}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return set(done.stdout.split())


HEAVY = {"scrapy", "twisted", "lxml", "OpenSSL", "cryptography"}


def test_finding_an_api_source_imports_no_other_provider_nor_scrapy() -> None:
    imported = _imported_after(
        "from crawlers.registry import get_source\n"
        "assert get_source('gpuhunt:gcp').name == 'gpuhunt:gcp'\n"
        "assert get_source('aws').name == 'aws'"
    )
    assert not imported & HEAVY, imported & HEAVY


def test_a_spider_is_found_with_scrapy_and_the_full_scan_imports_everything() -> None:
    assert HEAVY & _imported_after(
        "from crawlers.registry import get_source\nget_source('lambda-web')"
    )
    assert "scrapy" in _imported_after(
        "from crawlers.registry import get_source\nget_source('lambda')"
    )


def test_two_classes_of_one_name_in_a_module_are_refused() -> None:
    from types import ModuleType

    from crawlers.base import ApiSource
    from crawlers.registry import _sources_of

    module = ModuleType("crawlers.providers.twins")
    first = type("First", (ApiSource,), {"name": "twins", "__module__": module.__name__})
    second = type("Second", (ApiSource,), {"name": "twins", "__module__": module.__name__})
    module.First, module.Second = first, second  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="two sources named 'twins'"):
        _sources_of(module)
    del module.Second  # type: ignore[attr-defined]
    assert _sources_of(module) == {"twins": first}
