"""Digits from other scripts ("¹", "²", "٣") are not whole numbers: every place that
checks a text for digits before reading it as a number answers a clear error or skips
it, never a server error. ``str.isdigit()`` accepts them and ``int()`` then refuses them
(the API fuzz test found ``as_of=¹`` answering 500)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from starlette.datastructures import QueryParams

from crawlers.http import _retry_after
from crawlers.providers.aws import _positive_int
from schema.text import ascii_digits
from service.catalog.run_owner import _host, owner_alive
from service.core.config import Settings
from service.web.forms import parse_listing
from tests.support.api_client import api_client

FOREIGN = ["¹", "²³", "٣", "1²", "৪"]


@pytest.fixture
def client(engine: Engine, settings: Settings) -> Iterator[TestClient]:
    yield from api_client(settings)


@pytest.mark.parametrize("text", ["0", "7", "0042", "1234567890"])
def test_ascii_digits_accepts_0_to_9(text: str) -> None:
    assert ascii_digits(text)


@pytest.mark.parametrize("text", [*FOREIGN, "", " 1", "1.0", "-1", "+1", "1_000", "１"])
def test_ascii_digits_refuses_everything_else(text: str) -> None:
    assert not ascii_digits(text)


@pytest.mark.parametrize("text", FOREIGN)
def test_the_api_and_pages_refuse_foreign_digits_with_a_clear_answer(
    client: TestClient, text: str
) -> None:
    listing = client.get("/v1/offers", params={"as_of": text})
    assert listing.status_code == 422, listing.text
    assert "as_of" in listing.json()["detail"]
    compare = client.get("/v1/compare", params={"ids": text})
    assert compare.status_code in (400, 422), compare.text
    page = client.get(f"/offers/{text}")
    assert page.status_code == 404
    form = client.get("/offers", params={"page": text})
    assert form.status_code == 400 and "a whole number" in form.text


@pytest.mark.parametrize("text", FOREIGN)
def test_parsers_of_outside_text_skip_foreign_digits(text: str) -> None:
    assert (
        parse_listing(QueryParams({"per_page": text}))
        .errors["per_page"]
        .startswith("a whole number")
    )
    assert _positive_int(text) is None  # AWS's "gpu" counts
    assert _retry_after(text) is None  # neither seconds nor an HTTP date
    assert owner_alive(f"{_host()}:{text}:?") is None
    assert owner_alive(f"{_host()}:{os.getpid()}:?") is True
