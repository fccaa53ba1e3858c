"""The design's walls and docs/architecture.md's drawing: schema imports neither crawlers
nor service; crawlers never import service nor a database library; the query API never
imports crawlers (it reads source metadata from its table); every import between packages
is an arrow of the drawing; no two modules import each other, directly or through others."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable

import pytest
from sqlalchemy import Engine

from service.crawl.sources import list_sources, sync_sources
from tests.conftest import ROOT
from tests.support import imports

PROBE = """
import sys
{imports}
bad = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})
print(",".join(bad))
"""


def imported(imports: str, forbidden: set[str]) -> list[str]:
    code = PROBE.format(imports=imports, forbidden=forbidden)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    return [m for m in out.split(",") if m]


@pytest.mark.parametrize(
    ("imports", "forbidden"),
    [
        ("import schema, schema.api, schema.records", {"crawlers", "service"}),
        ("import crawlers.registry, crawlers.pipeline, crawlers.http", {"service"}),
        (
            "from service.api.main import create_app\n"
            "from service.core.config import Settings\n"
            "create_app(Settings(scheduler_enabled=False, _env_file=None))",
            {"crawlers", "scrapy"},
        ),
    ],
)
def test_walls_hold(imports: str, forbidden: set[str]) -> None:
    assert imported(imports, forbidden) == []


def test_source_metadata_is_synced_from_the_registry(engine: Engine) -> None:
    from crawlers.registry import all_sources

    assert sync_sources(engine) == len(all_sources())
    assert sync_sources(engine) == len(all_sources())  # idempotent
    with engine.connect() as conn:
        known = list_sources(conn)
    assert set(known) == set(all_sources())
    assert known["aws"]["provider"] == "aws" and known["ecb"]["kind"] == "fx"


# --- the drawing (docs/architecture.md) and the static walls ---------------------------

DRAWING = ROOT / "docs" / "architecture.md"
DATABASE_LIBRARIES = {"sqlalchemy", "sqlmodel", "psycopg", "psycopg2", "sqlite3", "alembic"}
ROW = re.compile(r"^\|\s*`(?P<package>[a-z_.]+)`\s*\|[^|]*\|(?P<allowed>[^|]*)\|\s*$")


@pytest.fixture(scope="module")
def graph() -> imports.Graph:
    return imports.build(ROOT)


def drawing() -> dict[str, set[str] | None]:
    """Package -> the packages it may import (None: any), from the table in the doc."""
    allowed: dict[str, set[str] | None] = {}
    for line in DRAWING.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            cell = match["allowed"]
            allowed[match["package"]] = (
                None if "everything" in cell else set(re.findall(r"`([a-z_.]+)`", cell))
            )
    return allowed


def package_of(module: str, packages: Iterable[str]) -> str:
    """The longest drawn package that holds ``module``."""
    holders = [p for p in packages if module == p or module.startswith(p + ".")]
    assert holders, f"{module} is in no package of docs/architecture.md"
    return max(holders, key=len)


def test_the_drawing_names_every_package(graph: imports.Graph) -> None:
    drawn = drawing()
    assert {"schema", "crawlers", "service.catalog", "service.query", "service.crawl"} <= set(drawn)
    for module in graph.modules:
        if module != "service":
            package_of(module, drawn)
    for package, allowed in drawn.items():
        assert allowed is None or allowed <= set(drawn), f"{package} may import an undrawn package"


def test_every_import_is_an_arrow_of_the_drawing(graph: imports.Graph) -> None:
    drawn = drawing()
    wrong = []
    for module, targets in graph.edges.items():
        if module == "service":
            continue
        mine = package_of(module, drawn)
        allowed = drawn[mine]
        for target in targets:
            theirs = package_of(target, drawn)
            if theirs in {mine, "schema"} or allowed is None or theirs in allowed:
                continue
            wrong.append(f"{module} -> {target} ({mine} may not import {theirs})")
    assert wrong == []


def test_no_import_circles(graph: imports.Graph) -> None:
    assert imports.cycles(graph.edges) == []


def test_the_circle_finder_finds_circles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert imports.cycles(edges) == [["a", "b", "c"]]


def test_crawlers_never_touch_a_database(graph: imports.Graph) -> None:
    touching = {
        module: sorted(graph.external[module] & DATABASE_LIBRARIES)
        for module in graph.modules
        if module.startswith("crawlers") and graph.external[module] & DATABASE_LIBRARIES
    }
    assert touching == {}


def test_the_http_face_never_loads_a_crawler(graph: imports.Graph) -> None:
    """What the API and the pages import at module level, followed all the way down."""
    faces = [m for m in graph.modules if m.startswith(("service.api", "service.web"))]
    loaded = imports.reachable(graph.eager, faces)
    assert sorted(m for m in loaded if m.split(".")[0] == "crawlers") == []
