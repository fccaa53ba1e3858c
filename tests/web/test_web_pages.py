"""The page for people, without a browser: pages render, bad input is friendly, strings escaped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event

from service.core.config import Settings
from service.web.chart import step_chart
from service.web.render import decimal_text, money_text, web_url
from tests.support.api_client import api_client
from tests.support.readonly import unchanged
from tests.support.web_seed import (
    A100_OFFERS,
    H100_OFFERS,
    HISTORY_AMOUNTS,
    HISTORY_SKU,
    HOSTILE_SKU,
    seed,
)

TOTAL = H100_OFFERS + A100_OFFERS + 1


@pytest.fixture(scope="module")
def client(module_engine: Engine, module_settings: Settings) -> Iterator[TestClient]:
    """One catalog for the module's tests, which only read it (checked after them)."""
    seed(module_engine, module_settings, reference=False)
    with unchanged(module_engine):
        yield from api_client(module_settings)


def per_gpu_prices(html: str) -> list[Decimal]:
    return [
        Decimal(v) for v in re.findall(r'class="num price-per-gpu-hour" title="([0-9.]+)"', html)
    ]


def offer_ids(html: str) -> list[int]:
    return [int(v) for v in re.findall(r'<tr data-offer-id="(\d+)"', html)]


def history_offer_id(client: TestClient) -> int:
    body = client.get("/v1/offers", params={"limit": 1000}).json()
    return next(o["id"] for o in body["data"] if o["sku"] == HISTORY_SKU)


def test_listing_renders_sorted_by_price_per_gpu_hour_with_json_twin(client: TestClient) -> None:
    response = client.get("/offers")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert f'<span id="total">{TOTAL}</span>' in html
    prices = per_gpu_prices(html)
    assert len(prices) == 50 and prices == sorted(prices)
    assert 'href="/v1/offers?limit=50"' in html


def test_filters_sort_and_pages(client: TestClient) -> None:
    html = client.get("/offers", params={"gpu": "a100", "country": "us", "price_kind": "spot"}).text
    assert f'<span id="total">{A100_OFFERS}</span>' in html
    assert "/v1/offers?gpu=a100&amp;country=us&amp;price_kind=spot&amp;limit=50" in html
    html = client.get("/offers", params={"min_gpus": "8", "sort": "-price_per_gpu_hour"}).text
    prices = per_gpu_prices(html)
    assert prices == sorted(prices, reverse=True) and len(prices) == len(range(2, 50, 3))
    cheap = client.get("/offers", params={"max_price_per_gpu_hour": "3"}).text
    assert all(p <= 3 for p in per_gpu_prices(cheap)) and per_gpu_prices(cheap)
    seen: list[int] = []
    for number in (1, 2, 3):
        page = client.get("/offers", params={"per_page": "25", "page": str(number)}).text
        seen += offer_ids(page)
        assert ('rel="next"' in page) == (number < 3)
    assert len(seen) == len(set(seen)) == TOTAL


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"country": "ZZ"}, "country"),
        ({"min_gpus": "eight"}, "min_gpus"),
        ({"min_gpus": "NaN"}, "min_gpus"),
        ({"min_gpus": "1e-99999"}, "min_gpus"),  # PostgreSQL refused it: a 500
        ({"min_network_gbps": "0.000000000001"}, "min_network_gbps"),
        ({"max_price_per_gpu_hour": "-1"}, "max_price_per_gpu_hour"),
        ({"price_kind": "free"}, "price_kind"),
        ({"gdpr": "mars"}, "gdpr"),
        ({"sort": "cheapest"}, "sort"),
        ({"page": "0"}, "page"),
        ({"page": "999"}, "page"),
        ({"per_page": "100000"}, "per_page"),
        ({"gpu": "<script>"}, "gpu"),
        ({"cert": "no-such-scheme"}, "cert"),
    ],
)
def test_bad_input_is_a_friendly_400_page(client: TestClient, params: dict, field: str) -> None:
    response = client.get("/offers", params=params)
    assert response.status_code == 400, response.text[:500]
    assert response.headers["content-type"].startswith("text/html")
    assert 'id="errors"' in response.text and f"<strong>{field}</strong>" in response.text
    assert "<script>" not in response.text


def test_certifications_repeated_or_comma_separated_are_one_filter(client: TestClient) -> None:
    """As the API takes them: ``cert=a,b`` was a 400 here, and a repeated scheme was kept
    twice in every link of the page."""
    once = client.get("/offers", params={"cert": "iso27001"})
    assert once.status_code == 200
    total = re.search(r'<span id="total">(\d+)</span>', once.text)
    assert total is not None
    for query in ("cert=iso27001&cert=iso27001", "cert=iso27001,iso27001", "cert=%20ISO27001,"):
        page = client.get(f"/offers?{query}")
        assert page.status_code == 200, (query, page.text[:300])
        assert f'<span id="total">{total.group(1)}</span>' in page.text
        assert page.text.count('value="iso27001" checked') == 1
        assert "cert=iso27001&amp;cert=iso27001" not in page.text
    both = client.get("/offers?cert=iso27001,soc2_type2")
    twin = client.get("/v1/offers", params={"cert": "iso27001,soc2_type2", "limit": 1000})
    assert both.status_code == twin.status_code == 200
    assert f'<span id="total">{len(twin.json()["data"])}</span>' in both.text
    assert "cert=iso27001&amp;cert=soc2_type2" in both.text


@pytest.mark.parametrize(
    "params",
    [
        {"max_gpus": "2"},
        {"not_country": "us"},
        {"not_country": "US,DE"},
        {"region": "r3"},
        {"provider": "lambda,other"},
        {"provider_hq_not_in": "US"},
        {"provider_hq_not_in": "DE,CN"},
        {"source": "acme"},
        {"min_gpu_memory_gb": "80", "max_gpus": "4"},
        {"bare_metal": "false"},
        {"bare_metal": "yes"},  # read as the API reads it
    ],
)
def test_the_apis_listing_filters_answer_as_the_json_twin(
    client: TestClient, params: dict[str, str]
) -> None:
    """A URL copied from the API answers the same here: these filters have no field of their
    own and were ignored (the page listed every offer as if it were filtered)."""
    page = client.get("/offers", params={**params, "per_page": "100"})
    twin = client.get("/v1/offers", params={**params, "limit": 1000})
    assert page.status_code == twin.status_code == 200, page.text[:300]
    total = re.search(r'<span id="total">(\d+)</span>', page.text)
    assert total is not None and int(total.group(1)) == len(twin.json()["data"])
    assert sorted(offer_ids(page.text)) == sorted(o["id"] for o in twin.json()["data"])
    for name, value in params.items():  # kept by the sort links and by the form
        assert f"{name}={value.replace(',', '%2C')}" in page.text
        if name in ("max_gpus", "min_gpu_memory_gb", "region", "not_country", "source"):
            assert f'type="hidden" name="{name}"' in page.text


def filter_form(html: str) -> str:
    start = html.index('<form class="filters"')
    return html[start : html.index("</form>", start)]


def test_each_pages_form_keeps_the_filters_it_has_no_field_for(client: TestClient) -> None:
    """Submitting a page's form kept only the filters it shows: the rest of the URL's were
    lost (the overview's form has no provider field; no form has a max_gpus field)."""
    hidden = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')
    query = "provider=lambda,other&max_gpus=8&country=DE&gdpr=eu_eea&not_country=US"
    listing = filter_form(client.get(f"/offers?{query}").text)
    assert hidden.findall(listing) == [("max_gpus", "8"), ("not_country", "US")]
    assert '<option value="lambda,other" selected>' in listing  # the providers, as given
    for path in ("/", "/gpus/nvidia-h100-sxm-80gb"):
        form = filter_form(client.get(f"{path}?{query}").text)
        assert hidden.findall(form) == [
            ("provider", "lambda,other"),
            ("country", "DE"),
            ("max_gpus", "8"),
            ("not_country", "US"),
        ], path
        assert 'name="gdpr"' in form and 'hidden" name="gdpr' not in form


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("country=DE&country=US", "country"),
        ("gpu=h100&gpu=a100", "gpu"),
        ("sort=provider&sort=-price", "sort"),
        ("include_peers=true", "include_peers"),
        ("as_of=1", "as_of"),
        ("bare_metal=maybe", "bare_metal"),
        ("min_gpus=8&max_gpus=2", "min_gpus"),
        ("not_country=DE,ZZ", "not_country"),
    ],
)
def test_a_parameter_the_page_cannot_honour_is_a_400_naming_it(
    client: TestClient, query: str, field: str
) -> None:
    """A single-valued field given twice answered for one of the values, and the API's
    ``as_of`` and ``include_peers`` were ignored: each is now refused, by name."""
    response = client.get(f"/offers?{query}")
    assert response.status_code == 400, response.text[:300]
    assert f"<strong>{field}</strong>" in response.text


def test_cluster_filters_in_the_form(client: TestClient) -> None:
    """The form's interconnect, network and min_network_gbps fields: bad values are a 400
    naming each field, good ones list what the JSON twin lists."""
    bad = {"interconnect": "nvlink9", "network": "<b>carrier</b>", "min_network_gbps": "-3"}
    response = client.get("/offers", params=bad)
    assert response.status_code == 400
    for field in bad:
        assert f"<strong>{field}</strong>" in response.text
    assert "<b>carrier" not in response.text
    html = client.get(
        "/offers", params={"interconnect": "", "network": "", "min_network_gbps": ""}
    ).text
    assert f'<span id="total">{TOTAL}</span>' in html
    params = {"interconnect": "pcie", "network": "ethernet", "min_network_gbps": "10"}
    html = client.get("/offers", params=params).text
    twin = client.get("/v1/offers", params={**params, "limit": 1000}).json()["data"]
    assert f'<span id="total">{len(twin)}</span>' in html
    assert "interconnect=pcie&amp;network=ethernet&amp;min_network_gbps=10" in html
    assert 'id="f-interconnect"' in html and '<option value="pcie" selected>' in html


def test_empty_form_fields_mean_not_set(client: TestClient) -> None:
    params = {"gpu": "", "min_gpus": "", "country": "", "gdpr": "", "price_kind": "", "sort": ""}
    response = client.get("/offers", params=params)
    assert response.status_code == 200 and f'<span id="total">{TOTAL}</span>' in response.text


def test_hostile_strings_are_escaped_everywhere(client: TestClient) -> None:
    html = client.get("/offers", params={"per_page": "100"}).text
    assert HOSTILE_SKU not in html and "onerror=" not in html.replace("onerror=&#34;", "")
    assert "&lt;img src=x onerror=&#34;window.__pwned=1&#34;&gt;&#34;&#39;&amp;amp;" in html
    hostile = next(
        o["id"]
        for o in client.get("/v1/offers", params={"limit": 1000}).json()["data"]
        if o["sku"] == HOSTILE_SKU
    )
    page = client.get(f"/offers/{hostile}").text
    assert "<img" not in page and "&lt;img" in page
    missing = client.get("/providers/<img src=x onerror=alert(1)>")
    assert missing.status_code == 404 and "<img" not in missing.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in missing.text


def test_offer_page_history_provenance_and_chart(client: TestClient) -> None:
    offer_id = history_offer_id(client)
    response = client.get(f"/offers/{offer_id}")
    assert response.status_code == 200
    html = response.text
    assert html.count('<circle class="obs"') == 1 + len(HISTORY_AMOUNTS)
    amounts = re.findall(r'data-amount="([0-9.]+)"', html)
    assert amounts[1:] == list(HISTORY_AMOUNTS) and amounts[0] == "20.00"
    assert f'href="/v1/offers/{offer_id}"' in html
    assert f'href="/v1/offers/{offer_id}/history"' in html
    raw = client.get(f"/v1/offers/{offer_id}").json()
    assert "acme" in html and str(raw["crawl_run_id"]) in html
    if raw["raw_payload_sha256"]:
        assert raw["raw_payload_sha256"] in html
    assert html.count("<tr><td>") >= 1 + len(HISTORY_AMOUNTS)  # one crawl run per change


def test_unknown_offer_is_an_html_404(client: TestClient) -> None:
    paths = (
        "/offers/987654",
        "/offers/abc",
        "/offers/99999999999999999999999",
        "/offers/2147483648",  # past PostgreSQL's integer: a 500 there
        "/offers/999999999999999999",
        "/gpus/x",
        "/gpus/%00",  # a NUL reached PostgreSQL: a 500 (and a JSON one)
        "/providers/a%00b",
        "/providers/%3Cscript%3E",
    )
    for path in paths:
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html")
        assert "Not found" in response.text and "<script>" not in response.text


def test_a_path_no_page_has_is_an_html_404_for_a_browser(client: TestClient) -> None:
    """``/gpus/a/b`` matched no route: a JSON problem where the pages answer HTML. A
    browser gets the pages' 404; a program, and anything under /v1, the problem."""
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    for path in ("/gpus/a/b", "/nowhere", "/providers/aws/extra?x=<script>"):
        page = client.get(path, headers=browser)
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
        assert "Not found" in page.text and "<script>" not in page.text
        program = client.get(path, headers={"Accept": "application/json"})
        assert program.status_code == 404
        assert program.headers["content-type"] == "application/problem+json"
    api = client.get("/v1/nothing-here", headers=browser)
    assert api.status_code == 404 and api.headers["content-type"] == "application/problem+json"


def test_provider_and_gpu_pages(client: TestClient) -> None:
    html = client.get("/providers/lambda").text
    assert 'href="/v1/providers/lambda"' in html and 'id="sources"' in html
    assert "<td>acme</td>" in html and "ok" in html
    gpu = client.get("/gpus/nvidia-h100-sxm-80gb")
    assert gpu.status_code == 200
    assert 'href="/v1/gpus/nvidia-h100-sxm-80gb"' in gpu.text
    assert 'id="export-control"' in gpu.text and "not legal advice" in gpu.text
    cheapest = per_gpu_prices(gpu.text)
    assert cheapest == sorted(cheapest) and len(cheapest) == 10
    assert client.get("/gpus/nvidia-h100-sxm-80gb", params={"destination": "SG"}).status_code == 200


def test_static_files_are_served(client: TestClient) -> None:
    response = client.get("/static/gpuatlas.css")
    assert response.status_code == 200 and "svg.chart" in response.text


ROW_TABLES = re.compile(r"\bFROM (offer|price_observation|offer_location)\b")
"""The statements that read offers, their prices or their places."""
FIRST_FROM = re.compile(r"\bFROM\s+(\(|\w+)")
ROW_TABLE_NAMES = {"(", "offer", "price_observation", "offer_location"}


def reads_rows(statement: str) -> bool:
    """Whether a statement reads offers, prices or places, not one of the small tables the
    page caches with an ``offer`` subquery inside (the live GPU models: ``FROM gpu_model
    WHERE EXISTS (SELECT * FROM offer ...)``)."""
    first = FIRST_FROM.search(statement)
    return bool(ROW_TABLES.search(statement)) and (
        first is None or first.group(1) in ROW_TABLE_NAMES
    )


def test_listing_page_query_count_does_not_grow_with_rows(client: TestClient) -> None:
    """A page of 5 offers and one of 20 run the same statements on the offers and their
    prices and places (a query per row would add 15). Counted on the app's own engine: the
    module's engine, which this test counted on before, is not the one the app reads
    through, so it counted nothing. The small tables the page caches (GPU models, regions,
    certifications...) are left out: on PostgreSQL their cache is keyed by the cluster's
    snapshot, which other databases' commits move (a fresh-clone CI run re-read them for
    one page and not the other)."""
    engine = client.app.state.engine  # type: ignore[attr-defined]
    statements: list[str] = []

    def count(*args: object) -> None:
        statement = str(args[2])
        if reads_rows(statement):
            statements.append(statement)

    client.get("/offers", params={"per_page": "5"})  # the facts the page caches, read once
    event.listen(engine, "before_cursor_execute", count)
    try:
        client.get("/offers", params={"per_page": "5"})
        small = list(statements)
        statements.clear()
        client.get("/offers", params={"per_page": "20"})  # still a full page of priced offers
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(small) >= 2  # the page was read, not a cached one
    assert len(small) == len(statements), "\n---\n".join(statements)


def test_decimal_formatting_never_uses_floats() -> None:
    assert money_text(Decimal("2.5")) == "2.50"
    assert money_text(Decimal("0.1234567891")) == "0.1234567891"
    assert money_text(Decimal("1E+1")) == "10.00"
    assert decimal_text(Decimal("8.000")) == "8"
    assert decimal_text(Decimal("2.34567"), 4) == "2.3457"
    assert decimal_text(None) == "—"


def test_only_http_links_are_rendered_as_links() -> None:
    assert web_url("https://example.com/x") == "https://example.com/x"
    assert web_url("javascript:alert(1)") is None
    assert web_url(" JAVASCRIPT:alert(1)") is None
    assert web_url(None) is None


def test_chart_has_one_point_per_observation_and_steps() -> None:
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    history = [
        {
            "id": 1,
            "amount": Decimal("2"),
            "currency": "EUR",
            "valid_from": t0,
            "valid_to": t0 + timedelta(days=1),
        },
        {
            "id": 2,
            "amount": Decimal("3"),
            "currency": "EUR",
            "valid_from": t0 + timedelta(days=1),
            "valid_to": t0 + timedelta(days=2),
        },
        {
            "id": 3,
            "amount": Decimal("1"),
            "currency": "EUR",
            "valid_from": t0 + timedelta(days=3),
            "valid_to": None,
        },
    ]
    chart = step_chart(history, t0 + timedelta(days=4))
    assert chart is not None and len(chart.points) == 3
    assert chart.path.count("M") == 2  # a gap (withdrawn, then back) starts a new line
    assert chart.path.count("V") == 1 and chart.path.count("H") == 3
    assert [p.amount for p in chart.points] == [Decimal("2"), Decimal("3"), Decimal("1")]
    assert chart.points[1].y == "16.0" and chart.points[2].y == "224.0"  # max top, min bottom
    single = step_chart(history[:1], t0)
    assert single is not None and len(single.points) == 1
    assert step_chart([], t0) is None
