"""Deliver pending alert events to their webhooks, at least once.

One run (:func:`run_dispatcher_once`, called every few seconds by the scheduler) keeps
up to a batch of events in flight until nothing is due (or ``RUN_BATCHES`` batches):

1. **claim** due events in a short transaction, leasing them (their ``next_attempt_at``
   moves past the delivery timeout), so a crash mid-delivery only delays them: the lease
   expires and they are delivered again with the same ``Idempotency-Key``;
2. **deliver** concurrently (keep-alive connections reused across subscriptions), one
   sequence per subscription: each POST is vetted against SSRF again (DNS can change),
   connects to the vetted address, follows no redirect and has a hard deadline; a
   subscription whose receiver fails gets its remaining events released for later, so a
   slow or broken receiver holds one slot, never the others;
3. **record** outcomes as receivers finish (one transaction for those finishing within
   ``SETTLE_SECONDS``), then claim more in their place: delivered, or retried with
   exponential backoff and jitter, or dead-lettered once the retry window (24 h by
   default) is over.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib.util
import logging
import random
import ssl
import sys
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import certifi
import httpx
from sqlalchemy import Engine, Text, bindparam, cast, select, update

from schema.alerts import AlertEvent, Channel, EventStatus, Subscription
from schema.types import utcnow
from service.alerts.certs import enqueue_certification_validity
from service.alerts.ssrf import UnsafeUrl, check_url_async
from service.catalog.run_owner import owner_alive, this_owner
from service.core.config import Settings
from service.core.db import writer

EVENT = AlertEvent.__table__  # type: ignore[attr-defined]
SUBSCRIPTION = Subscription.__table__  # type: ignore[attr-defined]
SIGNATURE_HEADER = "X-Gpuatlas-Signature"
MAX_ERROR = 500
WAITING = "waiting: an earlier event of this subscription failed"
log = logging.getLogger("gpuatlas.alerts")


def _remember_missing_sniffio() -> None:
    """httpcore runs ``import sniffio`` on every request. Without sniffio installed, each
    attempt searches ``sys.path`` again (50 ``stat`` calls, most of a millisecond: a
    tenth of a loopback delivery); recording its absence once makes the attempt free."""
    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


_remember_missing_sniffio()


@cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every run (loading the CA bundle takes ~20 ms)."""
    return ssl.create_default_context(cafile=certifi.where())


def sign(secret: str, body: bytes) -> str:
    """The ``X-Gpuatlas-Signature`` value of a body: ``sha256=<hex HMAC-SHA256>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: str) -> bool:
    """What a receiver does (documented in docs/alerts.md)."""
    return hmac.compare_digest(sign(secret, body), header)


@dataclass
class Delivery:
    event_id: int
    subscription_id: int
    url: str | None
    secret: str | None
    live: bool
    key: str
    event_type: str
    body: bytes
    """the stored JSON payload, sent as it is (the signature covers these bytes)"""
    attempts: int
    created_at: datetime


@dataclass
class Outcome:
    event_id: int
    ok: bool
    error: str | None = None
    released: bool = False
    """Not attempted: an earlier event of the same receiver failed in this run."""
    final: bool = False
    """Never retry (e.g. the subscription is gone)."""


@dataclass
class DispatchReport:
    raised: int = 0
    """certification events raised by validity dates (expiry, taking effect)"""
    reclaimed: int = 0
    """events leased by a dispatcher that died, made due again at once"""
    claimed: int = 0
    delivered: int = 0
    retrying: int = 0
    dead: int = 0
    released: int = 0
    errors: list[str] = field(default_factory=list)


def backoff(attempts: int, settings: Settings, rng: random.Random | None = None) -> float:
    """Seconds before attempt ``attempts + 1``: exponential, capped, with equal jitter."""
    ceiling = min(
        settings.webhook_retry_base_seconds * 2 ** min(attempts - 1, 40),
        settings.webhook_retry_max_seconds,
    )
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


def run_dispatcher_once(
    engine: Engine,
    settings: Settings,
    *,
    clock: Callable[[], datetime] = utcnow,
    rng: random.Random | None = None,
) -> DispatchReport:
    """Raise due certification validity events, then deliver due webhook events until none
    is left (at most ``RUN_BATCHES`` batches), and record the outcomes."""
    raised = enqueue_certification_validity(engine, clock())
    reclaimed = _reclaim_orphans(engine, clock())
    first = _claim(engine, settings, clock(), settings.dispatcher_batch_size)
    report = DispatchReport(raised=raised, reclaimed=reclaimed, claimed=len(first))
    if first:
        asyncio.run(_dispatch(engine, settings, clock, rng, report, first))
    return report


RUN_BATCHES = 10
"""A run claims at most this many batches (``GPUATLAS_DISPATCHER_BATCH_SIZE`` each)."""
SETTLE_SECONDS = 0.05
"""After a receiver's sequence ends, wait this long for others before one commit for all."""


async def _dispatch(
    engine: Engine,
    settings: Settings,
    clock: Callable[[], datetime],
    rng: random.Random | None,
    report: DispatchReport,
    first: list[Delivery],
) -> None:
    """Connections reused for the whole run (:class:`Clients`); a sliding window of at most
    a batch of events in flight. Each subscription's events go out in order, one at a
    time; different subscriptions concurrently (``GPUATLAS_WEBHOOK_CONCURRENCY``). As
    soon as some receivers are done, their outcomes are recorded (one transaction) and
    more events are claimed, skipping subscriptions still in flight: a hanging receiver
    holds its own events and one slot, never the others' deliveries."""
    window = settings.dispatcher_batch_size
    budget = window * RUN_BATCHES
    refill = max(1, window // 4)
    slots = asyncio.Semaphore(settings.webhook_concurrency)
    running: dict[asyncio.Task[list[Outcome]], list[Delivery]] = {}
    by_subscription: dict[int, asyncio.Task[list[Outcome]]] = {}
    exhausted = len(first) < window
    claimed = first
    async with Clients(settings) as clients:

        async def one_receiver(queue: list[Delivery]) -> list[Outcome]:
            async with slots:
                outcomes: list[Outcome] = []
                for position, delivery in enumerate(queue):
                    outcome = await _deliver(clients, delivery, settings)
                    outcomes.append(outcome)
                    if not outcome.ok and not outcome.final:
                        outcomes += [
                            Outcome(d.event_id, False, released=True) for d in queue[position + 1 :]
                        ]
                        break
                return outcomes

        while True:
            in_flight = sum(len(queue) for queue in running.values())
            room = min(window - in_flight, budget - report.claimed)
            # Claim in steps of a quarter window (each claim sorts the due events) or what is
            # left of the run's budget.
            step = min(refill, budget - report.claimed)
            if not claimed and not exhausted and room > 0 and room >= step:
                claimed = await asyncio.to_thread(
                    _claim, engine, settings, clock(), room, set(by_subscription)
                )
                report.claimed += len(claimed)
                exhausted = len(claimed) < room  # nothing more due now (or budget spent)
            if claimed:
                groups: dict[int, list[Delivery]] = defaultdict(list)
                for delivery in claimed:
                    groups[delivery.subscription_id].append(delivery)
                for subscription_id, queue in groups.items():
                    task = asyncio.create_task(one_receiver(queue))
                    running[task] = queue
                    by_subscription[subscription_id] = task
                claimed = []
            if not running:
                return
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            if len(running) > len(done):
                more, _ = await asyncio.wait(running, timeout=SETTLE_SECONDS)
                done |= more
            deliveries: list[Delivery] = []
            outcomes: list[Outcome] = []
            for task in done:
                queue = running.pop(task)
                del by_subscription[queue[0].subscription_id]
                deliveries += queue
                outcomes += task.result()
            await asyncio.to_thread(
                _record, engine, settings, deliveries, outcomes, clock(), report, rng
            )


def _reclaim_orphans(engine: Engine, now: datetime) -> int:
    """Make due again the events leased by a dispatcher that died on this host (SIGKILL
    between claim and outcome) instead of waiting its lease out; returns how many.
    A lease held by a live process, or by one on another host, is left alone."""
    with engine.connect() as conn:
        leased = conn.execute(
            select(EVENT.c.id, EVENT.c.claimed_by).where(
                EVENT.c.status == EventStatus.pending.value,
                EVENT.c.claimed_by.is_not(None),
                EVENT.c.next_attempt_at > now,
            )
        ).all()
    orphans = [row.id for row in leased if owner_alive(row.claimed_by) is False]
    if not orphans:
        return 0
    with writer(engine).begin() as conn:
        return conn.execute(
            update(EVENT)
            .where(EVENT.c.id.in_(orphans), EVENT.c.status == EventStatus.pending.value)
            .values(next_attempt_at=now, claimed_by=None)
        ).rowcount


def _claim(
    engine: Engine,
    settings: Settings,
    now: datetime,
    limit: int,
    busy: Collection[int] = (),
) -> list[Delivery]:
    """Lease up to ``limit`` due events, oldest first, of subscriptions not in ``busy``
    (those with deliveries in flight: their order is kept)."""
    lease = now + timedelta(seconds=settings.webhook_timeout_seconds + 60)
    stmt = (
        select(
            EVENT.c.id,
            EVENT.c.subscription_id,
            EVENT.c.idempotency_key,
            EVENT.c.event_type,
            cast(EVENT.c.payload, Text).label("payload"),  # the stored text, not decoded
            EVENT.c.attempts,
            EVENT.c.created_at,
            SUBSCRIPTION.c.url,
            SUBSCRIPTION.c.secret,
            SUBSCRIPTION.c.channel,
            SUBSCRIPTION.c.deleted_at,
        )
        .join(SUBSCRIPTION, SUBSCRIPTION.c.id == EVENT.c.subscription_id)
        .where(EVENT.c.status == EventStatus.pending.value, EVENT.c.next_attempt_at <= now)
        .order_by(EVENT.c.next_attempt_at, EVENT.c.id)
        .limit(limit)
    )
    if busy:
        stmt = stmt.where(EVENT.c.subscription_id.not_in(list(busy)))
    with writer(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            stmt = stmt.with_for_update(of=EVENT, skip_locked=True)
        rows = conn.execute(stmt).all()
        if not rows:
            return []
        ids = [row.id for row in rows]
        conn.execute(
            update(EVENT)
            .where(EVENT.c.id.in_(ids))
            .values(next_attempt_at=lease, claimed_by=this_owner())
        )
    return [
        Delivery(
            event_id=row.id,
            subscription_id=row.subscription_id,
            url=row.url,
            secret=row.secret,
            live=row.deleted_at is None and row.channel == Channel.webhook.value,
            key=row.idempotency_key,
            event_type=row.event_type,
            body=row.payload.encode(),
            attempts=row.attempts,
            created_at=row.created_at,
        )
        for row in rows
    ]


class Clients:
    """HTTP clients of one run, lent out per request by origin (scheme, host, port).

    Each client holds one connection, kept alive and reused by the next request to the
    same origin (any subscription). httpx's pool checks every idle connection of a client
    on every request: with one connection per client that check stays constant, where a
    shared pool of 16 connections made it most of the per-request cost."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.idle: dict[tuple[str, str, int | None], list[httpx.AsyncClient]] = defaultdict(list)
        self.all: list[httpx.AsyncClient] = []

    async def __aenter__(self) -> Clients:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.gather(*(client.aclose() for client in self.all))

    def borrow(self, url: httpx.URL) -> httpx.AsyncClient:
        idle = self.idle[(url.scheme, url.host, url.port)]
        if idle:
            return idle.pop()
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.settings.webhook_timeout_seconds),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            follow_redirects=False,
            trust_env=False,
            verify=_tls_context(),
        )
        self.all.append(client)
        return client

    def give_back(self, url: httpx.URL, client: httpx.AsyncClient) -> None:
        self.idle[(url.scheme, url.host, url.port)].append(client)


async def _deliver(clients: Clients, delivery: Delivery, settings: Settings) -> Outcome:
    if not delivery.live or not delivery.url or not delivery.secret:
        return Outcome(delivery.event_id, False, "subscription deleted", final=True)
    try:
        return await asyncio.wait_for(
            _post(clients, delivery, settings), timeout=settings.webhook_timeout_seconds
        )
    except TimeoutError:
        return Outcome(
            delivery.event_id, False, f"timed out after {settings.webhook_timeout_seconds:g} s"
        )
    except UnsafeUrl as exc:
        return Outcome(delivery.event_id, False, f"refused: {exc}")
    except httpx.HTTPError as exc:
        return Outcome(delivery.event_id, False, f"{type(exc).__name__}: {exc}"[:MAX_ERROR])


async def _post(clients: Clients, delivery: Delivery, settings: Settings) -> Outcome:
    assert delivery.url is not None
    assert delivery.secret is not None
    target = await check_url_async(delivery.url, allow_private=settings.allow_private_webhooks)
    body = delivery.body
    url = httpx.URL(delivery.url)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": settings.user_agent,
        "Host": url.netloc.decode("ascii"),
        SIGNATURE_HEADER: sign(delivery.secret, body),
        "Idempotency-Key": delivery.key,
        "X-Gpuatlas-Event": delivery.event_type,
    }
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    error: Exception | None = None
    for address in target.addresses:  # connect to what was vetted: no second DNS lookup
        pinned = url.copy_with(host=str(address))
        client = clients.borrow(url)
        try:
            async with client.stream(
                "POST", pinned, content=body, headers=headers, extensions=extensions
            ) as response:
                excerpt = b""
                async for chunk in response.aiter_bytes():
                    excerpt += chunk
                    if len(excerpt) >= 200:
                        break
        except httpx.ConnectError as exc:
            error = exc
            continue
        # Lent again only after a complete exchange (an error or a timeout's cancellation
        # leaves it out: it is closed at the end of the run).
        clients.give_back(url, client)
        if 200 <= response.status_code < 300:
            return Outcome(delivery.event_id, True)
        text = excerpt[:200].decode("utf-8", "replace").strip()
        return Outcome(delivery.event_id, False, f"HTTP {response.status_code} {text}"[:MAX_ERROR])
    assert error is not None
    raise error


def _record(
    engine: Engine,
    settings: Settings,
    deliveries: list[Delivery],
    outcomes: list[Outcome],
    now: datetime,
    report: DispatchReport,
    rng: random.Random | None,
) -> None:
    by_id = {d.event_id: d for d in deliveries}
    window = timedelta(hours=settings.webhook_retry_window_hours)
    rows: list[dict[str, Any]] = []
    retry_at: dict[int, datetime] = {}
    for outcome in sorted(outcomes, key=lambda o: o.released):
        delivery = by_id[outcome.event_id]
        row = {
            "p_id": outcome.event_id,
            "p_status": EventStatus.pending.value,
            "p_attempts": delivery.attempts + 1,
            "p_next": None,
            "p_error": outcome.error,
            "p_delivered": None,
        }
        if outcome.ok:
            row["p_status"], row["p_delivered"] = EventStatus.delivered.value, now
            report.delivered += 1
        elif outcome.released:
            row["p_attempts"] = delivery.attempts
            row["p_error"] = WAITING
            row["p_next"] = retry_at.get(delivery.subscription_id, now)
            report.released += 1
        else:
            following = now + timedelta(seconds=backoff(delivery.attempts + 1, settings, rng))
            if outcome.final or following > delivery.created_at + window:
                row["p_status"] = EventStatus.dead.value
                report.dead += 1
            else:
                row["p_next"] = following
                retry_at[delivery.subscription_id] = following
                report.retrying += 1
            report.errors.append(f"event {outcome.event_id}: {outcome.error}")
        rows.append(row)
    stmt = (
        update(EVENT)
        .where(EVENT.c.id == bindparam("p_id"))
        .values(
            status=bindparam("p_status"),
            attempts=bindparam("p_attempts"),
            next_attempt_at=bindparam("p_next"),
            last_error=bindparam("p_error"),
            delivered_at=bindparam("p_delivered"),
            claimed_by=None,
        )
    )
    with writer(engine).begin() as conn:
        conn.execute(stmt, rows)
        for subscription_id, when in retry_at.items():
            # The receiver failed: its other due events (not claimed in this run) wait too.
            later = conn.execute(
                update(EVENT)
                .where(
                    EVENT.c.subscription_id == subscription_id,
                    EVENT.c.status == EventStatus.pending.value,
                    EVENT.c.next_attempt_at <= now,
                )
                .values(next_attempt_at=when, last_error=WAITING)
            )
            report.released += later.rowcount
    if report.errors:
        log.info("alerts: %s", report)
