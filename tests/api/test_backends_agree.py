"""The seeded catalog answers the same on SQLite and on PostgreSQL.

The bundled fixture snapshot (``gpuatlas seed``: every source, 5,800 offers) is loaded into a
fresh SQLite file and a fresh PostgreSQL database (created with ICU's ``en-US`` collation,
as most servers are: tests/support/pg.py). Then every read endpoint without a path
parameter, each GPU's and provider's pages, the exports, and a seeded random mix of
listing queries (filters, sorts and their next pages) are asked of both, and the answers
compared whole, times aside (the two seeds ran seconds apart). Comparing every list
endpoint this way found regions listed in another order on PostgreSQL (migration 0037).
"""

from __future__ import annotations

import difflib
import json
import random
import re
import shutil
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.main import create_app
from service.core.config import Settings
from service.core.db import make_engine
from service.core.migrate import upgrade
from service.crawl.seed import seed_catalog
from tests.conftest import scratch_pg_database

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

MOMENT = re.compile(
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT"
)
"""A moment in time (ISO 8601, to the minute or finer, or an HTTP date): what differs
between the two seeds."""
SKIPPED = {"/healthz", "/readyz", "/metrics"}
"""The process's own state (uptime, counters, each source's age in seconds)."""
SORTS = ("price_per_gpu_hour", "price", "provider", "gpu_count", "price_per_pflop_hour")
MIX = 60
SEED = 20261206


def seeded_client(url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
    engine = make_engine(url)
    try:
        reports = seed_catalog(engine, settings)
        assert all(r.status.value == "ok" for r in reports), [r.label for r in reports]
    finally:
        engine.dispose()
    with TestClient(create_app(settings.model_copy(update={"scheduler_enabled": False}))) as c:
        yield c


@pytest.fixture(scope="module")
def clients(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, TestClient]]:
    path = tmp_path_factory.mktemp("agree") / "gpuatlas.db"
    shutil.copy(sqlite_template, path)
    with scratch_pg_database() as pg_url:
        upgrade(pg_url)
        for lite in seeded_client(f"sqlite:///{path}"):
            for pg in seeded_client(pg_url):
                yield lite, pg


def timeless(text: str) -> str:
    return MOMENT.sub("<time>", text)


def answer(client: TestClient, path: str, params: dict[str, Any] | None = None) -> Any:
    response = client.get(path, params=params)
    kind = response.headers.get("content-type", "")
    body: Any = response.text
    if "json" in kind and not kind.startswith("application/x-ndjson"):
        body = json.loads(timeless(response.text))
    else:
        body = timeless(body)
    return response.status_code, kind, body


def assert_same(lite: TestClient, pg: TestClient, path: str, params: dict[str, Any]) -> Any:
    a, b = answer(lite, path, params), answer(pg, path, params)
    if a != b:
        left = json.dumps(a, indent=1, sort_keys=True, default=str).splitlines()
        right = json.dumps(b, indent=1, sort_keys=True, default=str).splitlines()
        diff = list(difflib.unified_diff(left, right, "sqlite", "postgresql", n=1, lineterm=""))
        pytest.fail(f"{path} {params}: the databases disagree\n" + "\n".join(diff[:40]))
    return a[2]


def test_every_read_endpoint_without_a_parameter(clients: tuple[TestClient, TestClient]) -> None:
    lite, pg = clients
    spec = lite.get("/openapi.json").json()
    paths = [p for p, ops in spec["paths"].items() if "get" in ops and "{" not in p]
    assert len(paths) > 15
    for path in paths:
        if path not in SKIPPED:
            assert_same(lite, pg, path, {})


def test_each_gpu_provider_and_region_page(clients: tuple[TestClient, TestClient]) -> None:
    lite, pg = clients
    gpus = assert_same(lite, pg, "/v1/gpus", {})
    providers = assert_same(lite, pg, "/v1/providers", {})
    assert len(gpus) > 50 and len(providers) > 20
    for gpu in gpus:
        assert_same(lite, pg, f"/v1/gpus/{gpu['slug']}", {})
    for gpu in gpus[::7]:
        assert_same(lite, pg, f"/v1/gpus/{gpu['slug']}/overview", {})
    for provider in providers:
        assert_same(lite, pg, f"/v1/providers/{provider['slug']}", {})
    for country in ("DE", "US", "FR", "JP", "FI"):
        assert_same(lite, pg, "/v1/regions", {"country": country})


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_exports(clients: tuple[TestClient, TestClient], fmt: str) -> None:
    lite, pg = clients
    body = assert_same(lite, pg, "/v1/export", {"format": fmt})
    assert body.count("\n") > 5000


def draw(rng: random.Random, gpus: list[str], providers: list[str]) -> dict[str, Any]:
    sort = rng.choice(SORTS)
    params: dict[str, Any] = {"sort": rng.choice((sort, f"-{sort}")), "limit": rng.choice((5, 50))}
    chosen = {
        "gpu": lambda: rng.choice(gpus),
        "provider": lambda: ",".join(rng.sample(providers, rng.choice((1, 2)))),
        "country": lambda: rng.choice(("DE", "US", "FR", "FI", "JP", "GB")),
        "price_kind": lambda: rng.choice(("on_demand", "spot", "reserved_1y")),
        "min_gpus": lambda: rng.choice(("1", "2", "8")),
        "gdpr": lambda: rng.choice(("eu_eea", "adequacy")),
        "cert": lambda: rng.choice(("iso27001", "soc2_type2")),
        "export_destination": lambda: rng.choice(("CN", "DE")),
        "max_price_per_gpu_hour": lambda: rng.choice(("1", "2.5", "10")),
        "include_peers": lambda: "true",
    }
    for name, value in chosen.items():
        if rng.random() < 0.2:
            params[name] = value()
    return params


def test_a_seeded_mix_of_listings_and_their_next_pages(
    clients: tuple[TestClient, TestClient],
) -> None:
    lite, pg = clients
    gpus = sorted({g["slug"].split("-")[1] for g in lite.get("/v1/gpus").json()})
    providers = [p["slug"] for p in lite.get("/v1/providers").json()]
    rng = random.Random(SEED)
    paged = 0
    for _ in range(MIX):
        params = draw(rng, gpus, providers)
        body = assert_same(lite, pg, "/v1/offers", params)
        if body.get("next_cursor"):
            paged += 1
            assert_same(lite, pg, "/v1/offers", {**params, "cursor": body["next_cursor"]})
        if rng.random() < 0.2:
            wanted = {k: v for k, v in params.items() if k not in ("sort", "limit")}
            assert_same(lite, pg, "/v1/eligible-providers", wanted)
    assert paged > MIX // 4  # the mix reaches second pages


def test_versions_diffs_pinned_listings_offers_and_their_history(
    clients: tuple[TestClient, TestClient],
) -> None:
    lite, pg = clients
    versions = assert_same(lite, pg, "/v1/versions", {"limit": 100})
    ids = sorted(v["id"] for v in versions)
    assert len(ids) > 20
    rng = random.Random(SEED)
    for first, second in rng.sample(list(pairwise(ids)), 8):
        assert_same(lite, pg, "/v1/diff", {"from": first, "to": second})
    assert_same(lite, pg, "/v1/diff", {"from": ids[0], "to": ids[-1], "limit": 50})
    for version in rng.sample(ids, 6):
        sort = rng.choice(SORTS)
        assert_same(lite, pg, "/v1/offers", {"as_of": version, "sort": sort, "limit": 50})
    changes = assert_same(lite, pg, "/v1/changes", {"limit": 100})
    if changes.get("next_cursor"):
        assert_same(lite, pg, "/v1/changes", {"limit": 100, "cursor": changes["next_cursor"]})
    offers = assert_same(lite, pg, "/v1/offers", {"limit": 500})["data"]
    for offer in rng.sample(offers, 25):
        assert_same(lite, pg, f"/v1/offers/{offer['id']}", {})
        assert_same(lite, pg, f"/v1/offers/{offer['id']}/history", {})
        assert_same(lite, pg, f"/v1/offers/{offer['id']}/history", {"resolution": "day"})


def test_the_web_pages(clients: tuple[TestClient, TestClient]) -> None:
    lite, pg = clients
    html = {"Accept": "text/html"}
    for path, params in (
        ("/", {}),
        ("/offers", {}),
        ("/offers", {"gpu": "h100", "gdpr": "eu_eea", "sort": "provider"}),
        ("/gpus/nvidia-h100-sxm-80gb", {}),
        ("/providers/aws", {}),
        ("/providers/coreweave", {}),
    ):
        a = lite.get(path, params=params, headers=html)
        b = pg.get(path, params=params, headers=html)
        assert a.status_code == b.status_code == 200 and "<html" in a.text
        left, right = timeless(a.text).splitlines(), timeless(b.text).splitlines()
        if left != right:
            diff = difflib.unified_diff(left, right, "sqlite", "postgresql", n=1, lineterm="")
            pytest.fail(f"{path} {params}: the pages differ\n" + "\n".join(list(diff)[:40]))
