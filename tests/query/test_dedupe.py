"""Issue 19: one row per real offer (ranked sources, ``also_from``), the quality report, and
human GPU names — through the API, the CLI and the web page, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, update
from typer.testing import CliRunner

from schema.prices import Offer
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.cli.app import app as cli_app
from service.core.config import Settings, get_settings
from service.query.precedence import one_per_identity
from tests.api.test_api_query import page_all
from tests.support.api_client import api_client
from tests.support.factories import record

OFFER = Offer.__table__  # type: ignore[attr-defined]

FIRST, SKY, HUNT = "lambda", "skypilot:lambda", "gpuhunt:lambdalabs"


def lambda_offer(source: str, sku: str, amount: str, **overrides: Any) -> dict[str, Any]:
    base = {
        "provider": "lambda",
        "source": source,
        "sku": sku,
        "region": "us-east-1",
        "country": "US",
        "gpu_name_raw": "H100 SXM",
        "gpu_count": "1",
        "price_kind": "on_demand",
        "unit": "hour",
        "amount": amount,
        "currency": "USD",
    }
    return record(**{**base, **overrides})


def seed(engine: Engine, settings: Settings) -> None:
    """``triple``: all three sources (different prices); ``peers``: the two peers only;
    ``hunt-only``: one peer; ``own-N``: first party only (plus 20 more for paging)."""
    first = [lambda_offer(FIRST, "triple", "2.00")]
    first += [lambda_offer(FIRST, f"own-{i}", f"{1 + i / 10:.2f}") for i in range(20)]
    first.append(lambda_offer(FIRST, "mystery", "0.40", gpu_name_raw="RTX 9999"))
    first.append(lambda_offer(FIRST, "nowhere", "3.00", region="moon-1", country=None))
    sky = [
        lambda_offer(SKY, "triple", "2.10"),
        lambda_offer(SKY, "peers", "1.55"),
        *(lambda_offer(SKY, f"own-{i}", f"{1 + i / 10:.2f}") for i in range(0, 20, 3)),
    ]
    hunt = [
        lambda_offer(HUNT, "triple", "1.90"),
        lambda_offer(HUNT, "peers", "1.50"),
        lambda_offer(HUNT, "hunt-only", "1.45"),
        *(lambda_offer(HUNT, f"own-{i}", f"{1 + i / 10:.2f}") for i in range(1, 20, 4)),
    ]
    for source, rows in ((FIRST, first), (SKY, sky), (HUNT, hunt)):
        result = ingest(engine, settings, CrawlResult(source=source, records=rows))
        assert result.rejected == 0


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    seed(engine, settings)
    yield from api_client(settings)


def by_sku(offers: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for o in offers:
        out.setdefault(o["sku"], []).append(o)
    return out


def test_one_row_per_real_offer_from_the_ranked_source(client: TestClient) -> None:
    default = by_sku(page_all(client, {}, limit=1000))
    (triple,) = default["triple"]
    assert triple["source"] == FIRST and triple["price_per_gpu_hour_usd"] == "2"
    assert [(o["source"], o["price_per_gpu_hour_usd"]) for o in triple["also_from"]] == [
        (SKY, "2.1"),  # disagreeing prices are kept, never averaged
        (HUNT, "1.9"),
    ]
    (peers,) = default["peers"]
    assert peers["source"] == SKY  # SkyPilot ranks before gpuhunt
    assert [o["source"] for o in peers["also_from"]] == [HUNT]
    (hunt_only,) = default["hunt-only"]
    assert hunt_only["source"] == HUNT and hunt_only["also_from"] == []
    assert all(len(rows) == 1 for rows in default.values())

    everything = page_all(client, {"include_peers": "true"}, limit=1000)
    assert sorted(o["source"] for o in by_sku(everything)["triple"]) == sorted([FIRST, SKY, HUNT])
    (sky_triple,) = [o for o in by_sku(everything)["triple"] if o["source"] == SKY]
    assert [o["source"] for o in sky_triple["also_from"]] == [FIRST, HUNT]
    ids = {o["offer_id"] for o in sky_triple["also_from"]}
    assert ids == {o["id"] for o in by_sku(everything)["triple"] if o["source"] != SKY}
    assert _ids(one_per_identity(everything)) == _ids(page_all(client, {}, limit=1000))

    single = client.get(f"/v1/offers/{sky_triple['id']}").json()
    assert single["also_from"] == sky_triple["also_from"]


def _ids(offers: list[dict[str, Any]]) -> list[int]:
    return sorted(o["id"] for o in offers)


@pytest.mark.parametrize("sort", ["price_per_gpu_hour", "-price_per_gpu_hour", "provider"])
def test_paging_over_deduped_rows_has_no_duplicates_and_no_gaps(
    client: TestClient, sort: str
) -> None:
    whole = page_all(client, {"sort": sort}, limit=1000)
    paged = page_all(client, {"sort": sort}, limit=4)
    assert [o["id"] for o in paged] == [o["id"] for o in whole]
    assert len({o["id"] for o in paged}) == len(paged)
    assert len({(o["sku"], o["region"], o["price_kind"]) for o in paged}) == len(paged)
    peers = page_all(client, {"sort": sort, "include_peers": "true"}, limit=5)
    assert len(peers) > len(paged) and len({o["id"] for o in peers}) == len(peers)


def test_eligible_tco_and_export_honour_it(client: TestClient) -> None:
    shown = page_all(client, {}, limit=1000)
    everything = page_all(client, {"include_peers": "true"}, limit=1000)
    eligible = client.get("/v1/eligible-providers").json()["data"]
    assert [(e["provider"], e["offer_count"]) for e in eligible] == [("lambda", len(shown))]
    assert eligible[0]["cheapest"]["sku"] == "mystery"  # 0.40, an unrecognized GPU
    assert eligible[0]["cheapest"]["gpu_name"] is None
    h100 = client.get("/v1/eligible-providers", params={"gpu": "h100"}).json()["data"]
    assert h100[0]["cheapest"]["gpu_name"] == "H100 SXM 80GB"
    peers = client.get("/v1/eligible-providers", params={"include_peers": "true"}).json()
    assert peers["data"][0]["offer_count"] == len(everything)

    for fmt in ("csv", "jsonl"):
        for params, expected in (({}, shown), ({"include_peers": "true"}, everything)):
            response = client.get("/v1/export", params={"format": fmt, **params})
            assert response.status_code == 200, response.text
            if fmt == "csv":
                rows = list(csv.DictReader(io.StringIO(response.text)))
            else:
                rows = [json.loads(line) for line in response.text.splitlines()]
            assert sorted(int(r["id"]) for r in rows) == _ids(expected)

    tco = client.get("/v1/tco", params={"gpu_count": "1"}).json()["data"]
    chosen = {o["offer_id"] for p in tco for o in p["options"]}
    assert chosen and chosen <= {o["id"] for o in shown}


def test_gpu_names_and_inferred_flag_in_offer_json(client: TestClient, engine: Engine) -> None:
    offers = by_sku(page_all(client, {}, limit=1000))
    (triple,) = offers["triple"]
    assert triple["gpu"] == "nvidia-h100-sxm-80gb" and triple["gpu_name"] == "H100 SXM 80GB"
    assert triple["gpu_inferred"] is False
    (mystery,) = offers["mystery"]
    assert mystery["gpu"] is None and mystery["gpu_name"] is None
    assert mystery["gpu_name_raw"] == "RTX 9999"
    with engine.begin() as conn:
        conn.execute(update(OFFER).where(OFFER.c.id == triple["id"]).values(gpu_inferred=True))
    assert client.get(f"/v1/offers/{triple['id']}").json()["gpu_inferred"] is True


def test_quality_report(client: TestClient) -> None:
    response = client.get("/v1/quality")
    assert response.status_code == 200, response.text
    assert response.headers["etag"]
    report = response.json()
    totals = report["totals"]
    active = len(page_all(client, {"include_peers": "true"}, limit=1000))
    assert totals["active_offers"] == active
    assert (totals["without_gpu"], totals["without_country"]) == (1, 1)
    assert totals["without_gpu_share"] == round(1 / active, 4)
    assert report["unmapped_gpus"] == [
        {"name": "RTX 9999", "source": FIRST, "offers": 1, "example_skus": ["mystery"]}
    ]
    assert report["unmapped_regions"] == [
        {
            "provider": "lambda",
            "region": "moon-1",
            "sources": [FIRST],
            "offers": 1,
            "example_skus": ["nowhere"],
        }
    ]
    disagreements = {d["sku"]: d for d in report["price_disagreements"]}
    assert set(disagreements) == {"triple", "peers"}  # the copies of own-N agree
    assert totals["price_disagreements"] == 2
    triple = disagreements["triple"]
    assert [(r["source"], Decimal(r["price_per_gpu_hour_usd"])) for r in triple["reports"]] == [
        (FIRST, Decimal("2")),
        (SKY, Decimal("2.1")),
        (HUNT, Decimal("1.9")),
    ]
    assert (triple["min_price_per_gpu_hour_usd"], triple["max_price_per_gpu_hour_usd"]) == (
        "1.9",
        "2.1",
    )
    assert report["price_disagreements"][0]["sku"] == "triple"  # widest spread first

    one = client.get("/v1/quality", params={"source": HUNT, "limit": 1}).json()
    assert one["source"] == HUNT and one["unmapped_gpus"] == []
    assert len(one["price_disagreements"]) == 1 and one["totals"]["price_disagreements"] == 2


@pytest.mark.parametrize(
    ("params", "status", "name"),
    [
        ({"limit": "0"}, 422, "limit"),
        ({"limit": "abc"}, 422, "limit"),
        ({"limit": "100000"}, 422, "limit"),
        ({"limit": "9" * 400}, 422, "limit"),
        ({"source": "x" * 101}, 422, "source"),
        ({"source": "lambda\x00"}, 422, "source"),
        ({"kind": "gpu"}, 400, "kind"),
        ({"sort": "price"}, 400, "sort"),
    ],
)
def test_quality_refuses_bad_params_with_a_problem(
    client: TestClient, params: dict[str, str], status: int, name: str
) -> None:
    response = client.get("/v1/quality", params=params)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status and name in {p["name"] for p in body["invalid_params"]}


def test_unmapped_endpoint_keeps_working_with_offer_counts(client: TestClient) -> None:
    response = client.get("/v1/unmapped", params={"kind": "gpu"})
    assert response.status_code == 200, response.text
    (row,) = [r for r in response.json() if r["value"] == "RTX 9999"]
    assert (row["source"], row["offers"], row["example_skus"]) == (FIRST, 1, ["mystery"])
    assert client.get("/v1/unmapped", params={"limit": "0"}).status_code == 422


def test_the_web_page_shows_human_gpu_names(client: TestClient) -> None:
    page = client.get("/offers", params={"provider": "lambda", "per_page": "100"})
    assert page.status_code == 200, page.text
    assert "H100 SXM 80GB" in page.text and "RTX 9999 (unrecognized)" in page.text
    triple = by_sku(page_all(client, {}, limit=1000))["triple"][0]
    detail = client.get(f"/offers/{triple['id']}").text
    assert SKY in detail and HUNT in detail and "H100 SXM 80GB" in detail


@pytest.fixture
def cli(client: TestClient, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", db_url)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def run(cli: CliRunner, *args: str) -> str:
    result = cli.invoke(cli_app, list(args))
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_cli_shows_the_same(cli: CliRunner, client: TestClient) -> None:
    table = run(cli, "offers", "--limit", "100")
    assert "H100 SXM 80GB" in table and "RTX 9999 (unrecognized)" in table
    rows = json.loads(run(cli, "offers", "--limit", "100", "-f", "json"))
    assert _ids(rows) == _ids(page_all(client, {}, limit=1000))
    (triple,) = [r for r in rows if r["sku"] == "triple"]
    assert [o["source"] for o in triple["also_from"]] == [SKY, HUNT]
    assert triple["gpu_name"] == "H100 SXM 80GB"

    report = json.loads(run(cli, "quality", "-f", "json"))
    assert report == client.get("/v1/quality").json()
    text = run(cli, "quality")
    assert "RTX 9999" in text and "moon-1" in text and "skypilot:lambda 2.1" in text
    unmapped = json.loads(run(cli, "unmapped", "--kind", "gpu", "-f", "json"))
    assert [(u["value"], u["offers"], u["example_skus"]) for u in unmapped] == [
        ("RTX 9999", 1, ["mystery"])
    ]
    assert cli.invoke(cli_app, ["quality", "-f", "csv"]).exit_code == 2


def test_also_from_at_a_pinned_version_shows_that_versions_prices(
    client: TestClient, engine: Engine, settings: Settings
) -> None:
    before = client.get("/v1/offers", params={"limit": 1000}).json()["catalog_version"]
    sky = [
        lambda_offer(SKY, "triple", "2.30"),
        lambda_offer(SKY, "peers", "1.55"),
        *(lambda_offer(SKY, f"own-{i}", f"{1 + i / 10:.2f}") for i in range(0, 20, 3)),
    ]
    result = ingest(engine, settings, CrawlResult(source=SKY, records=sky))
    assert result.changed == 1

    def triple(params: dict[str, Any]) -> list[tuple[str, str]]:
        (row,) = by_sku(page_all(client, params, limit=1000))["triple"]
        return [(o["source"], o["price_per_gpu_hour_usd"]) for o in row["also_from"]]

    assert triple({}) == [(SKY, "2.3"), (HUNT, "1.9")]
    assert triple({"as_of": str(before)}) == [(SKY, "2.1"), (HUNT, "1.9")]
