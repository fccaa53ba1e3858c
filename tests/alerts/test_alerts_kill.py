"""The outbox survives SIGKILL: every event is delivered, once per key after deduplication.

1. A child process ingests a change that raises events, reports ``committed`` and is
   SIGKILLed before any delivery: a dispatcher run afterwards delivers every event.
2. A child is SIGKILLed in the middle of ``run_dispatcher_once``, after it claimed a
   batch and while the receiver holds one of its requests: the next dispatcher run sees
   that the events' claimant is dead, takes them back at once and redelivers them with
   the same ``Idempotency-Key``; the receiver, deduplicating on it, sees each event
   exactly once.

Run as ``python -m tests.alerts.test_alerts_kill ingest|dispatch DATABASE_URL`` for the children.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sqlalchemy import Engine

from schema.types import utcnow
from service.alerts.dispatch import run_dispatcher_once, verify_signature
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from tests.conftest import ROOT
from tests.support.alerts_helpers import events, subscribe
from tests.support.factories import records

BASE = 40
CHILD_TIMEOUT = 20.0  # the killed dispatcher's webhook timeout: its lease is 80 s


def changed_set() -> list[dict[str, Any]]:
    """Versus ``records(BASE)``: 10 price drops, 5 rises, 5 new offers, 2 withdrawals."""
    out = [dict(r) for r in records(BASE + 5)[: BASE - 2]] + records(BASE + 5)[BASE:]
    for i in range(10):
        out[i]["amount"] = "15.00"
    for i in range(10, 15):
        out[i]["amount"] = "29.00"
    return out


def local_settings(url: str, **update: Any) -> Settings:
    return Settings(  # type: ignore[call-arg]
        database_url=url,
        environment="test",
        allow_private_webhooks=True,
        _env_file=None,
        **update,
    )


class Receiver:
    """A webhook receiver on loopback that records every POST and can hold requests.

    With ``hold_after`` set, requests beyond that many are recorded and then held until
    :meth:`release` (so a dispatcher can be killed while a delivery is in flight)."""

    def __init__(self, hold_after: int | None = None) -> None:
        self.posts: list[tuple[str, dict[str, str], bytes]] = []
        self.hold_after = hold_after
        self.held = 0
        self._lock = threading.Lock()
        self._gate = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes

            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if len(body) < length:  # the sender died mid-request: not a request
                    self.close_connection = True
                    return
                with receiver._lock:
                    receiver.posts.append((self.path, dict(self.headers), body))
                    hold = receiver.hold_after is not None and len(receiver.posts) > (
                        receiver.hold_after
                    )
                    if hold:
                        receiver.held += 1
                if hold:
                    receiver._gate.wait(30)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                return  # a held request whose client was killed: nothing to report

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def keys(self) -> Counter[str]:
        with self._lock:
            return Counter(headers["Idempotency-Key"] for _, headers, _ in self.posts)

    def release(self) -> None:
        self.hold_after = None
        self._gate.set()

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


def prepare(engine: Engine, settings: Settings, receiver: Receiver) -> dict[int, str]:
    """Version 1 and three webhook subscriptions; returns their secrets by id."""
    ingest(engine, settings, CrawlResult(source="acme", records=records(BASE)))
    subs = [
        subscribe(engine, settings, url=f"{receiver.url}/a", condition={"price_drop_pct": 5}),
        subscribe(engine, settings, url=f"{receiver.url}/b", condition={"new_offer": True}),
        subscribe(
            engine,
            settings,
            url=f"{receiver.url}/c",
            filters={"provider": "acme", "country": "DE", "min_gpus": 8},
            condition={"price_rise_pct": 5},
        ),
        subscribe(engine, settings, url=f"{receiver.url}/d", condition={"withdrawn": True}),
    ]
    return dict(subs)


def spawn(mode: str, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.alerts.test_alerts_kill", mode, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
    )


def kill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    try:
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        if child.stdout is not None:
            child.stdout.close()


def drain(engine: Engine, settings: Settings, **kwargs: Any) -> int:
    """Run the dispatcher until nothing is due; returns the number of events delivered."""
    delivered = 0
    for _ in range(20):
        report = run_dispatcher_once(engine, settings, **kwargs)
        delivered += report.delivered
        if report.claimed == 0:
            return delivered
    raise AssertionError("the dispatcher never ran dry")


def check_exactly_once(engine: Engine, receiver: Receiver, secrets: dict[int, str]) -> Counter[str]:
    stored = events(engine)
    assert len(stored) == 10 + 5 + 5 + 2  # drops, new offers, rises, withdrawals
    assert {e["status"] for e in stored} == {"delivered"}
    seen = receiver.keys()
    assert set(seen) == {e["idempotency_key"] for e in stored}  # after dedupe: once each
    by_key = {e["idempotency_key"]: e for e in stored}
    for _, headers, body in receiver.posts:
        event = by_key[headers["Idempotency-Key"]]
        assert json.loads(body) == event["payload"]  # a redelivery repeats the same event
        secret = secrets[event["subscription_id"]]
        assert verify_signature(secret, body, headers["X-Gpuatlas-Signature"])
    return seen


def test_sigkill_between_ingest_and_delivery(
    engine: Engine, settings: Settings, receiver: Receiver
) -> None:
    settings = local_settings(settings.database_url)
    secrets = prepare(engine, settings, receiver)
    child = spawn("ingest", settings.database_url)
    assert child.stdout is not None
    line = child.stdout.readline().split()
    try:
        assert line == ["committed", "2"]
    finally:
        kill(child)
    pending = events(engine)
    assert len(pending) == 22 and {e["status"] for e in pending} == {"pending"}
    assert receiver.posts == []
    assert drain(engine, settings) == 22  # "after restart": one dispatcher run suffices
    seen = check_exactly_once(engine, receiver, secrets)
    assert set(seen.values()) == {1}  # nothing was in flight when the child died


def test_sigkill_during_dispatch_redelivers_at_once(engine: Engine, settings: Settings) -> None:
    settings = local_settings(settings.database_url)
    with Receiver(hold_after=3) as receiver:
        secrets = prepare(engine, settings, receiver)
        ingest(engine, settings, CrawlResult(source="acme", records=changed_set()))
        child = spawn("dispatch", settings.database_url)
        try:
            deadline = time.monotonic() + 15
            while receiver.held == 0:  # claimed, 3 delivered, one or more in flight
                assert time.monotonic() < deadline, "the child never delivered"
                assert child.poll() is None, "the child dispatcher ended early"
                time.sleep(0.02)
        finally:
            kill(child)
        receiver.release()
        in_flight = len(receiver.posts)
        assert in_flight >= 4
        stored = events(engine)
        assert {e["status"] for e in stored} == {"pending"}  # the child recorded nothing
        # Leased by the child: a live claimant would keep them (nothing sent twice in
        # parallel), but the child is dead, so the next run takes them all back at once.
        assert all(e["claimed_by"] and e["next_attempt_at"] > utcnow() for e in stored)
        report = run_dispatcher_once(engine, settings)
        assert (report.reclaimed, report.delivered) == (22, 22)
        assert drain(engine, settings) == 0
        seen = check_exactly_once(engine, receiver, secrets)
    redelivered = [key for key, count in seen.items() if count > 1]
    assert len(redelivered) == in_flight and max(seen.values()) == 2


def _child(mode: str, url: str) -> None:
    from service.core.db import make_engine

    engine = make_engine(url)
    settings = local_settings(url, webhook_timeout_seconds=CHILD_TIMEOUT)
    if mode == "ingest":
        result = ingest(engine, settings, CrawlResult(source="acme", records=changed_set()))
        print(f"committed {result.catalog_version}", flush=True)
        time.sleep(60)  # the service would deliver now; it is killed first
    else:
        run_dispatcher_once(engine, settings)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
