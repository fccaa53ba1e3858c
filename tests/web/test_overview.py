"""The GPU overview, GPU and compare pages and their JSON twins, on one seeded catalog per
module and backend (a real SQLite file; a PostgreSQL database of its own).

The catalog (tests/support/overview_seed.py) makes every expected figure exact.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from schema.enums import PriceKind
from service.core.config import Settings
from service.core.db import make_engine
from service.core.migrate import upgrade
from service.query.overview import TREND_DAYS, parse_compare_ids
from service.web.render import gpu_hour_text, instance_hour_text, quoted_text
from service.web.words import price_kind_label
from tests.conftest import scratch_pg_database
from tests.support import overview_seed
from tests.support.api_client import api_client
from tests.support.overview_seed import A100, H100, L40S, TREND


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def client(
    request: pytest.FixtureRequest,
    sqlite_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[TestClient]:
    def serve(url: str) -> Iterator[TestClient]:
        settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
        engine = make_engine(url)
        try:
            overview_seed.seed(engine, settings)
        finally:
            engine.dispose()
        yield from api_client(settings)

    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("overview") / "gpuatlas.db"
        shutil.copy(sqlite_template, path)
        yield from serve(f"sqlite:///{path}")
    else:
        with scratch_pg_database() as url:
            upgrade(url)
            yield from serve(url)


def row_of(html: str, slug: str) -> str:
    match = re.search(rf'<tr data-gpu="{re.escape(slug)}">(.*?)</tr>', html, re.S)
    assert match, f"no row for {slug}"
    return match.group(1)


def exact(cell_html: str, kind: str) -> str | None:
    match = re.search(rf'class="num price {kind}" data-exact="([0-9.]+)"', cell_html)
    return match.group(1) if match else None


def test_overview_is_the_home_page_with_one_row_per_gpu(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    html = response.text
    # dearest on-demand first, then the GPUs without an on-demand price
    assert re.findall(r'<tr data-gpu="([^"]+)">', html) == [H100, L40S, A100]
    h100, l40s = row_of(html, H100), row_of(html, L40S)
    assert ">H100 SXM 80GB</a>" in h100 and ">L40S 48GB</a>" in l40s  # names, not slugs
    assert "80 GB" in h100 and "48 GB" in l40s
    assert exact(h100, "on_demand") == "2.125" and exact(h100, "spot") == "1.5"
    assert exact(h100, "reserved_1y") is None and 'class="num price reserved_3y none"' in h100
    assert exact(l40s, "on_demand") == "1.2" and exact(l40s, "reserved_1y") == "1"
    # 4 significant digits shown, the exact figure and the provider in the title
    assert 'title="2.125 USD per GPU-hour, Lambda">' in h100 and ">2.125</a>" in h100
    assert ">1.500</a>" in h100 and ">1.200</a>" in l40s and ">1.000</a>" in l40s
    assert '<span class="by">OVHcloud</span>' in l40s
    for kind in ("On-demand", "Spot", "1-year reserved", "3-year reserved"):
        assert f'<th scope="col" class="num">{kind}</th>' in html
    flags = re.findall(r'<td class="flag">(yes|no)</td>', h100 + l40s)
    assert flags == ["no", "no", "yes", "yes"]  # EU/EEA region, non-US provider
    assert h100.count('<svg class="spark"') == 1 and "2.000 to 2.125 USD" in h100
    assert 'href="/v1/overview"' in html and 'href="/offers"' in html


def test_overview_json_twin_keeps_exact_values_and_the_trend(client: TestClient) -> None:
    body = client.get("/v1/overview").json()
    assert body["price_kinds"] == ["on_demand", "spot", "reserved_1y", "reserved_3y"]
    rows = {r["slug"]: r for r in body["data"]}
    assert list(rows) == [H100, L40S, A100]
    assert rows[A100]["cheapest"]["on_demand"] is None and rows[A100]["trend"] == [None] * 90
    h100, l40s = rows[H100], rows[L40S]
    assert h100["name"] == "H100 SXM 80GB" and h100["provider_count"] == 1
    assert h100["cheapest"]["on_demand"]["price_per_gpu_hour_usd"] == "2.125"
    assert h100["cheapest"]["on_demand"]["provider"] == "lambda"
    assert h100["cheapest"]["reserved_3y"] is None
    assert l40s["cheapest"]["reserved_1y"]["price_per_gpu_hour_usd"] == "1"
    assert (h100["eu_eea_region"], h100["non_us_provider"]) == (False, False)
    assert (l40s["eu_eea_region"], l40s["non_us_provider"]) == (True, True)
    for slug, (before, after) in TREND.items():
        trend = rows[slug]["trend"]
        assert len(trend) == TREND_DAYS and None not in trend
        assert Decimal(trend[0]) == before and Decimal(trend[-1]) == after
        changes = [i for i in range(1, TREND_DAYS) if trend[i] != trend[i - 1]]
        assert len(changes) == 1  # one step, on the day of the change
    # each cheapest cell names the offer that holds it, as the offer's own twin says
    cell = l40s["cheapest"]["on_demand"]
    offer = client.get(f"/v1/offers/{cell['offer_id']}").json()
    assert offer["price_per_gpu_hour_usd"] == "1.2" and offer["sku"] == "l40s-a"


@pytest.mark.parametrize(
    ("params", "slugs"),
    [
        ({"gdpr": "eu_eea"}, [L40S]),
        ({"gdpr": "eu_eea", "cert": "iso27001"}, [L40S]),
        ({"export_destination": "DE"}, [H100, L40S, A100]),
        ({"gpu": "l40s"}, [L40S]),
        ({"interconnect": "pcie"}, []),  # no seeded offer states a PCIe interconnect
    ],
)
def test_filters_carry_over_page_and_twin(
    client: TestClient, params: dict[str, str], slugs: list[str]
) -> None:
    html = client.get("/", params=params).text
    assert re.findall(r'<tr data-gpu="([^"]+)">', html) == slugs
    query = "&amp;".join(f"{k}={v}" for k, v in params.items())
    assert f'href="/v1/overview?{query}"' in html
    if slugs:
        assert f'href="/gpus/{slugs[0]}?{query}"' in html  # the GPU page keeps the filters
    body = client.get("/v1/overview", params=params).json()
    assert [r["slug"] for r in body["data"]] == slugs


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"gdpr": "mars"}, "gdpr"),
        ({"export_destination": "ZZ"}, "export_destination"),
        # more decimal places than the database keeps (PostgreSQL refused it: a 500)
        ({"min_gpus": "1e-99999"}, "min_gpus"),
        ({"min_network_gbps": "0.000000000001"}, "min_network_gbps"),
    ],
)
def test_bad_filters_are_clear_errors(client: TestClient, params: dict, field: str) -> None:
    response = client.get("/", params=params)
    assert response.status_code == 400 and f"<strong>{field}</strong>" in response.text
    problem = client.get("/v1/overview", params=params)
    assert problem.status_code in (400, 422)
    assert problem.headers["content-type"] == "application/problem+json"
    assert problem.json()["invalid_params"][0]["name"] == field
    unknown = client.get("/v1/overview", params={"sort": "price"})
    assert unknown.status_code == 400 and unknown.json()["invalid_params"][0]["name"] == "sort"


def test_gpu_page_matrix_history_specs_and_export_control(client: TestClient) -> None:
    response = client.get(f"/gpus/{L40S}")
    assert response.status_code == 200
    html = response.text
    matrix = re.search(r'<table class="matrix" id="matrix">(.*?)</table>', html, re.S)
    assert matrix is not None
    heads = re.findall(r'<th scope="col" class="num">([^<]+)</th>', matrix.group(1))
    assert heads == ["On-demand", "1-year reserved"]
    assert re.findall(r'<tr data-provider="([^"]+)">', matrix.group(1)) == ["ovhcloud"]
    assert re.findall(r'data-exact="([0-9.]+)"', matrix.group(1)) == ["1.2", "1"]
    assert html.count('name="ids"') == 2
    assert '<svg id="history-chart"' in html and html.count('<path class="series"') == 1
    assert "OVHcloud: <span" in html
    assert 'id="specs"' in html and 'id="export-control"' in html and "not legal advice" in html
    assert f'href="/v1/gpus/{L40S}/overview"' in html
    # the offer listing of this GPU keeps the page's filters
    filtered = client.get(f"/gpus/{L40S}", params={"gdpr": "eu_eea"}).text
    assert f'href="/offers?gpu={L40S}&amp;gdpr=eu_eea"' in filtered
    body = client.get(f"/v1/gpus/{L40S}/overview").json()
    assert body["gpu"]["name"] == "L40S 48GB" and body["price_kinds"] == [
        "on_demand",
        "reserved_1y",
    ]
    prices = body["matrix"][0]["prices"]
    assert prices["on_demand"]["price_per_gpu_hour_usd"] == "1.2"
    assert body["history_price_kind"] == "on_demand"
    daily = body["history"][0]["daily"]
    assert len(daily) == TREND_DAYS and (daily[0], daily[-1]) == ("1.5", "1.2")
    assert {a["destination"] for a in body["export_control"]} >= {"DE", "IN", "AE", "CN"}
    extra = client.get(f"/v1/gpus/{L40S}/overview", params={"destination": "SG"}).json()
    assert extra["export_control"][-1]["destination"] == "SG"


@pytest.mark.parametrize(
    ("params", "status", "field"),
    [
        ({"gpu": A100}, 400, "gpu"),  # the path names the GPU: it was ignored
        ({"destination": "ZZ"}, 422, "destination"),  # no country's: was a 200
        ({"destination": "cn", "export_destination": "Q1"}, 422, "export_destination"),
    ],
)
def test_gpu_overview_refuses_what_it_cannot_answer(
    client: TestClient, params: dict, status: int, field: str
) -> None:
    problem = client.get(f"/v1/gpus/{L40S}/overview", params=params)
    assert problem.status_code == status, problem.text
    assert problem.headers["content-type"] == "application/problem+json"
    assert problem.json()["invalid_params"][0]["name"] == field


def test_gpu_page_without_on_demand_charts_its_first_kind(client: TestClient) -> None:
    body = client.get(f"/v1/gpus/{A100}/overview").json()
    assert body["price_kinds"] == ["spot"] and body["history_price_kind"] == "spot"
    assert body["history"] == [{"provider": "lambda", "daily": ["1.1"] * TREND_DAYS}]
    html = client.get(f"/gpus/{A100}").text
    assert "Cheapest Spot price by provider, last 90 days" in html
    assert html.count('<path class="series"') == 1


def test_unknown_gpu_is_a_404_page_and_problem(client: TestClient) -> None:
    page = client.get("/gpus/no-such-gpu")
    assert page.status_code == 404 and "no-such-gpu" in page.text
    problem = client.get("/v1/gpus/no-such-gpu/overview")
    assert problem.status_code == 404
    assert problem.headers["content-type"] == "application/problem+json"


def _offer_ids(client: TestClient) -> dict[str, int]:
    rows = client.get("/v1/offers", params={"limit": 100}).json()["data"]
    return {r["sku"]: r["id"] for r in rows}


def test_compare_puts_offers_side_by_side(client: TestClient) -> None:
    ids = _offer_ids(client)
    wanted = [ids["l40s-a"], ids["l40s-term"], ids["gpu-1"]]
    html = client.get("/compare", params={"ids": ",".join(map(str, wanted))}).text
    table = re.search(r'<table class="compare" id="compare">(.*?)</table>', html, re.S)
    assert table is not None
    assert table.group(1).count('<th scope="col"><a href="/offers/') == 3
    assert "1-year reserved, all upfront" in html and "On-demand" in html
    assert 'cheapest" title="1">1.000 <span class="badge">cheapest</span>' in html
    assert ">8,760.00 USD per term 1y" in html  # the quoted term price, 2 decimals
    assert f'href="/v1/compare?ids={",".join(map(str, wanted))}"' in html
    repeated = client.get("/compare", params=[("ids", str(wanted[0])), ("ids", str(wanted[1]))])
    assert repeated.status_code == 200
    body = client.get("/v1/compare", params={"ids": ",".join(map(str, wanted))}).json()
    assert body["ids"] == wanted and [o["id"] for o in body["data"]] == wanted
    assert body["cheapest_price_per_gpu_hour_usd"] == "1"
    assert body["data"][1]["price"] == {"amount": "8760.00", "currency": "USD"} or body["data"][1][
        "price"
    ]["amount"].startswith("8760")


@pytest.mark.parametrize(
    "ids", ["1", "1,2,3,4,5", "abc,2", "1,1", "", "0,1", "1;2", "99999999999,1"]
)
def test_compare_bad_ids_are_clear_errors(client: TestClient, ids: str) -> None:
    page = client.get("/compare", params={"ids": ids})
    assert page.status_code == 400 and 'id="errors"' in page.text
    problem = client.get("/v1/compare", params={"ids": ids})
    assert problem.status_code == 400
    assert problem.json()["invalid_params"][0]["name"] == "ids"


def test_compare_unknown_offer_is_a_404(client: TestClient) -> None:
    known = min(_offer_ids(client).values())
    assert client.get("/compare", params={"ids": f"{known},987654"}).status_code == 404
    problem = client.get("/v1/compare", params={"ids": f"{known},987654"})
    assert problem.status_code == 404 and "987654" in problem.json()["detail"]


def test_old_listing_links_to_the_home_page_land_on_the_listing(client: TestClient) -> None:
    response = client.get("/?gpu=l40s&sort=-price&page=1", follow_redirects=False)
    assert response.status_code == 308
    assert response.headers["location"] == "/offers?gpu=l40s&sort=-price&page=1"


def test_offer_listing_stays_reachable_with_money_as_money(client: TestClient) -> None:
    html = client.get("/offers", params={"gpu": "l40s"}).text
    assert '<span id="total">3</span>' in html
    assert '<td class="num price-per-gpu-hour" title="1">1.000</td>' in html
    assert '<td class="num instance-hour" title="1.4">1.40</td>' in html
    assert "1-year reserved, all upfront" in html


def test_money_and_words_for_people() -> None:
    cases: list[tuple[Any, str]] = [
        (Decimal("0.0326475"), "0.03265"),
        (Decimal("2.5"), "2.500"),
        (Decimal("12.3456"), "12.35"),
        (Decimal("99.995"), "100.0"),
        (Decimal("1234.5"), "1,234"),
        (None, "—"),
    ]
    for value, text in cases:
        assert gpu_hour_text(value) == text
    assert instance_hour_text(Decimal("98.325")) == "98.32"  # half-even
    assert instance_hour_text(Decimal("1234.5")) == "1,234.50"
    assert quoted_text(Decimal("0.000312")) == "0.0003120" and quoted_text(Decimal("3")) == "3.00"
    assert price_kind_label("reserved_1y", "term_1y") == "1-year reserved, all upfront"
    assert price_kind_label("reserved_3y", "hour") == "3-year reserved, no upfront"
    assert price_kind_label("on_demand", "hour") == "On-demand"
    assert price_kind_label("spot") == "Spot"
    for kind in PriceKind:  # every kind has words, none shows its identifier
        assert "_" not in price_kind_label(kind.value)


def test_compare_ids_parser() -> None:
    assert parse_compare_ids(["3,1", " 2 "]) == [3, 1, 2]
