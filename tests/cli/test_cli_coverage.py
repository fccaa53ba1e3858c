"""``gpuatlas coverage`` on the seeded catalog: the README's matrix is current, the JSON is
the document ``GET /v1/coverage`` serves, and bad input is a usage error."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.core.config import Settings, get_settings
from service.core.db import make_engine
from service.crawl.seed import seed_catalog
from tests.conftest import ROOT
from tests.support.api_client import api_client
from tests.support.cli import run

START = "<!-- coverage:start"
END = "<!-- coverage:end -->"
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
PEER_ONLY = {  # providers seen only through peer catalogs when issue 24 was closed
    "cloudrift",
    "fluidstack",
    "hyperbolic",
    "jarvislabs",
    "mithril",
    "seeweb",
    "shadeform",
}


@pytest.fixture(scope="module")
def seeded_url(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> str:
    path = tmp_path_factory.mktemp("seeded") / "seed.db"
    shutil.copy(sqlite_template, path)
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    seed_catalog(engine, Settings(database_url=url, environment="test", _env_file=None))  # type: ignore[call-arg]
    engine.dispose()
    return url


@pytest.fixture
def seeded_cli(seeded_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", seeded_url)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def readme_matrix() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("-->", text.index(START)) + len("-->")
    return text[start : text.index(END)].strip("\n") + "\n"


def test_readme_shows_the_current_matrix(seeded_cli: CliRunner) -> None:
    code, out, err = run(seeded_cli, "coverage", "--format", "md")
    assert code == 0, err
    # the day of each last good crawl is the day the seed ran: everything else must match
    assert DAY.sub("YYYY-MM-DD", readme_matrix()) == DAY.sub("YYYY-MM-DD", out), (
        "README.md's coverage matrix is stale: regenerate it with "
        "`gpuatlas coverage --format md` on a freshly seeded catalog"
    )


def test_seeded_catalog_covers_every_provider_with_a_source(seeded_cli: CliRunner) -> None:
    code, out, err = run(seeded_cli, "coverage", "--format", "json")
    assert code == 0, err
    document = json.loads(out)
    rows = {r["provider"]: r for r in document["providers"]}
    with_offers = {p for p, r in rows.items() if r["offers"]["total"]}
    with_sources = {p for p, r in rows.items() if r["sources"]}
    assert with_offers == with_sources  # every source's fixtures are seeded
    assert len(with_offers) == document["totals"]["with_offers"] >= 32
    assert {p for p, r in rows.items() if r["prices"] == "peer_only"} >= PEER_ONLY
    for row in rows.values():
        for source in row["sources"]:
            assert source["last_good_crawl"] is not None, source
            assert source["kind"] in ("api", "page", "peer")
            assert source["active_offers"] > 0, source
        if row["offers"]["total"]:
            assert sum(row["offers"]["by_price_kind"].values()) == row["offers"]["total"]
            assert row["gpu_known_share"] is not None and row["gpu_known_share"] > 0.9, row
    assert [s["name"] for s in rows["cudo"]["sources"]] == ["cudo", "skypilot:cudo"]
    assert [s["kind"] for s in rows["lambda"]["sources"]] == ["api", "page", "peer", "peer"]
    assert [s["name"] for s in rows["vultr"]["sources"]] == ["vultr"]
    assert [s["name"] for s in rows["crusoe"]["sources"]] == ["crusoe-web"]
    assert [s["name"] for s in rows["tensordock"]["sources"]] == ["tensordock"]
    assert [s["name"] for s in rows["voltagepark"]["sources"]] == ["voltagepark-web"]
    assert all(r["prices"] == "none" for r in rows.values() if not r["sources"])
    assert (
        rows["aws"]["certifications_known"]
        and "iso27001" in (rows["aws"]["certifications"]["certified"])
    )
    assert rows["cudo"]["certifications"]["reported"] == ["soc2_type2"]
    assert not rows["fluidstack"]["certifications_known"]


def test_the_cli_and_the_api_print_one_document(seeded_cli: CliRunner, seeded_url: str) -> None:
    code, out, _ = run(seeded_cli, "coverage", "--provider", "cudo", "--format", "json")
    assert code == 0
    settings = Settings(database_url=seeded_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    with closing(api_client(settings)) as clients:
        answer = next(clients).get("/v1/coverage", params={"provider": "cudo"})
    assert answer.status_code == 200
    assert answer.json() == json.loads(out)
    code, table, _ = run(seeded_cli, "coverage")
    assert code == 0 and "skypilot:cudo (peer," in table and "peer-only" in table


def test_bad_input_is_a_clear_error(seeded_cli: CliRunner) -> None:
    code, _, err = run(seeded_cli, "coverage", "--format", "xml")
    assert code == 2 and "xml" in err
    code, _, err = run(seeded_cli, "coverage", "--provider", "nobody")
    assert code == 1
    assert err.strip() == "error: provider 'nobody' is not known to the catalog"
