"""The design's walls: schema imports neither crawlers nor service; crawlers never import
service; the query API never imports crawlers (it reads source metadata from its table)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import Engine

from service.crawl.sources import list_sources, sync_sources
from tests.conftest import ROOT

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
