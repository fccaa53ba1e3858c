"""Certification alerts: a reference load (or the calendar) changes what a provider holds."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from schema.alerts import CERT_SCHEMES, Subscription
from schema.types import utcnow
from service.alerts.certs import enqueue_certification_validity
from service.alerts.dispatch import run_dispatcher_once, verify_signature
from service.alerts.keys import create_api_key
from service.api.main import create_app
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.compliance.load import SCHEMES, load_compliance
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.db import writer
from tests.support.alerts_helpers import EVENT, events, subscribe
from tests.support.factories import records
from tests.support.replay import ReplayServer, Reply

A = "{http://www.w3.org/2005/Atom}"
SUBSCRIPTION = Subscription.__table__  # type: ignore[attr-defined]
Edit = Callable[[list[dict[str, Any]]], None]


def edited_reference(tmp_path: Path, edit: Edit, name: str = "ref") -> Path:
    """A copy of fixtures/reference whose certifications.yaml went through ``edit``."""
    target = tmp_path / name
    shutil.copytree(REFERENCE_DIR, target)
    path = target / "certifications.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(data["certifications"])
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return target


def set_cert(provider: str, scheme: str, **values: Any) -> Edit:
    def edit(rows: list[dict[str, Any]]) -> None:
        [row] = [r for r in rows if r["provider"] == provider and r["scheme"] == scheme]
        row.update(values)

    return edit


def both(*edits: Edit) -> Edit:
    def edit(rows: list[dict[str, Any]]) -> None:
        for one in edits:
            one(rows)

    return edit


def catalog(engine: Engine, settings: Settings) -> None:
    """Reference data, H100 offers of lambda (DE) and ovhcloud (GRA11 and US-WEST-OR)."""
    load_reference(engine, REFERENCE_DIR)
    items = records(3, provider="lambda", country="DE")
    items += [
        dict(r, sku=f"ovh-{i}", region=region, country=country)
        for i, (r, region, country) in enumerate(
            zip(
                records(2, provider="ovhcloud"),
                ["GRA11", "US-WEST-OR"],
                ["FR", "US"],
                strict=True,
            )
        )
    ]
    assert ingest(engine, settings, CrawlResult(source="acme", records=items)).status.value == "ok"


def test_schemes_match_the_reference_loader() -> None:
    assert set(CERT_SCHEMES) == set(SCHEMES)
    # and every scheme the bundled reference data uses can be subscribed to
    rows = yaml.safe_load((REFERENCE_DIR / "certifications.yaml").read_text())["certifications"]
    used = {row["scheme"] for row in rows}
    assert used and used <= set(CERT_SCHEMES), used - set(CERT_SCHEMES)


def test_reference_load_raises_cert_events(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    catalog(engine, settings)
    subs = {
        "lambda_iso": {"filters": {"provider": "lambda"}, "condition": {"cert_gained": "iso27001"}},
        "any_h100_de": {
            "filters": {"gpu": "h100", "country": "DE"},
            "condition": {"cert_gained": True},
        },
        "lambda_soc2": {
            "filters": {"provider": "lambda"},
            "condition": {"cert_gained": "soc2_type2"},
        },
        "ovh_hds_lost": {"filters": {"provider": "ovhcloud"}, "condition": {"cert_lost": "hds"}},
        "fr_gained": {"filters": {"country": "FR"}, "condition": {"cert_gained": True}},
        "aws_lost": {"filters": {"provider": "aws"}, "condition": {"cert_lost": True}},
        "hipaa_west": {"filters": {"region": "US-WEST-OR"}, "condition": {"cert_lost": "hipaa"}},
        "hipaa_gra": {"filters": {"region": "GRA11"}, "condition": {"cert_lost": "hipaa"}},
        "everything": {"condition": {"cert_lost": True}},
    }
    ids = {name: subscribe(engine, settings, **body)[0] for name, body in subs.items()}
    changed = edited_reference(
        tmp_path,
        both(
            set_cert("lambda", "iso27001", status="certified"),
            set_cert("ovhcloud", "hds", status="not_certified"),
            set_cert("ovhcloud", "hipaa", regions=["US-EAST-VA"]),
        ),
    )
    report = load_reference(engine, changed)
    assert report.changed["certifications"] == 3
    got = {
        (
            e["subscription_id"],
            e["event_type"],
            e["payload"]["provider"],
            e["payload"]["certification"]["scheme"],
        )
        for e in events(engine)
    }
    assert got == {
        (ids["lambda_iso"], "cert_gained", "lambda", "iso27001"),
        (ids["any_h100_de"], "cert_gained", "lambda", "iso27001"),
        (ids["ovh_hds_lost"], "cert_lost", "ovhcloud", "hds"),
        (ids["hipaa_west"], "cert_lost", "ovhcloud", "hipaa"),
        (ids["everything"], "cert_lost", "ovhcloud", "hds"),
    }
    event = events(engine, subscription_id=ids["ovh_hds_lost"])[0]
    payload = event["payload"]
    assert event["offer_id"] is None and event["status"] == "delivered"  # an atom subscription
    assert payload["id"] == event["idempotency_key"]
    assert event["idempotency_key"].startswith(f"gpa-{ids['ovh_hds_lost']}-cert")
    assert payload["type"] == "cert_lost" and payload["reason"] == "reference_load"
    assert payload["certification"]["status"] == "not_certified"
    assert payload["previous"]["status"] == "certified"
    assert payload["catalog_version"] == 1
    # loading the same data again changes nothing and raises nothing
    assert load_reference(engine, changed).changed["certifications"] == 0
    assert len(events(engine)) == 5  # "everything" still sees hipaa held (in US-EAST-VA)
    # back to the original: lambda loses iso27001, ovhcloud (with an FR offer) regains hds
    load_reference(engine, REFERENCE_DIR)
    last = events(engine)[5:]
    assert {
        (e["subscription_id"], e["payload"]["provider"], e["payload"]["certification"]["scheme"])
        for e in last
    } == {(ids["everything"], "lambda", "iso27001"), (ids["fr_gained"], "ovhcloud", "hds")}


def test_events_commit_with_the_load_or_not_at_all(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    catalog(engine, settings)
    subscribe(engine, settings, condition={"cert_gained": "iso27001"})
    changed = edited_reference(tmp_path, set_cert("lambda", "iso27001", status="certified"))
    with writer(engine).connect() as conn:
        transaction = conn.begin()
        assert load_compliance(conn, changed)["certifications"] == 1
        assert len(conn.execute(EVENT.select()).all()) == 1  # written by the load's transaction
        transaction.rollback()
    assert events(engine) == []
    load_reference(engine, changed)
    assert len(events(engine)) == 1


def test_validity_dates_raise_events_once(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    catalog(engine, settings)
    today = utcnow().date()
    lost, _ = subscribe(
        engine, settings, filters={"provider": "ovhcloud"}, condition={"cert_lost": "hds"}
    )
    gained, _ = subscribe(engine, settings, condition={"cert_gained": "iso27001"})
    changed = edited_reference(
        tmp_path,
        both(
            set_cert("ovhcloud", "hds", valid_to=today + timedelta(days=2)),
            set_cert(
                "lambda", "iso27001", status="certified", valid_from=today + timedelta(days=1)
            ),
        ),
    )
    load_reference(engine, changed)
    assert events(engine) == []  # still held / not yet in force on the load's day
    now = utcnow()
    assert enqueue_certification_validity(engine, now) == 0
    after_load, _ = subscribe(engine, settings, condition={"cert_lost": True})
    late, _ = subscribe(engine, settings, condition={"cert_lost": True})
    with writer(engine).begin() as conn:  # as if subscribed once hds had run out
        conn.execute(
            SUBSCRIPTION.update()
            .where(SUBSCRIPTION.c.id == late)
            .values(created_at=now + timedelta(days=3))
        )
    in_a_day = now + timedelta(days=1)
    assert enqueue_certification_validity(engine, in_a_day) == 1
    [event] = events(engine)
    assert event["subscription_id"] == gained and event["event_type"] == "cert_gained"
    assert event["payload"]["reason"] == "valid_from"
    assert event["idempotency_key"].endswith(f"-cert_gained-{today + timedelta(days=1):%Y%m%d}")
    assert enqueue_certification_validity(engine, in_a_day) == 0  # once
    in_three = now + timedelta(days=3)
    report = run_dispatcher_once(engine, settings, clock=lambda: in_three)  # as scheduled
    assert report.raised == 2 and report.claimed == 0  # hds ran out after day 2; atom only
    expired = events(engine)[1:]
    assert {e["subscription_id"] for e in expired} == {lost, after_load}
    assert {e["payload"]["reason"] for e in expired} == {"valid_to"}
    assert enqueue_certification_validity(engine, in_three + timedelta(hours=5)) == 0
    assert enqueue_certification_validity(engine, now + timedelta(days=30)) == 0  # lookback


@pytest.fixture
def local(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "allow_private_webhooks": True,
            "webhook_timeout_seconds": 2.0,
            "scheduler_enabled": False,
        }
    )


@pytest.fixture
def client(engine: Engine, local: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(local)) as test_client:
        yield test_client


def test_end_to_end_webhook_and_feed(
    engine: Engine,
    local: Settings,
    client: TestClient,
    server: ReplayServer,
    tmp_path: Path,
) -> None:
    catalog(engine, local)
    server.route("/hook", Reply(b"ok"))
    headers = {"Authorization": f"Bearer {create_api_key(engine, 'e2e').key}"}
    body = {
        "name": "lambda gets ISO 27001",
        "channel": "webhook",
        "url": f"{server.url}/hook",
        "filters": {"provider": "lambda", "gpu": "h100"},
        "condition": {"cert_gained": "ISO27001"},
    }
    created = client.post("/v1/subscriptions", json=body, headers=headers)
    assert created.status_code == 201, created.text
    sub = created.json()
    assert sub["condition"] == {"cert_gained": "iso27001"}
    load_reference(
        engine, edited_reference(tmp_path, set_cert("lambda", "iso27001", status="certified"))
    )
    outbox = client.get(f"/v1/subscriptions/{sub['id']}/events", headers=headers).json()
    assert [(e["event_type"], e["status"], e["offer_id"]) for e in outbox] == [
        ("cert_gained", "pending", None)
    ]
    report = run_dispatcher_once(engine, local)
    assert report.delivered == 1
    [(method, path, sent, raw)] = server.requests
    assert (method, path) == ("POST", "/hook")
    assert verify_signature(sub["secret"], raw, sent["X-Gpuatlas-Signature"])
    assert sent["X-Gpuatlas-Event"] == "cert_gained"
    payload = json.loads(raw)
    assert sent["Idempotency-Key"] == payload["id"] == outbox[0]["idempotency_key"]
    assert payload["certification"]["provider"] == "lambda"
    assert payload["certification"]["status"] == "certified"
    assert payload["previous"]["status"] == "unknown"
    delivered = client.get(f"/v1/subscriptions/{sub['id']}/events", headers=headers).json()
    assert delivered[0]["status"] == "delivered"
    feed = client.get(f"/v1/subscriptions/{sub['id']}/feed.atom?token={sub['secret']}")
    assert feed.status_code == 200, feed.text
    [entry] = ET.fromstring(feed.content).findall(f"{A}entry")
    assert entry.findtext(f"{A}title") == "Certification gained: lambda iso27001"
    assert "status certified" in entry.findtext(f"{A}content", "")
    assert entry.find(f"{A}link").get("href", "").endswith("/v1/providers/lambda")  # type: ignore[union-attr]
    assert run_dispatcher_once(engine, local).claimed == 0


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ({"cert_gained": "iso9999"}, "unknown certification"),
        ({"cert_lost": False}, "unknown certification"),
        ({"cert_lost": 3}, "unknown certification"),
        ({"cert_gained": "hds", "cert_lost": "hds"}, "exactly one"),
        ({"cert_gained": True, "price_drop_pct": 5}, "exactly one"),
    ],
)
def test_bad_cert_conditions_are_problems(
    client: TestClient, engine: Engine, condition: dict[str, Any], reason: str
) -> None:
    headers = {"X-API-Key": create_api_key(engine, "bad").key}
    response = client.post(
        "/v1/subscriptions", json={"channel": "atom", "condition": condition}, headers=headers
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    doc = response.json()
    assert any(reason in p["reason"] for p in doc["invalid_params"]), doc
    assert any(p["name"].startswith("condition") for p in doc["invalid_params"]), doc


def test_a_stale_sweep_time_is_harmless(engine: Engine, settings: Settings) -> None:
    """With nothing expiring, the dispatcher's sweep writes nothing."""
    catalog(engine, settings)
    subscribe(engine, settings, condition={"cert_lost": True})
    assert enqueue_certification_validity(engine, datetime.now().astimezone()) == 0
