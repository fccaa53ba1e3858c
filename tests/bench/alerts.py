"""Alert benchmark: 10,000 subscriptions, an ingest changing 5 % of 200,000 offers.

Measured in one run, on SQLite (and PostgreSQL when ``GPUATLAS_TEST_POSTGRES_URL`` is
set, as ``make bench`` does):

- the ``enqueue_for_diff`` call inside the ingest (match + write the outbox), timed
  directly, and the same 5 %-changed ingest with the subscriptions deleted and live
  (the difference is what alerts cost the ingest);
- events created;
- delivery throughput (events/s) of ``run_dispatcher_once`` to a local receiver on
  loopback, for a bounded number of events: first a receiver on threads of the bench's
  own process (it competes with the dispatcher for the interpreter lock: the figure
  kept since the first measurement), then as many events again to a receiver in a
  process of its own (``python -m tests.bench.alerts receiver``).

Scale: ``GPUATLAS_BENCH_ALERT_OFFERS`` (200000), ``GPUATLAS_BENCH_ALERT_SUBS`` (10000),
``GPUATLAS_BENCH_ALERT_DELIVER`` (5000 events delivered at most),
``GPUATLAS_BENCH_ALERT_BACKENDS`` (``sqlite,postgres``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, insert, select, update

import service.alerts.outbox as outbox
import service.catalog.diff_listener as diff_listener
from schema.alerts import AlertEvent, Subscription
from schema.records import OfferRecord
from schema.types import utcnow
from service.alerts.dispatch import run_dispatcher_once
from service.alerts.keys import create_api_key
from service.alerts.listeners import install
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.db import make_engine, writer
from service.core.migrate import upgrade
from tests.alerts.test_alerts_kill import Receiver
from tests.bench.ingest import synthetic

OFFERS = int(os.environ.get("GPUATLAS_BENCH_ALERT_OFFERS", "200000"))
SUBS = int(os.environ.get("GPUATLAS_BENCH_ALERT_SUBS", "10000"))
DELIVER = int(os.environ.get("GPUATLAS_BENCH_ALERT_DELIVER", "5000"))
BACKENDS = os.environ.get("GPUATLAS_BENCH_ALERT_BACKENDS", "sqlite,postgres").split(",")
SUBSCRIPTION = Subscription.__table__  # type: ignore[attr-defined]
EVENT = AlertEvent.__table__  # type: ignore[attr-defined]
FAMILIES = ["h100", "a100", "l40s", "h200", "mi300x", "t4", "l4", "b200"]  # bench_ingest's GPUs
KINDS = ["on_demand", "spot", "reserved_1y"]


def changed(base: list[OfferRecord]) -> list[OfferRecord]:
    """Every 20th offer repriced: alternately 15 % cheaper and 12 % dearer."""
    out = list(base)
    for n, i in enumerate(range(0, len(base), 20)):
        factor = Decimal("0.85") if n % 2 == 0 else Decimal("1.12")
        out[i] = base[i].model_copy(
            update={"amount": (base[i].amount * factor).quantize(Decimal("0.01"))}
        )
    return out


def subscription_rows(n: int, key_id: int, url: str) -> list[tuple[Any, ...]]:
    """Varied filters and conditions; a few broad ones (gpu only), most fairly narrow."""
    now = utcnow()
    rows = []
    for i in range(n):
        filters: dict[str, Any] = {"gpu": FAMILIES[i % len(FAMILIES)]}
        if i % 50:  # 98 %: one provider too; the rest watch a whole GPU family
            filters["provider"] = f"p{(i // 8) % 40}"
        if i % 3 == 0:
            filters["price_kind"] = KINDS[(i // 3) % 3]
        if i % 4 == 1:
            filters["country"] = "DE"
        if i % 7 == 2:
            filters["min_gpus"] = str(1 + i % 4)
        if i % 11 == 3:
            filters["max_price_per_gpu_hour"] = str(5 + i % 40)
        conditions: list[dict[str, Any]] = [
            {"price_drop_pct": 5 + i % 3 * 5},
            {"price_rise_pct": 10},
            {"below_usd_per_gpu_hour": str(1 + i % 30)},
            {"above_usd_per_gpu_hour": str(20 + i % 50)},
            {"new_offer": True},
            {"withdrawn": True},
        ]
        condition = conditions[i % len(conditions)]
        rows.append(
            (key_id, f"bench {i}", filters, condition, "webhook", f"{url}/s{i}", f"secret-{i}", now)
        )
    return rows


def set_live(engine: Engine, live: bool) -> None:
    with writer(engine).begin() as conn:
        conn.execute(update(SUBSCRIPTION).values(deleted_at=None if live else utcnow()))


class Stopwatch:
    """Wraps ``module.name`` (a function) and adds up the seconds spent in it."""

    def __init__(self, module: Any, name: str) -> None:
        self.module, self.name = module, name
        self.original = getattr(module, name)
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.original(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def __enter__(self) -> Stopwatch:
        setattr(self.module, self.name, self)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.module, self.name, self.original)


class EnqueueTimer:
    """Wraps ingest's listener (``enqueue_for_diff``, installed) to time the call itself."""

    def __init__(self) -> None:
        self.original = diff_listener.required()
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.events = 0

    def __call__(self, *args: Any, **kwargs: Any) -> int:
        start, cpu = time.perf_counter(), time.thread_time()
        count = int(self.original(*args, **kwargs))
        self.seconds += time.perf_counter() - start
        self.cpu_seconds += time.thread_time() - cpu
        self.events += count
        return count

    def __enter__(self) -> EnqueueTimer:
        diff_listener.listen(self)
        return self

    def __exit__(self, *exc: object) -> None:
        diff_listener.listen(self.original)


def run_backend(name: str, url: str) -> None:
    upgrade(url)
    engine = make_engine(url)
    settings = Settings(  # type: ignore[call-arg]
        database_url=url,
        environment="test",
        _env_file=None,
        allow_private_webhooks=True,
        webhook_timeout_seconds=10.0,
    )
    load_reference(engine, REFERENCE_DIR)
    base = synthetic(OFFERS)
    moved = changed(base)
    start = time.perf_counter()
    ingest(engine, settings, CrawlResult("bench", base))
    print(f"[{name}] first ingest of {OFFERS:,} offers: {time.perf_counter() - start:.2f} s")
    with Receiver() as receiver:
        key_id = create_api_key(engine, "bench").id
        rows = subscription_rows(SUBS, key_id, receiver.url)
        columns = ("api_key_id", "name", "filters", "condition", "channel", "url", "secret")
        with writer(engine).begin() as conn:
            conn.execute(
                insert(SUBSCRIPTION),
                [dict(zip((*columns, "created_at"), row, strict=True)) for row in rows],
            )
        set_live(engine, False)
        start = time.perf_counter()
        with EnqueueTimer() as idle:
            ingest(engine, settings, CrawlResult("bench", moved))
        without = time.perf_counter() - start
        ingest(engine, settings, CrawlResult("bench", base))  # back, still without alerts
        set_live(engine, True)
        start = time.perf_counter()
        with (
            EnqueueTimer() as timer,
            Stopwatch(outbox, "load_index") as loading,
            Stopwatch(outbox, "insert_events") as writing,
        ):
            ingest(engine, settings, CrawlResult("bench", moved))
        with_subs = time.perf_counter() - start
        with engine.connect() as conn:
            created = int(conn.execute(select(func.count()).select_from(EVENT)).scalar() or 0)
        changes = len(range(0, OFFERS, 20))
        print(
            f"[{name}] {changes:,} offers changed, {SUBS:,} live subscriptions: "
            f"{created:,} events created ({timer.events:,} by the timed call)"
        )
        matching = timer.seconds - loading.seconds - writing.seconds
        print(
            f"[{name}] enqueue_for_diff (match + enqueue): {timer.seconds:.3f} s = load and "
            f"compile subscriptions {loading.seconds:.3f} s + match and build events "
            f"{matching:.3f} s + insert events {writing.seconds:.3f} s; CPU time of this "
            f"process in it {timer.cpu_seconds:.3f} s (load average {os.getloadavg()[0]:.1f})"
        )
        print(
            f"[{name}] 5 %-changed ingest: {without:.2f} s without subscriptions "
            f"(enqueue {idle.seconds * 1000:.1f} ms), {with_subs:.2f} s with them, "
            f"difference {with_subs - without:+.2f} s"
        )
        delivered, seconds, cpu = deliver(engine, settings, min(DELIVER, created))
        print(
            f"[{name}] delivery, receiver in this process: {delivered:,} events in "
            f"{seconds:.2f} s = {delivered / seconds if seconds else 0:,.0f} events/s (batch "
            f"{settings.dispatcher_batch_size}, concurrency {settings.webhook_concurrency}, "
            f"receiver saw {len(receiver.posts):,}; CPU {cpu:.2f} s with the receiver's)"
        )
        with OwnProcessReceiver() as other:
            with writer(engine).begin() as conn:
                conn.execute(
                    update(SUBSCRIPTION).values(
                        url=func.replace(SUBSCRIPTION.c.url, receiver.url, other.url)
                    )
                )
            delivered, seconds, cpu = deliver(engine, settings, min(DELIVER, created - delivered))
            print(
                f"[{name}] delivery, receiver in its own process: {delivered:,} events in "
                f"{seconds:.2f} s = {delivered / seconds if seconds else 0:,.0f} events/s "
                f"(receiver saw {other.count():,}; dispatcher CPU {cpu:.2f} s = "
                f"{cpu * 1000 / max(delivered, 1):.2f} ms per event; load average "
                f"{os.getloadavg()[0]:.1f})"
            )
    engine.dispose()


def deliver(engine: Engine, settings: Settings, bound: int) -> tuple[int, float, float]:
    """Dispatcher runs until ``bound`` events are delivered (or none is due): events,
    seconds, CPU seconds of this process (all its threads)."""
    delivered = 0
    start, cpu = time.perf_counter(), time.process_time()
    while delivered < bound:
        report = run_dispatcher_once(engine, settings)
        if report.claimed == 0:
            break
        delivered += report.delivered
    return delivered, time.perf_counter() - start, time.process_time() - cpu


class OwnProcessReceiver:
    """``python -m tests.bench.alerts receiver``: answers 200 to every POST, counts them."""

    def __enter__(self) -> OwnProcessReceiver:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.alerts", "receiver"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        return self

    def count(self) -> int:
        with urllib.request.urlopen(f"{self.url}/count", timeout=10) as response:
            return int(response.read())

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(10)


def receiver_main() -> None:
    count = [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args: object) -> None:
            return

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                count[0] += 1
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def do_GET(self) -> None:
            body = str(count[0]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


def main() -> None:
    install()  # its ingests write their alert events, as the CLI's do
    if sys.argv[1:] == ["receiver"]:
        receiver_main()
        return
    print(
        f"{SUBS:,} subscriptions, {OFFERS:,} offers, 5 % changed; delivery bounded to "
        f"{DELIVER:,} events"
    )
    if "sqlite" in BACKENDS:
        with tempfile.TemporaryDirectory() as tmp:
            run_backend("sqlite", f"sqlite:///{Path(tmp) / 'bench_alerts.db'}")
    pg = os.environ.get("GPUATLAS_TEST_POSTGRES_URL")
    if "postgres" in BACKENDS and pg:
        from service.core.db import normalize_url
        from tests.support.pg import pg_database

        with pg_database(normalize_url(pg)) as url:
            run_backend("postgres", url)


if __name__ == "__main__":
    main()
