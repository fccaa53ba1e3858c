"""The page for people in a real browser: Debian's Chromium, headless, driven by Playwright.

The real app runs under uvicorn on a loopback port over a seeded SQLite catalog. Without
/usr/bin/chromium (or the playwright package) these tests skip with the reason; under
CI=true they fail instead, because CI must run them.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from service.api.main import create_app
from service.core.config import Settings
from service.core.db import make_engine
from tests.support import web_seed

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
IN_CI = os.environ.get("CI", "").lower() == "true"
TOTAL = web_seed.H100_OFFERS + web_seed.A100_OFFERS + 1


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true but {reason}: browser tests must run in CI")
    pytest.skip(f"{reason} (install it with: apt-get install -y chromium)")


@pytest.fixture(scope="module")
def base_url(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import uvicorn

    path = tmp_path_factory.mktemp("web") / "gpuatlas.db"
    shutil.copy(sqlite_template, path)
    url = f"sqlite:///{path}"
    settings = Settings(  # type: ignore[call-arg]
        database_url=url, environment="test", scheduler_enabled=False, _env_file=None
    )
    engine = make_engine(url)
    try:
        web_seed.seed(engine, settings)
    finally:
        engine.dispose()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(settings), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any, base_url: str) -> Iterator[Any]:
    context = browser.new_context(base_url=base_url, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.dialogs = dialogs
    yield page
    context.close()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def column(page: Any) -> list[Decimal]:
    texts = page.locator("#offers tbody td.price-per-gpu-hour").all_inner_texts()
    return [Decimal(t.strip()) for t in texts]


def total(page: Any) -> int:
    return int(page.locator("#total").inner_text().replace(",", ""))


def test_filter_sort_and_paginate(page: Any) -> None:
    page.goto("/")
    assert total(page) == TOTAL
    prices = column(page)
    assert prices == sorted(prices) and len(prices) == 50
    shot(page, "listing")

    page.select_option("#f-gpu", "a100")
    page.fill("#f-country", "US")
    page.select_option("#f-price-kind", "spot")
    page.click("#apply")
    page.wait_for_load_state()
    assert total(page) == web_seed.A100_OFFERS
    assert page.locator("#offers tbody tr").count() == web_seed.A100_OFFERS
    assert set(page.locator("#offers tbody td.country").all_inner_texts()) == {"US"}
    assert page.input_value("#f-country") == "US"  # the form keeps what was asked
    shot(page, "filtered")

    page.click("#offers thead a.sort[data-sort='price_per_gpu_hour']")  # ascending -> descending
    page.wait_for_load_state()
    assert "sort=-price_per_gpu_hour" in page.url
    prices = column(page)
    assert prices == sorted(prices, reverse=True) and len(prices) == web_seed.A100_OFFERS
    page.click("#offers thead a.sort[data-sort='gpu_count']")
    page.wait_for_load_state()
    assert "sort=gpu_count" in page.url and total(page) == web_seed.A100_OFFERS
    shot(page, "sorted")

    page.goto("/?per_page=25")
    seen: list[str] = []
    for number in (1, 2, 3):
        assert f"page {number} of 3" in page.locator("#summary").inner_text()
        seen += page.locator("#offers tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.offerId)"
        )
        if number < 3:
            page.click("#next")
            page.wait_for_load_state()
    assert page.locator("#next").count() == 0
    assert len(seen) == len(set(seen)) == TOTAL
    shot(page, "last-page")


def test_open_offer_and_see_its_chart(page: Any) -> None:
    page.goto("/?gpu=h100&sort=provider&per_page=100")
    row = page.locator(
        "#offers tbody tr", has=page.locator("td.sku", has_text=web_seed.HISTORY_SKU)
    )
    row.first.locator("a.offer-link").click()
    page.wait_for_load_state()
    assert "/offers/" in page.url
    chart = page.locator("svg#price-chart")
    assert chart.is_visible()
    points = chart.locator("circle.obs")
    assert points.count() == 1 + len(web_seed.HISTORY_AMOUNTS)
    amounts = points.evaluate_all("cs => cs.map(c => c.dataset.amount)")
    assert amounts == ["20.00", *web_seed.HISTORY_AMOUNTS]
    box = chart.locator("path.step").bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 50  # really drawn
    assert page.locator("#observations tbody tr").count() == 1 + len(web_seed.HISTORY_AMOUNTS)
    assert page.locator("#source").inner_text().startswith("acme")
    twin = page.locator("a.json-twin").get_attribute("href")
    assert twin is not None and twin.startswith("/v1/offers/")
    shot(page, "offer")
    response = page.request.get(twin)
    assert response.ok and response.json()["sku"] == web_seed.HISTORY_SKU


def test_bad_filter_shows_a_message_not_an_error_page(page: Any) -> None:
    page.goto("/")
    page.fill("#f-country", "ZZ")
    page.fill("#f-min-gpus", "lots")
    with page.expect_navigation() as navigation:
        page.click("#apply")
    assert navigation.value.status == 400
    errors = page.locator("#errors").inner_text()
    assert "country" in errors and "min_gpus" in errors
    assert page.input_value("#f-min-gpus") == "lots"
    shot(page, "bad-filter")


def test_hostile_strings_stay_text(page: Any) -> None:
    page.goto("/?per_page=100&sort=price_per_gpu_hour")
    cell = page.locator("#offers td.sku", has_text="onerror")
    assert cell.inner_text() == web_seed.HOSTILE_SKU
    assert page.locator("#offers img").count() == 0
    assert page.evaluate("() => window.__pwned === undefined") and not page.dialogs
    cell.locator("xpath=..").locator("a.offer-link").click()
    page.wait_for_load_state()
    assert page.locator("h1").inner_text().startswith(web_seed.HOSTILE_SKU)
    assert page.evaluate("() => window.__pwned === undefined") and not page.dialogs


def test_provider_and_gpu_pages(page: Any) -> None:
    page.goto("/providers/lambda")
    assert page.locator("#sources").inner_text().count("acme") == 1
    page.click("#provider-offers")
    page.wait_for_load_state()
    assert total(page) == TOTAL
    page.goto("/gpus/nvidia-h100-sxm-80gb")
    assert page.locator("#cheapest tbody tr").count() == 10
    assert page.locator("#export-control tbody tr").count() >= 4
    shot(page, "gpu")
