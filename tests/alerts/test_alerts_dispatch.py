"""Webhook delivery to a real local receiver: signatures, retries, slow receivers, dead letters."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

import pytest
from sqlalchemy import Engine, update

from schema.alerts import Subscription
from schema.types import utcnow
from service.alerts.dispatch import run_dispatcher_once, verify_signature
from service.alerts.ssrf import UnsafeUrl, check_url
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from tests.support.alerts_helpers import events, subscribe
from tests.support.factories import records
from tests.support.replay import ReplayServer, Reply


@pytest.fixture
def local(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"allow_private_webhooks": True, "webhook_timeout_seconds": 1.0}
    )


SUBSCRIPTION = Subscription.__table__  # type: ignore[attr-defined]


def two_versions(engine: Engine, settings: Settings, n: int = 3) -> None:
    ingest(engine, settings, CrawlResult(source="acme", records=records(n)))


def test_signed_delivery_with_stable_idempotency_key(
    engine: Engine, local: Settings, server: ReplayServer
) -> None:
    server.route("/hook", Reply(b"ok"))
    sub, secret = subscribe(engine, local, url=f"{server.url}/hook", condition={"new_offer": True})
    two_versions(engine, local)
    report = run_dispatcher_once(engine, local)
    assert report.delivered == 3 and report.claimed == 3
    posts = [r for r in server.requests if r[1] == "/hook"]
    assert len(posts) == 3
    stored = {e["idempotency_key"]: e for e in events(engine)}
    for _, _, headers, body in posts:
        assert verify_signature(secret, body, headers["X-Gpuatlas-Signature"])
        assert not verify_signature("wrong", body, headers["X-Gpuatlas-Signature"])
        payload = json.loads(body)
        assert headers["Idempotency-Key"] == payload["id"]
        assert stored[payload["id"]]["status"] == "delivered"
        assert payload["subscription_id"] == sub and payload["type"] == "new_offer"
    assert run_dispatcher_once(engine, local).claimed == 0  # nothing delivered twice


def test_retry_then_success_keeps_the_key(
    engine: Engine, local: Settings, server: ReplayServer
) -> None:
    server.route("/hook", Reply(b"no", status=500), Reply(b"ok"))
    subscribe(engine, local, url=f"{server.url}/hook", condition={"new_offer": True})
    two_versions(engine, local, n=1)
    first = run_dispatcher_once(engine, local)
    assert first.retrying == 1
    [event] = events(engine)
    assert event["status"] == "pending" and event["attempts"] == 1
    assert "HTTP 500" in event["last_error"]
    wait = event["next_attempt_at"] - utcnow()
    assert timedelta(seconds=10) < wait <= timedelta(seconds=31)
    later = utcnow() + timedelta(minutes=1)
    assert run_dispatcher_once(engine, local, clock=lambda: later).delivered == 1
    keys = [r[2]["Idempotency-Key"] for r in server.requests]
    assert len(keys) == 2 and len(set(keys)) == 1


def test_hanging_and_failing_receivers_do_not_block_others(
    engine: Engine, local: Settings, server: ReplayServer
) -> None:
    server.route("/hang", Reply(b"late", delay=3))
    server.route("/fail", Reply(b"boom", status=503))
    server.route("/good", Reply(b"ok"))
    for path in ("hang", "fail", "good"):
        subscribe(engine, local, url=f"{server.url}/{path}", condition={"new_offer": True})
    two_versions(engine, local, n=5)
    started = utcnow()
    report = run_dispatcher_once(engine, local)
    elapsed = (utcnow() - started).total_seconds()
    assert report.delivered == 5  # every event of the good receiver
    assert report.retrying == 2 and report.released == 8  # one try per broken receiver
    assert elapsed < 2.5, "a hanging receiver held the run past its timeout"
    assert sum(1 for r in server.requests if r[1] == "/hang") == 1
    hung = [e for e in events(engine) if e["status"] == "pending" and e["attempts"] == 1]
    assert any("timed out" in e["last_error"] for e in hung)


def test_dead_letter_after_the_retry_window(
    engine: Engine, local: Settings, server: ReplayServer
) -> None:
    server.route("/hook", Reply(b"down", status=500))
    subscribe(engine, local, url=f"{server.url}/hook", condition={"new_offer": True})
    two_versions(engine, local, n=1)
    now: list[datetime] = [utcnow()]
    rng = random.Random(7)
    for _ in range(60):
        report = run_dispatcher_once(engine, local, clock=lambda: now[0], rng=rng)
        if report.dead:
            break
        [event] = events(engine)
        now[0] = event["next_attempt_at"] + timedelta(seconds=1)
    [event] = events(engine)
    assert event["status"] == "dead"
    assert (
        event["created_at"] + timedelta(hours=20)
        < now[0]
        < event["created_at"] + timedelta(hours=25)
    )
    assert 8 <= event["attempts"] <= 50


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://10.1.2.3/x",
        "http://192.168.0.1/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/x",
        "http://[fd00:ec2::254]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://[2002:7f00:1::]/x",  # 6to4 of 127.0.0.1 (Python calls it global)
        "http://[2002:a9fe:a9fe::1]/x",  # 6to4 of the metadata address
        "http://0.0.0.0/x",
        "http://224.0.0.1/x",
        "http://localhost:8080/x",
        "ftp://example.com/x",
        "file:///etc/passwd",
        "http://user:pw@example.com/x",
        "http://",
        # public addresses, but URLs that delivery (httpx) cannot send: Python's urlsplit
        # drops tabs and newlines and strips leading spaces, httpx refuses them
        "http://93.184.215.14/x\t",
        "http://93.184.215.14/x\r\nX-Injected: 1",
        " http://93.184.215.14/x",
        "http://93.184.215.14/x\x00",
        "http://93.184.215.14:0/x",  # port 0: nothing listens there
    ],
)
def test_ssrf_refusals(url: str) -> None:
    with pytest.raises(UnsafeUrl):
        check_url(url)


def test_an_unsendable_stored_url_does_not_stop_the_run(
    engine: Engine, local: Settings, server: ReplayServer
) -> None:
    """A subscription stored with a URL httpx refuses (accepted before the check above)
    was an exception out of the whole dispatcher run: every claimed event stayed leased,
    and the next run failed the same way. Now it is one refused delivery, retried."""
    server.route("/good", Reply(b"ok"))
    bad, _ = subscribe(engine, local, url=f"{server.url}/bad", condition={"new_offer": True})
    subscribe(engine, local, url=f"{server.url}/good", condition={"new_offer": True})
    with engine.begin() as conn:
        conn.execute(
            update(SUBSCRIPTION).where(SUBSCRIPTION.c.id == bad).values(url=f"{server.url}/bad\t")
        )
    two_versions(engine, local, n=2)
    report = run_dispatcher_once(engine, local)
    assert report.delivered == 2 and report.retrying == 1 and report.released == 1
    refused = events(engine, subscription_id=bad)
    assert [e["status"] for e in refused] == ["pending", "pending"]
    assert any("refused: invalid URL" in (e["last_error"] or "") for e in refused)
    assert [r[1] for r in server.requests] == ["/good", "/good"]


def test_private_allowed_only_when_configured() -> None:
    assert check_url("http://127.0.0.1:9/x", allow_private=True).port == 9
    assert check_url("https://93.184.215.14/hook").scheme == "https"


def test_delivery_time_ssrf_check(engine: Engine, local: Settings, server: ReplayServer) -> None:
    """A URL accepted while private webhooks were allowed is refused at delivery when not."""
    server.route("/hook", Reply(b"ok"))
    subscribe(engine, local, url=f"{server.url}/hook", condition={"new_offer": True})
    two_versions(engine, local, n=1)
    strict = local.model_copy(update={"allow_private_webhooks": False})
    report = run_dispatcher_once(engine, strict)
    assert report.retrying == 1 and server.requests == []
    assert "loopback" in events(engine)[0]["last_error"]


def test_no_redirects_followed(engine: Engine, local: Settings, server: ReplayServer) -> None:
    server.route("/hook", Reply(b"", status=302, headers={"Location": "http://169.254.169.254/"}))
    subscribe(engine, local, url=f"{server.url}/hook", condition={"new_offer": True})
    two_versions(engine, local, n=1)
    assert run_dispatcher_once(engine, local).retrying == 1
    assert "HTTP 302" in events(engine)[0]["last_error"]
    assert len(server.requests) == 1


def test_a_hanging_receiver_holds_only_its_own_events(
    engine: Engine, local: Settings, server: ReplayServer
) -> None:
    """With a window of two events, the good receiver's six events all go out (one run)
    while the hanging receiver holds one; its other events then wait for its retry."""
    server.route("/hang", Reply(b"late", delay=2.5))
    server.route("/good", Reply(b"ok"))
    hang, _ = subscribe(engine, local, url=f"{server.url}/hang", condition={"new_offer": True})
    good, _ = subscribe(engine, local, url=f"{server.url}/good", condition={"new_offer": True})
    two_versions(engine, local, n=6)
    narrow = local.model_copy(update={"dispatcher_batch_size": 2, "webhook_timeout_seconds": 2.0})
    started = utcnow()
    report = run_dispatcher_once(engine, narrow)
    assert report.delivered == 6 and report.retrying == 1 and report.released == 5
    delivered = events(engine, subscription_id=good)
    assert {e["status"] for e in delivered} == {"delivered"}
    assert max(e["delivered_at"] for e in delivered) - started < timedelta(seconds=1.5)
    held = events(engine, subscription_id=hang)
    assert sum(1 for r in server.requests if r[1] == "/hang") == 1
    assert {e["next_attempt_at"] for e in held} == {held[0]["next_attempt_at"]}
    assert held[0]["next_attempt_at"] > utcnow() + timedelta(seconds=10)
    assert run_dispatcher_once(engine, narrow).claimed == 0  # they wait for the backoff


CLAIM_AND_DIE = """
import os, signal, sys
from service.alerts.dispatch import _claim
from service.core.config import Settings
from service.core.db import make_engine
from schema.alerts import Subscription
from schema.types import utcnow
settings = Settings.model_validate_json(sys.stdin.read())
claimed = _claim(make_engine(settings.database_url), settings, utcnow(), 100)
print(len(claimed), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_events_claimed_by_a_killed_dispatcher_are_taken_back_at_once(
    engine: Engine, local: Settings, server: ReplayServer
) -> None:
    """A dispatcher SIGKILLed between claiming events and recording their outcome leaves
    them leased (webhook timeout + 60 s). The next run sees that the claimant process is
    gone and delivers them now; a lease held by a live process is left alone."""
    import os
    import signal
    import subprocess
    import sys

    from service.catalog.run_owner import this_owner
    from service.core.config import PROJECT_ROOT

    server.route("/hook", Reply(b"ok"))
    subscribe(engine, local, url=f"{server.url}/hook", condition={"new_offer": True})
    two_versions(engine, local, n=2)
    child = subprocess.run(
        [sys.executable, "-c", CLAIM_AND_DIE],
        input=local.model_dump_json(),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        check=False,
    )
    assert child.returncode == -signal.SIGKILL and child.stdout.strip() == "2", child.stderr
    leased = events(engine)
    assert all(e["status"] == "pending" and e["claimed_by"] for e in leased)
    assert all(e["next_attempt_at"] > utcnow() for e in leased)  # waiting out the lease
    report = run_dispatcher_once(engine, local)
    assert (report.reclaimed, report.delivered) == (2, 2)
    assert [e["status"] for e in events(engine)] == ["delivered", "delivered"]
    assert all(e["claimed_by"] is None for e in events(engine))
    assert len([r for r in server.requests if r[1] == "/hook"]) == 2
    # A live claimant (this process) keeps its lease.
    two_versions_more = records(4)
    ingest(engine, local, CrawlResult(source="acme", records=two_versions_more))
    from service.alerts.dispatch import _claim

    assert len(_claim(engine, local, utcnow(), 100)) == 2
    assert {e["claimed_by"] for e in events(engine, status="pending")} == {this_owner()}
    again = run_dispatcher_once(engine, local)
    assert (again.reclaimed, again.claimed) == (0, 0)
