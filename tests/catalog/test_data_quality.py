"""The data is the product: every GPU name the project's sources produce resolves.

The seeded catalog (every bundled fixture replayed, as `gpuatlas seed` does) and every
real capture in ../shared/realdata are read through their sources; an offer without a
GPU model fails the test, naming the raw name and source, unless it is one of the few
documented below (also in docs/data-quality.md) with the reason it cannot resolve.
And a reference load re-reads stored offers, so a name resolves without a crawl.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, func, select

from schema.crawl import UnmappedName
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.db import make_engine
from service.crawl.run import crawl_source
from service.crawl.seed import seed_catalog
from tests.support.factories import OFFER, record

UNMAPPED = UnmappedName.__table__  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Engine]:
    path = tmp_path_factory.mktemp("seeded") / "seed.db"
    shutil.copy(sqlite_template, path)
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    seed_catalog(engine, Settings(database_url=url, environment="test", _env_file=None))  # type: ignore[call-arg]
    yield engine
    engine.dispose()


def _unresolved(engine: Engine) -> dict[tuple[str, str], int]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(OFFER.c.source, OFFER.c.gpu_name_raw, func.count())
            .where(OFFER.c.status == "active", OFFER.c.gpu_slug.is_(None))
            .group_by(OFFER.c.source, OFFER.c.gpu_name_raw)
        ).all()
    return {(source, str(raw)): n for source, raw, n in rows}


def test_seeded_catalog_resolves_every_gpu_name(seeded: Engine) -> None:
    unresolved = _unresolved(seeded)
    assert not unresolved, f"GPU names that do not resolve (source, name): offers {unresolved}"
    with seeded.connect() as conn:
        active = conn.execute(
            select(func.count()).select_from(OFFER).where(OFFER.c.status == "active")
        ).scalar_one()
    assert active > 5000


def test_seeded_catalog_marks_inferred_models(seeded: Engine) -> None:
    with seeded.connect() as conn:
        inferred = dict(
            conn.execute(
                select(OFFER.c.gpu_name_raw, OFFER.c.gpu_slug).where(OFFER.c.gpu_inferred)
            ).all()
        )
        stated = conn.execute(
            select(func.count())
            .select_from(OFFER)
            .where(OFFER.c.gpu_name_raw == "H100 SXM5 80GB", OFFER.c.gpu_inferred)
        ).scalar_one()
    assert inferred, "no offer was resolved by a family default"
    assert all(slug for slug in inferred.values())
    assert stated == 0


REALDATA_SOURCES = {
    "paperspace/skypilot-catalog-v6-paperspace-vms.csv": "skypilot:paperspace",
    "scaleway/skypilot-catalog-v6-scaleway-vms.csv": "skypilot:scaleway",
    "gcp/cloudbilling-skus-page-a100-a2-excerpt-opencost.json": "gcp",
    "html/lambda/lambda-ai-pricing-wayback-20260109.html": "lambda-web",
    "html/nebius/nebius-prices-wayback-20260712.html": "nebius-web",
    "html/digitalocean/digitalocean-gpu-droplets-pricing-wayback-20250707.html": (
        "digitalocean-web"
    ),
}


def test_realdata_gpu_names_resolve(engine: Engine, settings: Settings, realdata: Path) -> None:
    load_reference(engine, REFERENCE_DIR)
    for file, source in REALDATA_SOURCES.items():
        report = crawl_source(engine, settings, source, from_files=[realdata / file])
        assert report.label == "ok", (file, report)
        assert report.counts["added"] > 0, file
    unresolved = _unresolved(engine)
    assert not unresolved, f"real captures' GPU names that do not resolve: {unresolved}"


def _reference_with(tmp_path: Path, model: dict[str, object]) -> Path:
    folder = tmp_path / "ref"
    shutil.copytree(REFERENCE_DIR, folder)
    data = yaml.safe_load((folder / "gpus.yaml").read_text())
    data["gpus"].append(model)
    (folder / "gpus.yaml").write_text(yaml.safe_dump(data, allow_unicode=True))
    return folder


def test_reference_load_reresolves_stored_offers(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    load_reference(engine, REFERENCE_DIR)
    unknown = record(0, sku="zeta", gpu_name_raw="Zeta Z9 64GB")
    inferred = record(1, sku="a100", gpu_name_raw="A100")
    ingest(engine, settings, CrawlResult(source="acme", records=[unknown, inferred]))  # type: ignore[arg-type]
    with engine.connect() as conn:
        rows = {r.sku: r for r in conn.execute(select(OFFER))}
        reported = set(conn.execute(select(UNMAPPED.c.value)).scalars())
    assert rows["zeta"].gpu_slug is None and "Zeta Z9 64GB" in reported
    assert (rows["a100"].gpu_slug, rows["a100"].gpu_inferred) == ("nvidia-a100-sxm-40gb", True)

    folder = _reference_with(
        tmp_path,
        {
            "slug": "zeta-z9-64gb",
            "vendor": "nvidia",
            "name": "Z9 64GB",
            "family": "z9",
            "memory_gb": 64,
            "source": "https://example.org/z9",
            "checked": "2026-12-01",
        },
    )
    report = load_reference(engine, folder)
    assert report.changed["offer_gpus"] == 1
    assert report.changed["unmapped_cleared"] >= 1
    with engine.connect() as conn:
        rows = {r.sku: r for r in conn.execute(select(OFFER))}
        reported = set(conn.execute(select(UNMAPPED.c.value)).scalars())
    assert (rows["zeta"].gpu_slug, rows["zeta"].gpu_inferred) == ("zeta-z9-64gb", False)
    assert "Zeta Z9 64GB" not in reported
    assert rows["a100"].gpu_slug == "nvidia-a100-sxm-40gb"  # untouched
    assert load_reference(engine, folder).changed["offer_gpus"] == 0  # idempotent
