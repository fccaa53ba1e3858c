"""The query service in depth: every filter and sort, cursors pinned across an ingest,
as_of, history buckets, diff and change feed, exports, eligible providers, TCO, caching."""

from __future__ import annotations

import base64
import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import Engine, select, update

from schema.prices import CatalogVersion, Offer, PriceObservation, sort_key_e10
from service.api.main import create_app
from service.catalog.fx import Rate, store_rates
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.core.migrate import downgrade, upgrade
from tests.support.factories import record
from tests.support.readonly import unchanged

GPUS = ["H100 SXM", "A100 80GB", "H200 SXM", "L4"]
COUNTRIES = ["DE", "FR", "US", "JP", "NL"]


def catalog(provider: str, source: str, n: int, shift: int = 0) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        out.append(
            record(
                i,
                provider=provider,
                source=source,
                sku=f"{provider}-{i}",
                gpu_name_raw=GPUS[i % len(GPUS)],
                gpu_count=str([1, 2, 4, 8][i % 4]),
                region=f"{provider}-r{i % 3}",
                country=COUNTRIES[(i + shift) % len(COUNTRIES)],
                price_kind=["on_demand", "spot", "reserved_1y"][i % 3],
                unit="hour",
                bare_metal=(i % 5 == 0),
                amount=str(Decimal("1.00") + Decimal((i * 37 + shift) % 90) / 4),
            )
        )
    return out


PROVIDERS = [("lambda", "lambda", 0), ("ovhcloud", "ovhcloud", 1), ("aws", "aws", 2)]


def seed(engine: Engine, settings: Settings) -> None:
    """The catalog, on a database that holds the reference data already."""
    for provider, source, shift in PROVIDERS:
        ingest(
            engine,
            settings,
            CrawlResult(source=source, records=catalog(provider, source, 24, shift)),
        )
    # a peer copy of lambda's first 6 offers (hidden by default) plus 2 of its own
    peer = [
        dict(r, source="skypilot:lambda", amount="0.50") for r in catalog("lambda", "lambda", 6)
    ]
    peer += [
        dict(r, source="skypilot:lambda", sku=f"peer-only-{i}")
        for i, r in enumerate(catalog("lambda", "lambda", 2))
    ]
    ingest(engine, settings, CrawlResult(source="skypilot:lambda", records=peer))


def _client(engine: Engine, settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"scheduler_enabled": False}))
    with TestClient(app) as test_client:
        test_client.engine = engine  # type: ignore[attr-defined]
        test_client.gpuatlas_settings = settings  # type: ignore[attr-defined]
        yield test_client


@pytest.fixture(scope="module")
def client(module_engine: Engine, module_settings: Settings) -> Iterator[TestClient]:
    """One catalog for the module's tests that only read it (checked after them)."""
    seed(module_engine, module_settings)
    with unchanged(module_engine):
        yield from _client(module_engine, module_settings)


@pytest.fixture
def writable(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    """The same catalog in a database of the test's own, for tests that write."""
    seed(engine, settings)
    yield from _client(engine, settings)


def page_all(client: TestClient, params: dict[str, Any], limit: int = 7) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, "limit": limit, **({"cursor": cursor} if cursor else {})}
        response = client.get("/v1/offers", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        seen += body["data"]
        cursor = body["next_cursor"]
        if not cursor:
            return seen


def test_precedence_hides_peer_copies_unless_asked(client: TestClient) -> None:
    default = page_all(client, {}, limit=1000)
    sources = {o["source"] for o in default}
    assert "skypilot:lambda" in sources  # the two peer-only offers fill a gap
    peers = [o for o in default if o["source"] == "skypilot:lambda"]
    assert sorted(o["sku"] for o in peers) == ["peer-only-0", "peer-only-1"]
    everything = page_all(client, {"include_peers": "true"}, limit=1000)
    assert len(everything) == len(default) + 6


@pytest.fixture
def bare_client(engine: Engine, settings: Settings) -> Iterator[TestClient]:
    """The application on a migrated, empty database (for answers that read no data)."""
    app = create_app(settings.model_copy(update={"scheduler_enabled": False}))
    with TestClient(app) as test_client:
        yield test_client


def _matches(offer: dict[str, Any], params: dict[str, Any]) -> bool:
    if "gpu" in params and not offer["gpu"].startswith("nvidia-" + params["gpu"]):
        return False
    if "min_gpus" in params and Decimal(offer["gpu_count"]) < Decimal(params["min_gpus"]):
        return False
    if "max_gpus" in params and Decimal(offer["gpu_count"]) > Decimal(params["max_gpus"]):
        return False
    if "provider" in params and offer["provider"] != params["provider"]:
        return False
    if "price_kind" in params and offer["price_kind"] != params["price_kind"]:
        return False
    if "country" in params and offer["country"] != params["country"]:
        return False
    if "not_country" in params and offer["country"] in params["not_country"].split(","):
        return False
    if "bare_metal" in params and offer["bare_metal"] != (params["bare_metal"] == "true"):
        return False
    if "provider_hq_not_in" in params and offer["provider"] in ("lambda", "aws", "skypilot"):
        return False
    return not (
        "max_price_per_gpu_hour" in params
        and Decimal(offer["price_per_gpu_hour_usd"]) > Decimal(params["max_price_per_gpu_hour"])
    )


FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "gpu": st.sampled_from(["h100", "a100", "h200"]),
        "min_gpus": st.sampled_from(["1", "2", "4"]),
        "max_gpus": st.sampled_from(["4", "8"]),
        "provider": st.sampled_from(["lambda", "ovhcloud", "aws"]),
        "price_kind": st.sampled_from(["on_demand", "spot", "reserved_1y"]),
        "country": st.sampled_from(COUNTRIES),
        "not_country": st.sampled_from(["DE", "US,JP"]),
        "bare_metal": st.sampled_from(["true", "false"]),
        "provider_hq_not_in": st.just("US"),
        "max_price_per_gpu_hour": st.sampled_from(["0.5", "2", "5.25"]),
    },
)
SORTS = st.sampled_from(
    ["price_per_gpu_hour", "-price", "price_per_pflop_hour", "gpu_count", "-provider"]
)


def _key(offer: dict[str, Any], sort: str, tflops: dict[str, Decimal]) -> Any:
    name = sort.removeprefix("-")
    if name == "provider":
        return offer["provider"]
    if name == "gpu_count":
        return Decimal(offer["gpu_count"])
    if name == "price":
        value = offer["hourly_price"]["amount"]  # USD quotes here: hourly_usd == hourly amount
        return Decimal(value)
    if name == "price_per_pflop_hour":
        value = offer["price_per_pflop_hour_usd"]
        return None if value is None else Decimal(value)
    return Decimal(offer["price_per_gpu_hour_usd"])


@hsettings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=FILTERS, sort=SORTS, limit=st.integers(1, 9))
def test_every_offer_matches_every_filter_sorted_and_paged_once(
    client: TestClient, params: dict[str, Any], sort: str, limit: int
) -> None:
    full = client.get("/v1/offers", params={**params, "sort": sort, "limit": 1000}).json()["data"]
    paged = page_all(client, {**params, "sort": sort}, limit=limit)
    assert [o["id"] for o in paged] == [o["id"] for o in full]
    assert len({o["id"] for o in paged}) == len(paged)
    assert all(_matches(o, params) for o in full), params
    keys = [_key(o, sort, {}) for o in full]
    present = [k for k in keys if k is not None]
    assert keys[: len(present)] == present, "nulls sort last"
    assert present == sorted(present, reverse=sort.startswith("-"))


def test_every_matching_offer_is_returned(client: TestClient) -> None:
    everything = page_all(client, {}, limit=1000)
    params = {"gpu": "h100", "not_country": "US", "bare_metal": "false", "max_gpus": "4"}
    got = {o["id"] for o in page_all(client, params)}
    assert got == {o["id"] for o in everything if _matches(o, params)} and got


def test_cursor_is_pinned_while_an_ingest_commits(writable: TestClient) -> None:
    engine, settings = writable.engine, writable.gpuatlas_settings  # type: ignore[attr-defined]
    first = writable.get("/v1/offers", params={"limit": 10}).json()
    version = first["catalog_version"]
    before = page_all(writable, {}, limit=1000)
    # a real ingest: lambda withdraws half its offers, reprices the rest, adds new ones
    changed = catalog("lambda", "lambda", 24)[:14]
    for r in changed:
        r["amount"] = str(Decimal(r["amount"]) / 10)
    changed += [
        record(900 + i, provider="lambda", source="lambda", sku=f"new-{i}") for i in range(5)
    ]
    ingest(
        engine,
        settings.model_copy(update={"min_offer_ratio": Decimal(0)}),
        CrawlResult(source="lambda", records=changed),
    )
    seen = [o["id"] for o in first["data"]]
    cursor = first["next_cursor"]
    pages = 1
    while cursor:
        body = writable.get("/v1/offers", params={"limit": 10, "cursor": cursor}).json()
        assert body["catalog_version"] == version
        seen += [o["id"] for o in body["data"]]
        cursor = body["next_cursor"]
        pages += 1
    assert pages > 3
    assert seen == [o["id"] for o in before]
    now = writable.get("/v1/offers", params={"limit": 1000}).json()
    assert now["catalog_version"] == version + 1 and len(now["data"]) != len(before)
    old = writable.get("/v1/offers", params={"limit": 1000, "as_of": str(version)}).json()
    assert [o["id"] for o in old["data"]] == [o["id"] for o in before]
    assert [o["price"] for o in old["data"]] == [o["price"] for o in before]


def test_cursor_errors(client: TestClient) -> None:
    cursor = client.get("/v1/offers", params={"limit": 2}).json()["next_cursor"]
    other = client.get("/v1/offers", params={"limit": 2, "gpu": "h100", "cursor": cursor})
    assert other.status_code == 400 and other.json()["invalid_params"][0]["name"] == "cursor"
    for bad in ("e30", "eyJ2IjoxfQ", "bnVsbA"):
        response = client.get("/v1/offers", params={"cursor": bad})
        assert response.status_code == 400, bad


def _forged(cursor: str, **changes: Any) -> str:
    """``cursor`` with some of its fields replaced: what a client that edits cursors sends."""
    state = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    return base64.urlsafe_b64encode(json.dumps({**state, **changes}).encode()).decode()


HUGE = 2**63 + 5
"""Parses as a JSON integer, does not fit a 64-bit database integer."""


@pytest.mark.parametrize("sort", ["price_per_gpu_hour", "-gpu_count"])
def test_edited_cursors_are_refused_not_failed(client: TestClient, sort: str) -> None:
    """A cursor edited by hand (a list, NaN, an id or key no database integer holds, a
    version that is a boolean) is a 400 naming ``cursor``, current or pinned, never a 500."""
    first = client.get("/v1/offers", params={"sort": sort, "limit": 2}).json()
    version = first["catalog_version"]
    edits: list[dict[str, Any]] = [
        {"k": [1]},
        {"k": {"a": 1}},
        {"k": "nan"},
        {"k": "inf"},
        {"k": "-Infinity"},
        {"k": 1e300},
        {"k": HUGE},
        {"k": str(HUGE)},
        {"i": HUGE},
        {"i": True},
        {"v": True},
    ]
    for edit in edits:
        for pinned in ({}, {"v": version - 1}):
            cursor = _forged(first["next_cursor"], **{**pinned, **edit})
            params = {"sort": sort, "limit": 2, "cursor": cursor}
            response = client.get("/v1/offers", params=params)
            assert response.status_code == 400, (edit, pinned, response.text)
            assert response.json()["invalid_params"][0]["name"] == "cursor"


def test_edited_diff_and_change_cursors_are_refused(client: TestClient) -> None:
    diff = client.get("/v1/diff", params={"from": 0, "limit": 2}).json()["next_cursor"]
    changes = client.get("/v1/changes", params={"limit": 2}).json()["next_cursor"]
    latest = client.get("/v1/versions").json()[0]["id"]
    for path, params in (
        ("/v1/diff", {"from": 0, "cursor": _forged(diff, o=HUGE)}),
        ("/v1/changes", {"cursor": _forged(changes, o=HUGE)}),
        ("/v1/changes", {"cursor": _forged(changes, v=HUGE)}),
        ("/v1/changes", {"cursor": _forged(changes, u=True)}),
        ("/v1/changes", {"cursor": _forged(changes, u=1, v=latest)}),  # past the version it pins
    ):
        response = client.get(path, params=params)
        assert response.status_code == 400, (path, params, response.text)
        assert response.json()["invalid_params"][0]["name"] == "cursor"


def test_as_of_time_and_version(client: TestClient) -> None:
    versions = client.get("/v1/versions").json()
    first = versions[-1]
    by_version = client.get("/v1/offers", params={"as_of": str(first["id"]), "limit": 1000})
    by_time = client.get("/v1/offers", params={"as_of": first["created_at"], "limit": 1000})
    assert by_version.json()["data"] == by_time.json()["data"]
    assert {o["provider"] for o in by_version.json()["data"]} == {"lambda"}
    assert client.get("/v1/offers", params={"as_of": "2000-01-01T00:00:00Z"}).json()["data"] == []
    assert client.get("/v1/offers", params={"as_of": "99999"}).status_code == 422
    assert client.get("/v1/offers", params={"as_of": "2026-01-01T00:00:00"}).status_code == 422
    past_utc = client.get("/v1/offers", params={"as_of": "9999-12-31T23:59:59-14:00"})
    assert past_utc.status_code == 422 and "as_of: out of range" in past_utc.json()["detail"]


def test_offer_context_and_display_currency(writable: TestClient) -> None:
    offer = writable.get("/v1/offers", params={"gpu": "h100", "limit": 1}).json()["data"][0]
    assert offer["price_per_pflop_hour_usd"] is not None
    expected = Decimal(offer["price_per_gpu_hour_usd"]) * 1000 / Decimal("989.5")
    assert abs(Decimal(offer["price_per_pflop_hour_usd"]) - expected) < Decimal("1e-9")
    assert offer["last_confirmed"] is not None
    assert isinstance(offer["certifications"], list)
    usd = writable.get("/v1/offers", params={"limit": 1, "currency": "usd"}).json()["data"][0]
    assert usd["display_price"]["currency"] == "USD"
    assert writable.get("/v1/offers", params={"currency": "XXQ"}).status_code == 422
    assert writable.get("/v1/offers", params={"currency": "JPY"}).status_code == 422  # no rate
    engine = writable.engine  # type: ignore[attr-defined]
    with engine.begin() as conn:
        store_rates(
            conn,
            [
                Rate(date(2026, 1, 2), "USD", Decimal("1.25")),
                Rate(date(2026, 1, 2), "JPY", Decimal("150")),
            ],
            "test",
            None,
        )
    eur = writable.get("/v1/offers", params={"limit": 1, "currency": "EUR"}).json()["data"][0]
    assert Decimal(eur["display_price"]["amount"]) == Decimal(eur["price_usd"]) * Decimal("0.8")
    jpy = writable.get("/v1/offers", params={"limit": 1, "currency": "JPY"}).json()["data"][0]
    assert jpy["display_price"]["currency"] == "JPY"


def test_history_buckets(writable: TestClient) -> None:
    engine, settings = writable.engine, writable.gpuatlas_settings  # type: ignore[attr-defined]
    recs = catalog("aws", "aws", 24, 2)
    for amount in ("3.00", "2.00", "5.00"):
        recs[0]["amount"] = amount
        ingest(engine, settings, CrawlResult(source="aws", records=recs))
    offer = next(o for o in page_all(writable, {"provider": "aws"}, 100) if o["sku"] == "aws-0")
    raw = writable.get(f"/v1/offers/{offer['id']}/history").json()
    assert [h["amount"] for h in raw][-3:] == ["3", "2", "5"]
    day = writable.get(f"/v1/offers/{offer['id']}/history", params={"resolution": "day"}).json()
    assert day["resolution"] == "day" and len(day["data"]) == 1
    bucket = day["data"][0]
    lowest = min(Decimal(h["amount"]) for h in raw)
    assert (Decimal(bucket["min"]), bucket["max"], bucket["last"]) == (lowest, "5", "5")
    assert bucket["observations"] == len(raw)
    week = writable.get(f"/v1/offers/{offer['id']}/history", params={"resolution": "week"}).json()
    assert week["data"][0]["last"] == "5"
    bad = writable.get(f"/v1/offers/{offer['id']}/history", params={"resolution": "hour"})
    assert bad.status_code == 422


def test_history_buckets_are_never_cut_short_nor_run_ahead(writable: TestClient) -> None:
    """Day buckets of a price in force since 2000: more than MAX_BUCKETS, so a 422 asking for
    a narrower range (it answered the oldest 5000 days and dropped every later one); weeks
    fit. A ``to`` in the future gives no bucket for days that have not come (it gave one
    per day up to ``to``, with today's price)."""
    engine = writable.engine  # type: ignore[attr-defined]
    with engine.begin() as conn:
        conn.execute(
            update(CatalogVersion.__table__)  # type: ignore[attr-defined]
            .where(CatalogVersion.__table__.c.id == 1)  # type: ignore[attr-defined]
            .values(created_at=datetime(2000, 1, 3, tzinfo=UTC))
        )
    offer = writable.get("/v1/offers", params={"provider": "lambda", "limit": 1}).json()["data"][0]
    path = f"/v1/offers/{offer['id']}/history"
    day = writable.get(path, params={"resolution": "day"})
    assert day.status_code == 422, day.text[:300]
    assert {p["name"] for p in day.json()["invalid_params"]} == {"from"}
    week = writable.get(path, params={"resolution": "week"}).json()["data"]
    assert week[0]["start"] == "2000-01-03T00:00:00Z"
    today = datetime.now(UTC).date()
    assert date.fromisoformat(week[-1]["start"][:10]) > today - timedelta(days=7)
    ahead = writable.get(
        path,
        params={"resolution": "day", "from": f"{today}T00:00:00Z", "to": "2100-01-01T00:00:00Z"},
    ).json()["data"]
    assert [b["start"][:10] for b in ahead] == [str(today)]


@pytest.mark.parametrize("resolution", ["raw", "day", "week"])
@pytest.mark.parametrize("name", ["from", "to"])
def test_history_times_beyond_the_calendar_are_refused(
    client: TestClient, name: str, resolution: str
) -> None:
    """A time whose UTC instant lies past year 9999 (or before year 1) is a 422 naming it."""
    offer = client.get("/v1/offers", params={"limit": 1}).json()["data"][0]
    for value in ("9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"):
        params = {name: value, "resolution": resolution}
        if name == "from" and value.startswith("0001"):
            params["to"] = "0001-01-02T00:00:00Z"
        response = client.get(f"/v1/offers/{offer['id']}/history", params=params)
        assert response.status_code == 422, (params, response.text)
        assert response.json()["invalid_params"][0]["name"] == name


def test_diff_and_change_feed(writable: TestClient) -> None:
    engine, settings = writable.engine, writable.gpuatlas_settings  # type: ignore[attr-defined]
    version = writable.get("/v1/versions").json()[0]["id"]
    recs = catalog("ovhcloud", "ovhcloud", 24, 1)
    recs[0]["amount"] = "2.5"
    recs = recs[:-1] + [record(77, provider="ovhcloud", source="ovhcloud", sku="ovh-new")]
    ingest(engine, settings, CrawlResult(source="ovhcloud", records=recs))
    diff = writable.get("/v1/diff", params={"from": version, "to": version + 1}).json()
    kinds = sorted((c["kind"], c["offer"]["sku"]) for c in diff["data"])
    assert kinds == [("added", "ovh-new"), ("changed", "ovhcloud-0"), ("withdrawn", "ovhcloud-23")]
    changed = next(c for c in diff["data"] if c["kind"] == "changed")
    assert changed["new"]["amount"] == "2.5" and changed["old"]["amount"] == "1.25"
    feed = writable.get("/v1/changes", params={"since": version}).json()
    assert sorted((c["kind"], c["offer"]["sku"]) for c in feed["data"]) == kinds
    assert all(c["version"] == version + 1 for c in feed["data"])
    # the whole feed from the start, paged, equals one page
    whole = writable.get("/v1/changes", params={"since": 0, "limit": 1000}).json()["data"]
    paged, cursor = [], None
    while True:
        body = writable.get(
            "/v1/changes", params={"since": 0, "limit": 5, **({"cursor": cursor} if cursor else {})}
        ).json()
        paged += body["data"]
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert paged == whole and len(whole) == 24 * 3 + 8 + 3
    diff_pages = writable.get("/v1/diff", params={"from": 0, "limit": 10}).json()
    assert diff_pages["next_cursor"] and len(diff_pages["data"]) == 10
    # a diff's cursor pages that diff: another from or to is refused, not answered
    following = {"cursor": diff_pages["next_cursor"], "limit": 10}
    for other in ({"from": 1}, {"from": 0, "to": version}):
        refused = writable.get("/v1/diff", params={**other, **following})
        assert refused.status_code == 400 and "cursor" in refused.text, other
    # to left out: the next page is the same diff, after a newer version too
    ingest(engine, settings, CrawlResult(source="ovhcloud", records=recs[:3]))
    second = writable.get("/v1/diff", params={"from": 0, **following}).json()
    assert second["to_version"] == diff_pages["to_version"] == version + 1
    whole = writable.get("/v1/diff", params={"from": 0, "to": version + 1, "limit": 20}).json()
    assert diff_pages["data"] + second["data"] == whole["data"][:20]
    assert writable.get("/v1/diff", params={"from": 999}).status_code == 422


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_streams_the_listing(client: TestClient, fmt: str) -> None:
    params = {"gpu": "h100", "not_country": "US"}
    listing = page_all(client, params, limit=1000)
    response = client.get("/v1/export", params={**params, "format": fmt})
    assert response.status_code == 200, response.text
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(response.text)))
    elif fmt == "jsonl":
        rows = [json.loads(line) for line in response.text.splitlines()]
    else:
        rows = pq.read_table(io.BytesIO(response.content)).to_pylist()
    assert sorted(int(r["id"]) for r in rows) == sorted(o["id"] for o in listing)
    by_id = {o["id"]: o for o in listing}
    for row in rows:
        assert row["amount"] == by_id[int(row["id"])]["price"]["amount"]  # exact strings


def test_eligible_providers_and_explain(client: TestClient) -> None:
    body = client.get(
        "/v1/eligible-providers",
        params={"gpu": "h100", "provider_hq_not_in": "US", "explain": "true"},
    ).json()
    assert [r["provider"] for r in body["data"]] == ["ovhcloud"]
    cheapest = page_all(client, {"gpu": "h100", "provider": "ovhcloud"}, 1000)
    assert body["data"][0]["cheapest"]["id"] == cheapest[0]["id"]
    assert body["data"][0]["offer_count"] == len(cheapest)
    excluded = {e["provider"]: e["reasons"] for e in body["excluded"]}
    assert excluded["lambda"] == ["provider_hq_not_in=US"]
    assert excluded["gcp"] == ["no current offers"]


def test_tco(client: TestClient) -> None:
    body = client.get(
        "/v1/tco",
        params={"gpu": "h100", "gpu_count": "8", "hours_per_month": "730", "months": "24"},
    ).json()
    lam = next(p for p in body["data"] if p["provider"] == "lambda")
    options = {o["price_kind"]: o for o in lam["options"]}
    od = options["on_demand"]
    assert Decimal(od["total_usd"]) == Decimal(od["price_per_gpu_hour_usd"]) * 8 * 730 * 24
    if "reserved_1y" in options:
        r = options["reserved_1y"]
        assert Decimal(r["total_usd"]) == Decimal(r["price_per_gpu_hour_usd"]) * 8 * 730 * 24


def test_reference_endpoints(writable: TestClient) -> None:
    gpus = writable.get("/v1/gpus").json()
    assert any(g["slug"] == "nvidia-h100-sxm-80gb" for g in gpus)
    assert writable.get("/v1/gpus/nvidia-h100-sxm-80gb").json()["active_offers"] > 0
    assert writable.get("/v1/gpus/nope").status_code == 404
    providers = writable.get("/v1/providers").json()
    assert next(p for p in providers if p["slug"] == "lambda")["active_offers"] == 24 + 8
    assert writable.get("/v1/providers/ovhcloud").json()["hq_country"] == "FR"
    assert writable.get("/v1/providers/nope").status_code == 404
    french = writable.get("/v1/regions", params={"country": "fr"}).json()
    assert french and {region["country"] for region in french} == {"FR"}
    from service.crawl.sources import sync_sources

    assert writable.get("/v1/sources").json() == []  # nothing synced yet: the API only reads
    sync_sources(writable.engine)  # type: ignore[attr-defined]
    sources = {s["name"]: s for s in writable.get("/v1/sources").json()}
    assert sources["aws"]["provider"] == "aws" and sources["aws"]["interval_seconds"] == 86400
    assert sources["ecb"]["kind"] == "fx" and sources["ecb"]["last_run"] is None


def test_etag_304_and_cache_control(writable: TestClient) -> None:
    first = writable.get("/v1/offers", params={"gpu": "h100"})
    tag = first.headers["etag"]
    assert "max-age" in first.headers["cache-control"]
    again = writable.get("/v1/offers", params={"gpu": "h100"}, headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.headers["etag"] == tag
    other = writable.get("/v1/offers", params={"gpu": "a100"}, headers={"If-None-Match": tag})
    assert other.status_code == 200
    engine, settings = writable.engine, writable.gpuatlas_settings  # type: ignore[attr-defined]
    recs = catalog("aws", "aws", 24, 2)
    recs[0]["amount"] = "3.33"
    ingest(engine, settings, CrawlResult(source="aws", records=recs))
    stale = writable.get("/v1/offers", params={"gpu": "h100"}, headers={"If-None-Match": tag})
    assert stale.status_code == 200 and stale.headers["etag"] != tag


def test_metrics(client: TestClient) -> None:
    client.get("/v1/offers")
    text = client.get("/metrics").text
    assert 'gpuatlas_http_requests_total{method="GET",route="/v1/offers",status="200"}' in text
    assert "gpuatlas_http_request_duration_seconds_bucket" in text
    assert "gpuatlas_active_offers " in text and "gpuatlas_crawl_runs_total" in text


@pytest.mark.parametrize(
    ("path", "status", "name"),
    [
        ("/v1/offers?sort=cheapest", 422, "sort"),
        ("/v1/offers?not_country=Germany", 422, "not_country"),
        ("/v1/offers?min_gpus=8&max_gpus=2", 422, "min_gpus"),
        ("/v1/offers?gdpr=maybe", 422, "gdpr"),
        ("/v1/eligible-providers?colour=red", 400, "colour"),
        ("/v1/tco?months=0", 422, "months"),
        ("/v1/export?format=xlsx", 422, "format"),
        ("/v1/diff", 422, "from"),
        ("/v1/changes?since=-1", 422, "since"),
        ("/v1/changes?cursor=zzz", 400, "cursor"),
        ("/v1/regions?country=France", 422, "country"),
        ("/v1/versions?before=0", 422, "before"),
    ],
)
def test_new_errors_are_problem_documents(
    bare_client: TestClient, path: str, status: int, name: str
) -> None:
    """Refused before any data is read: an empty catalog answers the same."""
    response = bare_client.get(path)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert any(p["name"] == name for p in response.json()["invalid_params"])


def test_compliance_filters_answer_or_say_not_available(client: TestClient) -> None:
    for params in ({"cert": "iso27001"}, {"gdpr": "eu_eea"}, {"export_destination": "CN"}):
        response = client.get("/v1/offers", params=params)
        assert response.status_code in (200, 400), response.text
        if response.status_code == 400:
            assert response.json()["type"].endswith("filter-not-available")


def _sort_prices(engine: Engine) -> list[tuple[Any, ...]]:
    """(offer id, offer.gpu_hour_usd, its sort key, the current observation's gpu_hour_usd)."""
    offer, obs = Offer.__table__, PriceObservation.__table__  # type: ignore[attr-defined]
    stmt = (
        select(offer.c.id, offer.c.gpu_hour_usd, offer.c.gpu_hour_usd_e10, obs.c.gpu_hour_usd)
        .join(obs, obs.c.id == offer.c.observation_id)
        .order_by(offer.c.id)
    )
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(stmt)]


def _assert_sort_prices_consistent(engine: Engine) -> list[tuple[Any, ...]]:
    rows = _sort_prices(engine)
    assert rows and any(r[1] is not None for r in rows)
    for offer_id, price, key, observed in rows:
        assert price == observed, offer_id
        assert key == sort_key_e10(observed), offer_id
        assert key is None or Decimal(key).scaleb(-10) == price  # exact, not rounded
    return rows


def test_sort_price_is_written_with_every_price(writable: TestClient) -> None:
    engine, settings = writable.engine, writable.gpuatlas_settings  # type: ignore[attr-defined]
    _assert_sort_prices_consistent(engine)
    changed = catalog("lambda", "lambda", 24)[:14]  # withdraws 10, reprices 14, adds 1
    for r in changed:
        r["amount"] = str(Decimal(r["amount"]) / 7)  # more decimal places than a cent
    changed.append(record(950, provider="lambda", source="lambda", sku="new-950"))
    relaxed = settings.model_copy(update={"min_offer_ratio": Decimal(0)})
    ingest(engine, relaxed, CrawlResult(source="lambda", records=changed))
    ingest(  # reopens the withdrawn ones at new prices
        engine, relaxed, CrawlResult(source="lambda", records=catalog("lambda", "lambda", 24, 3))
    )
    _assert_sort_prices_consistent(engine)
    default = page_all(writable, {}, limit=1000)
    prices = [Decimal(o["price_per_gpu_hour_usd"]) for o in default]
    assert prices == sorted(prices)
    pinned = writable.get("/v1/offers", params={"limit": 1000, "as_of": str(1)}).json()["data"]
    pinned_prices = [Decimal(o["price_per_gpu_hour_usd"]) for o in pinned]
    assert pinned_prices == sorted(pinned_prices)


def test_max_price_filter_is_exact_on_both_paths(client: TestClient) -> None:
    offers = page_all(client, {}, limit=1000)
    price = Decimal(offers[len(offers) // 2]["price_per_gpu_hour_usd"])
    version = str(client.get("/v1/offers", params={"limit": 1}).json()["catalog_version"])
    for extra in ({}, {"as_of": version}):
        at = page_all(client, {"max_price_per_gpu_hour": str(price), **extra}, limit=1000)
        below = page_all(
            client,
            {"max_price_per_gpu_hour": str(price - Decimal("1e-10")), **extra},
            limit=1000,
        )
        assert {o["id"] for o in at} == {
            o["id"] for o in offers if Decimal(o["price_per_gpu_hour_usd"]) <= price
        }
        assert {o["id"] for o in below} == {
            o["id"] for o in offers if Decimal(o["price_per_gpu_hour_usd"]) < price
        }


def test_migration_backfills_the_sort_price(writable: TestClient) -> None:
    engine = writable.engine  # type: ignore[attr-defined]
    url = engine.url.render_as_string(hide_password=False)
    before = _assert_sort_prices_consistent(engine)
    engine.dispose()
    downgrade(url, "0003")
    upgrade(url)
    engine.dispose()
    assert _assert_sort_prices_consistent(engine) == before
