"""The chaos run: farm + service (scheduler on a fast cadence) + clients + a webhook
receiver that verifies signatures, SIGKILLs (at random moments and aimed at an ingest
transaction) and restarts, then the catalog is checked against the farm's log of the truth.

    python -m tests.chaos.run --seconds 300 --seed 1 --db sqlite

Loopback only; every loop is bounded in count and time; every process started here is
killed by process group in ``finally``. Exit status 1 when an invariant is violated.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from service.alerts.listeners import install
from service.catalog.ingest import INGEST_LOCK_KEY
from service.compliance.reference_load import load_reference
from service.core.config import PROJECT_ROOT, REFERENCE_DIR, Settings
from service.core.db import make_engine
from service.core.migrate import upgrade
from service.crawl.run import crawl_source
from tests.chaos.adapters import ADAPTERS, HTML_SOURCES
from tests.chaos.farm import FAULT_KINDS, LAYOUT_FAULTS, Farm
from tests.support.pg import create_pg_database, drop_pg_database

SOURCES = list(ADAPTERS)
IN_SOURCES = ", ".join(f"'{name}'" for name in SOURCES)
HTTP_TIMEOUT = 2.0
HTTP_RETRIES = 1
READ_KINDS = ("offers", "history", "export")
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
KILLED_REASONS = {"crashed", "interrupted", "timeout"}
"""Reasons of a run whose process was killed (or outlived its budget under load)."""


@dataclass
class Hit:
    start: float
    end: float
    kind: str
    status: int  # 0: no answer (connection refused/reset, timeout)
    replica: int = 0


@dataclass
class Outcome:
    violations: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    log: dict[str, Any] = field(default_factory=dict)
    """The farm's log (changes, faults), for ``--json``: to read a violation against."""

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.violations.append(message)


# ----------------------------------------------------------------------------- helpers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def descendants(pid: int) -> list[int]:
    """Children (recursively) of ``pid``, from /proc: the service's crawl children."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo and len(found) < 1000:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(
    proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL, first: list[int] | None = None
) -> None:
    """``sig`` to the service's process group and to each crawl child's own group
    (``first``: groups known beforehand, signalled before /proc is scanned)."""
    for pid in [*(first or []), proc.pid, *descendants(proc.pid)]:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


def signature(secret: str, body: bytes) -> str:
    """What ``X-Gpuatlas-Signature`` must say (written here, not imported from the
    service, so a wrong signer cannot agree with itself)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Receiver:
    """Loopback webhook receiver: verifies each POST's signature with its subscription's
    secret (``/hook/<n>``: subscription n), keeps the signed ones (time, idempotency key,
    body) and dedupes by idempotency key (a redelivery must repeat the same body)."""

    def __init__(self) -> None:
        self.posts: list[tuple[float, str, dict[str, Any]]] = []
        self.secrets: dict[str, str] = {}
        self.bad_signatures: list[str] = []
        self.bodies: dict[str, bytes] = {}
        self.redeliveries = 0
        self.conflicting: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                length = min(int(self.headers.get("Content-Length") or 0), 1_000_000)
                body = self.rfile.read(length)
                key = self.headers.get("Idempotency-Key", "")
                secret = receiver.secrets.get(self.path.rsplit("/", 1)[-1])
                given = self.headers.get("X-Gpuatlas-Signature", "")
                if secret is None or not hmac.compare_digest(signature(secret, body), given):
                    with receiver._lock:
                        receiver.bad_signatures.append(f"{self.path} {key or '(no key)'}")
                    self.send_response(401)  # a real receiver refuses it
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                try:
                    payload = json.loads(body)
                except ValueError:
                    payload = {"invalid": body[:200].decode("utf-8", "replace")}
                with receiver._lock:
                    receiver.posts.append((time.time(), key, payload))
                    first = receiver.bodies.setdefault(key, body)
                    if first is not body:
                        receiver.redeliveries += 1
                        if first != body:
                            receiver.conflicting.append(key)
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def url(self, subscription: int) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/hook/{subscription}"

    @property
    def unique(self) -> dict[str, dict[str, Any]]:
        """The deliveries deduplicated by idempotency key."""
        return {key: body for _, key, body in self.posts}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ----------------------------------------------------------------------------- the service


class Service:
    """``gpuatlas serve`` as a subprocess in its own session; restartable, killable."""

    def __init__(self, env: dict[str, str], port: int, log_path: Path) -> None:
        self.env, self.port, self.log_path = env, port, log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.base = f"http://127.0.0.1:{port}"
        self.downtime: list[tuple[float, float]] = []

    def start(self, timeout: float = 60.0) -> float:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "gpuatlas"), "serve", "--port", str(self.port)],
                env=self.env,
                cwd=PROJECT_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.time() + timeout
        with httpx.Client(timeout=2.0) as client:
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"service exited ({self.proc.returncode}); see {self.log_path}"
                    )
                try:
                    if client.get(f"{self.base}/healthz").status_code == 200:
                        return time.time()
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        raise RuntimeError(f"service not healthy after {timeout:g} s; see {self.log_path}")

    def kill(self, first: list[int] | None = None) -> float:
        assert self.proc is not None
        at = time.time()
        kill_tree(self.proc, first=first)
        self.proc.wait(timeout=10)
        return at

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        kill_tree(self.proc, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc)
            self.proc.wait(timeout=10)


# ----------------------------------------------------------------------------- clients


def client_loop(
    bases: list[str],
    providers: list[str],
    offer_ids: list[int],
    stop: threading.Event,
    hits: list[Hit],
    seed: int,
    cap: int,
) -> None:
    rng = random.Random(seed)
    with httpx.Client(timeout=10.0) as client:
        for _ in range(cap):
            if stop.is_set():
                return
            replica = rng.randrange(len(bases))
            base = bases[replica]
            kind = rng.choices(READ_KINDS, weights=(5, 3, 2))[0]
            if kind == "offers":
                url = f"{base}/v1/offers?limit=50&provider={rng.choice(providers)}"
            elif kind == "history":
                url = f"{base}/v1/offers/{rng.choice(offer_ids)}/history"
            else:
                url = f"{base}/v1/export?format=csv&provider={rng.choice(providers)}"
            start = time.time()
            try:
                response = client.get(url)
                status = response.status_code
            except httpx.HTTPError:
                status = 0
            hits.append(Hit(start, time.time(), kind, status, replica))
            stop.wait(0.02)


# ----------------------------------------------------------------------------- aimed kills


@dataclass
class Aim:
    """One SIGKILL aimed at an ingest: fired when a crawl's fetch had ended (the farm wrote
    its last answer) and a write transaction was open while that crawl's run was running."""

    victim: Service
    down: float
    source: str | None = None
    run_id: int | None = None
    in_transaction: bool = False
    """A write transaction was open at the kill."""
    run_after_kill: str | None = None
    """The run's status right after the kill: ``running`` = its ingest never committed."""
    waited_s: float = 0.0

    @property
    def in_ingest(self) -> bool:
        return self.in_transaction and self.run_after_kill == "running"


class WriteProbe:
    """Is a write transaction open on the run's database right now?

    SQLite: ``BEGIN IMMEDIATE`` without waiting fails while another connection holds the
    write lock (the service's writers take it up front). PostgreSQL: a session holds the
    ingest's transaction-scoped advisory lock (only an ingest takes it)."""

    def __init__(self, database_url: str, engine: Engine) -> None:
        url = make_url(database_url)
        self.sqlite: sqlite3.Connection | None = None
        self.conn: Any = None
        if url.get_backend_name() == "sqlite":
            self.sqlite = sqlite3.connect(str(url.database), timeout=0, isolation_level=None)
        else:
            self.conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    def busy(self) -> bool:
        if self.sqlite is not None:
            try:
                self.sqlite.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return True
            self.sqlite.execute("ROLLBACK")
            return False
        count = self.conn.execute(
            text(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted "
                "AND a.datname = current_database() "
                "AND ((l.classid::bigint << 32) | l.objid::bigint) = :key"
            ),
            {"key": INGEST_LOCK_KEY},
        ).scalar()
        return bool(count)

    def close(self) -> None:
        if self.sqlite is not None:
            self.sqlite.close()
        if self.conn is not None:
            self.conn.close()


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def crawling_service(services: list[Service], source: str) -> tuple[Service, list[int]]:
    """The replica whose crawl child is crawling ``source`` (the scheduler's leader), and
    that child's pid (the ingest's writer: killed first)."""
    for service in services:
        if service.proc is None or service.proc.poll() is not None:
            continue
        for pid in descendants(service.proc.pid):
            line = _cmdline(pid)
            if "service.crawl.child" in line and f" {source} " in f"{line} ":
                return service, [pid]
    return services[0], []


def _run_status(engine: Engine, run_id: int) -> str:
    return str(_scalar(engine, "SELECT status FROM crawl_run WHERE id = :i", i=run_id))


def aim_at_ingest(
    engine: Engine, database_url: str, farm: Farm, services: list[Service], deadline: float
) -> Aim:
    """Wait for a crawl whose fetch just ended, then SIGKILL its service as soon as a
    write transaction is open while that crawl's run is still running (its ingest).
    Gives up after 30 s and kills anyway (counted as not in an ingest)."""
    started = time.time()
    deadline = min(deadline, started + 30)
    probe = WriteProbe(database_url, engine)
    after = started
    try:
        while time.time() < deadline:
            got = farm.wait_delivery(after, timeout=max(0.0, deadline - time.time()))
            if got is None:
                break
            after, source = got
            run_id = _scalar(
                engine,
                "SELECT max(id) FROM crawl_run WHERE source = :s AND status = 'running'",
                s=source,
            )
            if run_id is None:
                continue
            victim, writer = crawling_service(services, source)
            window = min(deadline, time.time() + 10)
            polls = 0
            while time.time() < window:
                if probe.busy():
                    down = victim.kill(first=writer)
                    return Aim(
                        victim,
                        down,
                        source,
                        int(run_id),
                        in_transaction=True,
                        run_after_kill=_run_status(engine, int(run_id)),
                        waited_s=round(down - started, 1),
                    )
                polls += 1
                if polls % 25 == 0 and _run_status(engine, int(run_id)) != "running":
                    break  # that ingest is over (or never started): wait for the next fetch
                time.sleep(0.002)
    finally:
        probe.close()
    victim = services[0]
    down = victim.kill()
    return Aim(victim, down, waited_s=round(down - started, 1))


def atomicity_problems(engine: Engine, baseline_version: int) -> list[str]:
    """The catalog is the state before or after every ingest, never between: each
    version belongs to an ``ok`` run that names it and holds exactly the observations it
    declares; no observation or alert comes from a run that did not commit."""
    problems = []
    for version, status, named in _rows(
        engine,
        "SELECT v.id, r.status, r.catalog_version FROM catalog_version v "
        "JOIN crawl_run r ON r.id = v.crawl_run_id "
        "WHERE r.status <> 'ok' OR r.catalog_version IS NULL OR r.catalog_version <> v.id",
    ):
        problems.append(f"catalog version {version} from a run that is {status} (names {named})")
    for version, declared, found in _rows(
        engine,
        "SELECT v.id, v.added + v.changed, count(p.id) FROM catalog_version v "
        "LEFT JOIN price_observation p ON p.version_from = v.id WHERE v.id > :b "
        "GROUP BY v.id, v.added, v.changed HAVING count(p.id) <> v.added + v.changed",
        b=baseline_version,
    ):
        problems.append(f"catalog version {version}: {found} observations, {declared} declared")
    orphans = _scalar(
        engine,
        "SELECT count(*) FROM price_observation p "
        "LEFT JOIN catalog_version v ON v.id = p.version_from "
        "JOIN crawl_run r ON r.id = COALESCE(p.crawl_run_id, v.crawl_run_id) "
        "WHERE r.status <> 'ok'",
    )
    if orphans:
        problems.append(f"{orphans} price observations from runs that did not commit")
    stray = _scalar(
        engine,
        "SELECT count(*) FROM alert_event e LEFT JOIN catalog_version v "
        "ON v.id = e.catalog_version WHERE v.id IS NULL",
    )
    if stray:
        problems.append(f"{stray} alert events without their catalog version")
    return problems


def _check_aims(outcome: Outcome, engine: Engine, aims: list[Aim]) -> None:
    for aim in aims:
        if not aim.in_ingest or aim.run_id is None:
            continue
        leaked = _scalar(
            engine,
            "SELECT (SELECT count(*) FROM catalog_version WHERE crawl_run_id = :r) + "
            "(SELECT count(*) FROM price_observation WHERE crawl_run_id = :r) + "
            "(SELECT count(*) FROM crawl_run_payload WHERE crawl_run_id = :r)",
            r=aim.run_id,
        )
        outcome.check(
            not leaked,
            f"run {aim.run_id} ({aim.source}) was killed in its ingest but left {leaked} rows",
        )
    outcome.figures.update(
        {
            "kills_aimed": len(aims),
            "kills_in_ingest": sum(1 for a in aims if a.in_ingest),
            "aimed_kills": [
                f"{a.source or '-'} run {a.run_id or '-'}: "
                + (
                    "in ingest, rolled back"
                    if a.in_ingest
                    else f"missed (run {a.run_after_kill})"
                    if a.in_transaction
                    else "no ingest caught"
                )
                + f" after {a.waited_s} s"
                for a in aims
            ],
        }
    )


# ----------------------------------------------------------------------------- the run


def make_database(kind: str, workdir: Path) -> tuple[str, str | None]:
    if kind == "sqlite":
        return f"sqlite:///{workdir / 'chaos.db'}", None
    admin = os.environ.get("GPUATLAS_TEST_POSTGRES_URL") or PG_ADMIN
    return create_pg_database(admin, "gpuatlas_chaos"), admin


def cut_connections(engine: Engine) -> tuple[float, int]:
    """PostgreSQL: terminate every other session on the run's database (a network cut)."""
    with engine.connect() as conn:
        at = time.time()
        cut = conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ).scalar()
        conn.commit()
    return at, int(cut or 0)


def run(
    seconds: float,
    seed: int,
    db: str = "sqlite",
    *,
    kills: int = 2,
    aimed: int = 2,
    clients: int = 3,
    max_requests: int = 20000,
    workdir: Path | None = None,
    event_gap: float = 2.5,
    interval: int = 10,
    html_interval: int | None = None,
    replicas: int | None = None,
    kinds: tuple[str, ...] = FAULT_KINDS,
    extra_env: dict[str, str] | None = None,
    sources: list[str] | None = None,
) -> Outcome:
    """One run: ``kills`` SIGKILLs at random moments and ``aimed`` more aimed at an
    ingest in progress; ``extra_env`` overrides the service's settings (e.g. to prove
    that the checks catch a disabled plausibility guard)."""
    rng = random.Random(seed)
    begun = time.time()
    workdir = workdir or Path(tempfile.mkdtemp(prefix="gpuatlas-chaos-"))
    services: list[Service] = []
    replicas = replicas or (2 if db == "postgres" else 1)
    stop_clients = threading.Event()
    outcome = Outcome()
    engine: Engine | None = None
    farm: Farm | None = None
    receiver: Receiver | None = None
    database_url, admin = make_database(db, workdir)
    try:
        sources = sources or SOURCES
        farm = Farm(
            sources,
            seed,
            http_timeout=HTTP_TIMEOUT,
            attempts=HTTP_RETRIES + 1,
            event_gap=event_gap,
            kinds=kinds,
        )
        receiver = Receiver()
        farm.start()
        upgrade(database_url)
        engine = make_engine(database_url)
        load_reference(engine, REFERENCE_DIR)
        schedules = dict.fromkeys(_all_sources(), "off")
        # a Scrapy crawl starts two interpreters: by default pages are crawled every 15 s
        html_interval = html_interval or interval * 3 // 2
        schedules.update(
            {n: f"{html_interval if n in HTML_SOURCES else interval}s" for n in sources}
        )
        env_settings = {
            "GPUATLAS_DATABASE_URL": database_url,
            "GPUATLAS_ENVIRONMENT": "test",
            "GPUATLAS_SCHEDULER_ENABLED": "true",
            "GPUATLAS_SCHEDULES": json.dumps(schedules),
            "GPUATLAS_SOURCE_BASE_URLS": json.dumps(farm.base_urls()),
            "GPUATLAS_LAMBDA_API_KEY": "chaos-key",
            "GPUATLAS_GCP_API_KEY": "chaos-key",
            "GPUATLAS_RUNPOD_API_KEY": "chaos-key",
            "GPUATLAS_HTTP_TIMEOUT_SECONDS": str(HTTP_TIMEOUT),
            "GPUATLAS_HTTP_MAX_RETRIES": str(HTTP_RETRIES),
            "GPUATLAS_CRAWL_TIMEOUT_SECONDS": "40",
            "GPUATLAS_ALLOW_PRIVATE_WEBHOOKS": "true",
            "GPUATLAS_DISPATCHER_INTERVAL_SECONDS": "1",
            "GPUATLAS_WEBHOOK_RETRY_BASE_SECONDS": "1",
            "GPUATLAS_WEBHOOK_RETRY_MAX_SECONDS": "5",
            "GPUATLAS_WEBHOOK_TIMEOUT_SECONDS": "5",
        }
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GPUATLAS_")},
            **env_settings,
            **(extra_env or {}),
        }
        settings = Settings(
            database_url=database_url,
            source_base_urls=farm.base_urls(),
            crawl_timeout_seconds=60,
            lambda_api_key="chaos-key",
            gcp_api_key="chaos-key",
            runpod_api_key="chaos-key",
            http_timeout_seconds=HTTP_TIMEOUT,
            http_max_retries=HTTP_RETRIES,
            _env_file=None,  # type: ignore[call-arg]
        )
        # baseline: one clean crawl of each source, side by side (then the scheduler's turn),
        # while the API key is made
        with ThreadPoolExecutor(len(sources) + 1) as pool:
            making_key = pool.submit(
                subprocess.run,
                [str(Path(sys.executable).parent / "gpuatlas"), "apikey", "create", "chaos"],
                env=env,
                cwd=PROJECT_ROOT,
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            reports = pool.map(
                lambda name: crawl_source(engine, settings, name, trigger="chaos-baseline"),
                sources,
            )
            for name, report in zip(sources, reports, strict=True):
                if report.status.value != "ok":
                    raise RuntimeError(f"baseline crawl of {name}: {report.label}")
            key = making_key.result().stdout.strip()
        baseline_version = _scalar(engine, "SELECT max(id) FROM catalog_version") or 0
        farm.keep_knobs(_calibrated(engine, farm))
        offer_ids = [
            int(r[0]) for r in _rows(engine, f"SELECT id FROM offer WHERE source IN ({IN_SOURCES})")
        ]
        providers = sorted(
            {
                str(r[0])
                for r in _rows(
                    engine, f"SELECT DISTINCT provider FROM offer WHERE source IN ({IN_SOURCES})"
                )
            }
        )

        for index in range(replicas):
            replica_env = dict(env)
            if index and db == "sqlite":  # one scheduler per SQLite file: the others only serve
                replica_env["GPUATLAS_SCHEDULER_ENABLED"] = "false"
            services.append(Service(replica_env, free_port(), workdir / f"service-{index}.log"))
            services[-1].start()
        service = services[0]
        with httpx.Client(timeout=10.0) as client:
            conditions = ({"price_drop_pct": "0.01"}, {"price_rise_pct": "0.01"})
            for index, condition in enumerate(conditions):
                response = client.post(
                    f"{service.base}/v1/subscriptions",
                    headers={"Authorization": f"Bearer {key}"},
                    json={"condition": condition, "channel": "webhook", "url": receiver.url(index)},
                )
                if response.status_code != 201:
                    raise RuntimeError(f"subscription: {response.status_code} {response.text}")
                receiver.secrets[str(index)] = response.json()["secret"]

        started = time.time()
        until = started + seconds
        farm.start_chaos(until, max_events=int(seconds * 4) + 10)
        hits: list[Hit] = []
        threads = [
            threading.Thread(
                target=client_loop,
                args=(
                    [s.base for s in services],
                    providers,
                    offer_ids,
                    stop_clients,
                    hits,
                    seed + i,
                    max_requests // clients,
                ),
                daemon=True,
            )
            for i in range(clients)
        ]
        for thread in threads:
            thread.start()
        moments = [(rng.uniform(0.2, 0.85) * seconds + started, "kill") for _ in range(kills)]
        moments += [(rng.uniform(0.1, 0.5) * seconds + started, "aim") for _ in range(aimed)]
        if db == "postgres":
            moments.append((rng.uniform(0.3, 0.7) * seconds + started, "cut"))
        survived, cuts, aims = 0, [], []
        for at, what in sorted(moments):
            time.sleep(max(0.0, at - time.time()))
            if what == "cut":
                cuts.append(cut_connections(engine))
                continue
            if what == "aim":
                aim = aim_at_ingest(engine, database_url, farm, services, until + 3)
                victim, down = aim.victim, aim.down
                aims.append(aim)
            else:
                victim = rng.choice(services)
                down = victim.kill()
            up = victim.start()
            victim.downtime.append((down, up))
            survived += 1
            for problem in atomicity_problems(engine, baseline_version):  # right after restart
                outcome.violations.append(f"after kill {survived}: {problem}")
        time.sleep(max(0.0, until - time.time()))
        stop_clients.set()
        for thread in threads:
            thread.join(timeout=15)
        farm.quiesce()
        quiet = time.time()
        settled = _wait_settled(engine, farm, quiet, deadline=quiet + 60)
        for each in services:
            each.stop()
        _check(outcome, engine, farm, receiver, hits, services, baseline_version, survived, cuts)
        _check_aims(outcome, engine, aims)
        outcome.log = {
            "changes": farm.log.changes,
            "faults": farm.log.faults,
            "fx_published": farm.log.published,
            "fx_spikes": farm.log.fx_spikes,
            "withdrawals": farm.log.withdrawals,
        }
        outcome.figures["kills_random"] = survived - len(aims)
        outcome.figures.update(
            {
                "workdir": str(workdir),
                "db": db,
                "seed": seed,
                "seconds": seconds,
                "setup_s": round(started - begun, 1),
                "settled_after_s": round(settled - quiet, 1) if settled else None,
                "wall_s": round(time.time() - started, 1),
            }
        )
        outcome.check(
            settled is not None, "the service did not settle (final crawls/alerts) in 60 s"
        )
        return outcome
    finally:
        stop_clients.set()
        for each in services:
            each.stop()
        if farm is not None:
            farm.close()
        if receiver is not None:
            receiver.close()
        if engine is not None:
            engine.dispose()
        if admin is not None:
            drop_pg_database(admin, database_url)


def _all_sources() -> list[str]:
    from crawlers.registry import all_sources

    return sorted(all_sources())


def _rows(engine: Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(text(sql), params).all())


def _scalar(engine: Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


def _calibrated(engine: Engine, farm: Farm) -> dict[str, set[str]]:
    """Knobs whose offers the baseline crawl shows at the farm's amount."""
    keep: dict[str, set[str]] = {}
    for name, knobs in farm.knobs.items():
        keep[name] = set()
        for knob in knobs.values():
            amounts = {
                Decimal(r[0])
                for r in _rows(
                    engine,
                    "SELECT amount FROM offer WHERE source = :s AND sku = :k "
                    "AND price_kind = 'on_demand'",
                    s=name,
                    k=knob.sku,
                )
            }
            if amounts == {knob.amount}:
                keep[name].add(knob.key)
    return keep


def _wait_settled(engine: Engine, farm: Farm, quiet: float, deadline: float) -> float | None:
    """Every source had an ``ok`` crawl that fetched after the quiet time (so it saw the
    farm's final prices), and no alert is undelivered."""
    from datetime import UTC, datetime

    since = datetime.fromtimestamp(quiet - 60, UTC)
    while time.time() < deadline:
        fetched: dict[str, list[float]] = {}
        for at, source in list(farm.deliveries):
            if at > quiet:
                fetched.setdefault(source, []).append(at)
        done = {
            source
            for source, begun, ended in _rows(
                engine,
                "SELECT source, started_at, finished_at FROM crawl_run "
                "WHERE status = 'ok' AND finished_at > :t",
                t=since,
            )
            if any(_ts(begun) - 0.5 <= at <= _ts(ended) + 0.5 for at in fetched.get(source, []))
        }
        pending = _scalar(
            engine, "SELECT count(*) FROM alert_event WHERE status NOT IN ('delivered', 'dead')"
        )
        if set(farm.adapters) <= done and not pending:
            return time.time()
        time.sleep(0.5)
    return None


# ----------------------------------------------------------------------------- the checks


def _dt(at: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(at, UTC)


def _ts(value: Any) -> float:
    from datetime import UTC, datetime

    if isinstance(value, int):  # an observation's time on SQLite: microseconds (UTCMicros)
        return value / 1_000_000
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return float(value.timestamp())


def _check(
    outcome: Outcome,
    engine: Engine,
    farm: Farm,
    receiver: Receiver,
    hits: list[Hit],
    services: list[Service],
    baseline_version: int,
    survived: int,
    cuts: list[tuple[float, int]],
) -> None:
    log = farm.log
    crawl_slack = 45.0  # a served answer is ingested within this (crawl timeout 40 s)
    kills = [down for service in services for down, _ in service.downtime]

    # history of every offer of the farm's sources
    obs = _rows(
        engine,
        # an observation's times: its own, else its versions' (schema.prices.VERSIONS_OWN)
        "SELECT o.source, o.sku, o.region, o.price_kind, p.amount, "
        "COALESCE(p.valid_from, vf.created_at), p.version_from, "
        "COALESCE(p.valid_to, vt.created_at), o.unit FROM price_observation p "
        "JOIN offer o ON o.id = p.offer_id "
        "LEFT JOIN catalog_version vf ON vf.id = p.version_from "
        "LEFT JOIN catalog_version vt ON vt.id = p.version_to "
        f"WHERE o.source IN ({IN_SOURCES}) ORDER BY p.id",
    )
    history: dict[tuple[str, str, str], list[tuple[Decimal, float, int, float | None]]] = {}
    # prices the farm never moves (one offer per unit: AWS reserves per hour and per term)
    unmoved: Counter[tuple[str, str, str, str, str]] = Counter()
    for source, sku, region, kind, amount, valid_from, version, valid_to, unit in obs:
        if kind == "on_demand":
            history.setdefault((source, sku, region), []).append(
                (
                    Decimal(str(amount)),
                    _ts(valid_from),
                    int(version),
                    _ts(valid_to) if valid_to is not None else None,
                )
            )
        else:
            unmoved[(source, sku, region, kind, unit)] += 1
    moved = [k for k, n in unmoved.items() if n != 1]
    outcome.check(not moved, f"{len(moved)} offers the farm never moved have changed: {moved[:3]}")
    regions: dict[tuple[str, str], list[str]] = {}
    for source, sku, region in history:
        regions.setdefault((source, sku), []).append(region)
    truth: dict[tuple[str, str], set[Decimal]] = {}
    for source, knobs in farm.knobs.items():
        for knob in knobs.values():
            truth.setdefault((source, knob.sku), set()).add(knob.amount)
    for change in log.changes:
        truth.setdefault((change["source"], change["sku"]), set()).update(
            (change["old"], change["new"])
        )

    # 1. every value served in a clean answer is in history (every region), inside its window
    sku_of = {(s, k.key): k.sku for s, knobs in farm.knobs.items() for k in knobs.values()}
    changed_values: dict[tuple[str, str, Decimal], float] = {}
    for change in log.changes:
        changed_values.setdefault((change["source"], change["key"], change["new"]), change["t"])
    missing, late, explained = 0, 0, 0
    for (source, key, value), (first, last) in log.served.items():
        if (source, key, value) not in changed_values:
            continue  # a baseline value: checked by the baseline crawl
        sku = sku_of[(source, key)]
        for region in regions.get((source, sku), []):
            rows = [r for r in history[(source, sku, region)] if r[0] == value]
            if not rows:
                if any(first - 1 <= k <= last + crawl_slack for k in kills):
                    explained += 1  # its crawl was killed, and the value gone by the next one
                    continue
                missing += 1
                outcome.violations.append(
                    f"legit change {source}/{sku}/{region} -> {value} not in history"
                )
                continue
            changed_at = changed_values[(source, key, value)]
            # the catalog showed the value at some moment of its window: a new observation,
            # or one still current when the farm moved back to it (a -> b -> a with b
            # never fetched by a successful crawl: the catalog rightly kept a)
            if not any(
                r[1] <= last + crawl_slack and (r[3] is None or r[3] >= changed_at) for r in rows
            ):
                late += 1
                seen = [(str(r[0]), round(r[1], 1), r[3] and round(r[3], 1)) for r in rows]
                outcome.violations.append(
                    f"legit change {source}/{sku}/{region} -> {value}: not in the catalog "
                    f"during {changed_at:.1f}..{last + crawl_slack:.1f} "
                    f"(observations at that amount, from/to: {seen})"
                )
    # the final values are the catalog's current prices
    for source, knobs in farm.knobs.items():
        for knob in knobs.values():
            current = {
                Decimal(str(r[0]))
                for r in _rows(
                    engine,
                    "SELECT amount FROM offer WHERE source = :s AND sku = :k "
                    "AND price_kind = 'on_demand' AND status = 'active'",
                    s=source,
                    k=knob.sku,
                )
            }
            outcome.check(
                current == {knob.amount},
                f"{source}/{knob.sku}: catalog {sorted(current)} != farm {knob.amount}",
            )

    # 2. no fault produced a price, a withdrawal or a version
    spikes = {(s, sku, v) for s, sku, v in log.spikes}
    for (source, sku, _region), rows in history.items():
        allowed = truth.get((source, sku))
        for amount, _, _, _ in rows:
            outcome.check(
                (source, sku, amount) not in spikes, f"spiked price {source}/{sku} {amount}"
            )
            if allowed is not None:
                outcome.check(
                    amount in allowed, f"{source}/{sku}: {amount} never served by the farm"
                )
        if allowed is None:
            outcome.check(len(rows) == 1, f"{source}/{sku}: moved although the farm never moved it")
    # 2a. withdrawals: exactly the offers of the products the farm removed, each by the
    # first version of a crawl that fetched after the removal (not before it, not later)
    expected = {(w["source"], sku): w["t"] for w in log.withdrawals for sku in w["skus"]}
    withdrawn_rows = _rows(
        engine,
        "SELECT o.source, o.sku, o.price_kind, o.withdrawn_at, o.withdrawn_version "
        f"FROM offer o WHERE o.status <> 'active' AND o.source IN ({IN_SOURCES})",
    )
    for source, sku, kind, at, version in withdrawn_rows:
        removed = expected.get((source, sku))
        if removed is None:
            outcome.violations.append(f"{source}/{sku} {kind} withdrawn (the farm kept it)")
            continue
        outcome.check(
            at is not None and _ts(at) >= removed and version is not None,
            f"{source}/{sku} {kind} withdrawn at {at} (version {version}) before the farm "
            f"removed it at {removed:.1f}",
        )
        later = _scalar(
            engine,
            "SELECT min(catalog_version) FROM crawl_run WHERE source = :s AND status = 'ok' "
            "AND catalog_version IS NOT NULL AND started_at > :t",
            s=source,
            t=_dt(removed + 0.5),
        )
        outcome.check(
            later is None or version is None or int(version) <= int(later),
            f"{source}/{sku} {kind} withdrawn by version {version}, after version {later} "
            "of a crawl that started after the removal",
        )
    for source, sku in expected:
        active = _scalar(
            engine,
            "SELECT count(*) FROM offer WHERE source = :s AND sku = :k AND status = 'active'",
            s=source,
            k=sku,
        )
        outcome.check(not active, f"{source}/{sku}: {active} offers still active after removal")
    withdrawn = len(withdrawn_rows)
    versions = _rows(
        engine,
        "SELECT v.id, count(p.id) FROM catalog_version v LEFT JOIN price_observation p "
        "ON p.version_from = v.id WHERE v.id > :b GROUP BY v.id",
        b=baseline_version,
    )
    withdrawing = {
        int(v)
        for (v,) in _rows(
            engine, "SELECT DISTINCT withdrawn_version FROM offer WHERE withdrawn_version > 0"
        )
    }  # a version that only withdraws offers: each withdrawal is checked above (2a)
    empty = [int(v) for v, n in versions if not n and int(v) not in withdrawing]
    outcome.check(not empty, f"catalog versions without a price change: {empty}")
    legit_obs = sum(len(rows) - 1 for rows in history.values())

    # 2b. FX: every new day the farm published is stored with exactly its rates; no day
    # served with a x100 rate is (a published rate never changes: a stored spike would stay)
    fx: dict[str, dict[str, Decimal]] = {}
    for day, currency, per_eur in _rows(
        engine, "SELECT rate_date, currency, per_eur FROM fx_rate WHERE source = 'ecb'"
    ):
        fx.setdefault(str(day)[:10], {})[str(currency)] = Decimal(str(per_eur))
    for event in log.published:
        stored = fx.get(event["date"], {})
        wrong = {c: str(r) for c, r in event["rates"].items() if stored.get(c) != r}
        outcome.check(
            not wrong,
            f"ecb day {event['date']}: {len(wrong)} rates not stored as published "
            f"(e.g. {dict(list(wrong.items())[:2])}; stored USD {stored.get('USD')})",
        )
    for event in log.fx_spikes:
        usd = event["rates"]["USD"]
        outcome.check(
            fx.get(event["date"], {}).get("USD") != usd,
            f"ecb day {event['date']}: the x100 USD rate {usd} was stored",
        )

    # 3. every failed or quarantined crawl run has a reason; runs left 'running' <= kills
    runs = _rows(
        engine, "SELECT status, reason, source FROM crawl_run WHERE trigger <> 'chaos-baseline'"
    )
    statuses = Counter(r[0] for r in runs)
    by_source: dict[str, Counter[str]] = {}
    for status, _, source in runs:
        by_source.setdefault(source, Counter())[status] += 1
    no_reason = sum(1 for s, r, _ in runs if s in ("failed", "quarantined") and not r)
    outcome.check(no_reason == 0, f"{no_reason} failed/quarantined crawl runs without a reason")
    outcome.check(
        statuses.get("running", 0) <= survived * len(farm.adapters),  # one per source per kill
        f"{statuses.get('running', 0)} crawl runs left 'running' (more than the kills)",
    )
    reasons = Counter(_reason_kind(r) for s, r, _ in runs if s in ("failed", "quarantined"))
    internal = [r for _, r, _ in runs if r and r.startswith("internal error")]
    outcome.check(
        not internal,
        f"{len(internal)} crawls crashed on bad input instead of rejecting records: {internal[:1]}",
    )
    # a crawl whose database connection was cut fails as "database unavailable" (retried at
    # its next run): only when the run cut the connections, and only runs open at the cut
    unavailable = [
        (reason, _ts(begun), _ts(ended) if ended else None)
        for status, reason, begun, ended in _rows(
            engine,
            "SELECT status, reason, started_at, finished_at FROM crawl_run "
            "WHERE reason LIKE 'database unavailable%'",
        )
    ]
    stray = [
        r
        for r, begun, ended in unavailable
        if not any(begun <= at and (ended is None or ended >= at) for at, _ in cuts)
    ]
    outcome.check(
        not stray, f"{len(stray)} crawls failed 'database unavailable' not across a DB cut"
    )

    # 3b. a changed layout fails its crawl as "layout changed"; reordered columns change
    # nothing (the spider finds columns by name): the crawl that fetched it is ok
    timed = [
        (source, status, reason, _ts(begun), _ts(ended) if ended else None)
        for source, status, reason, begun, ended in _rows(
            engine,
            "SELECT source, status, reason, started_at, finished_at FROM crawl_run "
            "WHERE trigger <> 'chaos-baseline'",
        )
    ]
    layout: Counter[str] = Counter()
    for fault in log.faults:
        if fault["kind"] not in LAYOUT_FAULTS | {"columns_reordered"}:
            continue
        owners = [
            (status, reason)
            for source, status, reason, begun, ended in timed
            if source == fault["source"]
            and begun - 0.5 <= fault["t"] <= (ended if ended is not None else 1e12) + 0.5
        ]
        killed = any(status == "running" or reason in KILLED_REASONS for status, reason in owners)
        if fault["kind"] == "columns_reordered":
            good = any(status == "ok" for status, _ in owners)
        else:
            good = any(s == "failed" and r == "layout changed" for s, r in owners)
        verdict = "as expected" if good else "killed" if killed else "WRONG"
        layout[f"{fault['kind']} {verdict}"] += 1
        outcome.check(
            good or killed,
            f"{fault['kind']} served to {fault['source']} at {fault['t']:.3f}: its crawl "
            f"ended {owners or 'nowhere'} (expected "
            + ("ok" if fault["kind"] == "columns_reordered" else "failed: layout changed")
            + ")",
        )

    # 4. alerts: delivered events = the legit changes, at least once each, none for faults
    events = _rows(
        engine,
        "SELECT e.status, e.idempotency_key, o.source, o.sku, o.price_kind, e.payload "
        "FROM alert_event e JOIN offer o ON o.id = e.offer_id",
    )
    unique = receiver.unique
    delivered_keys = set(unique)
    outcome.check(
        not receiver.bad_signatures,
        f"{len(receiver.bad_signatures)} webhooks with a bad signature: "
        f"{receiver.bad_signatures[:3]}",
    )
    outcome.check(
        not receiver.conflicting,
        f"redeliveries with another body under the same idempotency key: "
        f"{receiver.conflicting[:3]}",
    )
    for status, key, source, sku, kind, payload in events:
        body = payload if isinstance(payload, dict) else json.loads(payload)
        amount = Decimal(body["price"]["amount"])
        allowed = truth.get((source, sku), set())
        outcome.check(
            kind == "on_demand" and amount in allowed,
            f"alert for {source}/{sku} {kind} at {amount}: not a legit price",
        )
        outcome.check(key in delivered_keys, f"alert {key} ({status}) never reached the receiver")
    for key, body in unique.items():
        offer = body.get("offer") or {}
        amount = Decimal((body.get("price") or {}).get("amount") or "0")
        allowed = truth.get((str(offer.get("source")), str(offer.get("sku"))), set())
        outcome.check(
            offer.get("price_kind") == "on_demand" and amount in allowed,
            f"webhook {key}: {offer.get('sku')} {offer.get('price_kind')} {amount} is not a legit price",
        )
    changes_in_history = _scalar(
        engine,
        "SELECT count(*) FROM price_observation p JOIN offer o ON o.id = p.offer_id "
        f"WHERE p.version_from > :b AND o.source IN ({IN_SOURCES})",
        b=baseline_version,
    )
    outcome.check(
        len(events) >= changes_in_history,
        f"{changes_in_history} price changes but only {len(events)} alert events",
    )

    # 5. reads: zero 5xx (or no answer) outside the downtime windows; p99
    def down(hit: Hit) -> bool:
        windows = services[hit.replica].downtime
        return any(hit.start <= up and hit.end >= k - 0.5 for k, up in windows)

    def at_cut(hit: Hit) -> bool:  # in flight when its database connection was terminated
        return any(hit.start <= at + 0.5 and hit.end >= at - 0.05 for at, _ in cuts)

    cut_errors = [
        h for h in hits if at_cut(h) and (h.status >= 500 or (h.status == 0 and not down(h)))
    ]

    bad = [
        h
        for h in hits
        # an answer with 5xx means the process was up: excused only when in flight at a DB
        # cut; no answer at all (status 0) also inside its replica's downtime
        if h not in cut_errors and (h.status >= 500 or (h.status == 0 and not down(h)))
    ]
    for hit in bad[:5]:
        windows = [(round(k, 3), round(u, 3)) for k, u in services[hit.replica].downtime]
        outcome.violations.append(
            f"read {hit.kind} on replica {hit.replica} -> {hit.status} at "
            f"{hit.start:.3f}..{hit.end:.3f} (its downtime: {windows})"
        )
    if len(bad) > 5:
        outcome.violations.append(f"... {len(bad) - 5} more failed reads outside downtime")
    up_hits = sorted(h.end - h.start for h in hits if not down(h) and h.status < 500)
    p99 = up_hits[min(len(up_hits) - 1, int(len(up_hits) * 0.99))] if up_hits else 0.0
    p50 = up_hits[len(up_hits) // 2] if up_hits else 0.0
    outcome.check(len(hits) > 0, "no client request was made")

    faults = Counter(f["kind"] for f in log.faults)
    outcome.figures.update(
        {
            "faults_by_kind": dict(sorted(faults.items())),
            "faults_total": sum(faults.values()),
            "legit_changes_made": len(log.changes),
            "knobs_by_source": {n: len(k) for n, k in farm.knobs.items() if k},
            "fx_days_published": len(log.published),
            "withdrawals": [f"{w['source']}: {', '.join(w['skus'])}" for w in log.withdrawals],
            "offers_withdrawn": withdrawn,
            "fx_spiked_days_served": len(log.fx_spikes),
            "legit_values_served": sum(1 for k in log.served if k in changed_values),
            "legit_observations_in_history": legit_obs,
            "values_lost_to_kills": explained,
            "missing": missing,
            "outside_window": late,
            "farm_requests": dict(log.requests),
            "crawl_runs": dict(statuses),
            "crawl_runs_by_source": {k: dict(v) for k, v in sorted(by_source.items())},
            "faults_by_source": dict(Counter(f["source"] for f in log.faults)),
            "faults_by_page": dict(
                Counter(
                    f"{f['source']} p{f['page'] + 1} {f['kind']}"
                    for f in log.faults
                    if farm.adapters[f["source"]].pages > 1
                )
            ),
            "failure_reasons": dict(reasons),
            "catalog_versions": len(versions),
            "alert_events": len(events),
            "webhook_posts": len(receiver.posts),
            "webhooks_unique": len(unique),
            "webhook_redeliveries": receiver.redeliveries,
            "bad_signatures": len(receiver.bad_signatures),
            "layout_faults": layout,
            "kills_survived": survived,
            "replicas": len(services),
            "downtime_s": round(sum(up - k for s in services for k, up in s.downtime), 2),
            "db_cuts": [
                f"{n} sessions at {time.strftime('%H:%M:%S', time.gmtime(at))}" for at, n in cuts
            ],
            "errors_in_flight_at_db_cut": len(cut_errors),
            "requests": len(hits),
            "requests_by_kind": dict(Counter(h.kind for h in hits)),
            "status_codes": dict(Counter(h.status for h in hits)),
            "no_answer_in_downtime": sum(1 for h in hits if down(h) and h.status == 0),
            "errors_outside_downtime": len(bad),
            "p50_ms": round(p50 * 1000, 1),
            "p99_ms": round(p99 * 1000, 1),
        }
    )


def _reason_kind(reason: str | None) -> str:
    """A crawl run's reason without its details (for counting)."""
    reason = reason or "(none)"
    if reason.startswith("price of"):
        return "price outside the plausibility band"
    if reason.startswith("offer count dropped"):
        return "offer count dropped"
    return reason


def print_report(outcome: Outcome) -> None:
    print("chaos run")
    for name, value in outcome.figures.items():
        print(f"  {name:28} {value}")
    if outcome.violations:
        print(f"INVARIANTS VIOLATED ({len(outcome.violations)}):")
        for line in outcome.violations[:50]:
            print(f"  - {line}")
    else:
        print("all invariants held")


def _pick_sources(names: str | None) -> list[str] | None:
    if not names:
        return None
    picked = [n.strip() for n in names.split(",") if n.strip()]
    unknown = sorted(set(picked) - set(ADAPTERS))
    if unknown:
        raise SystemExit(f"the farm does not serve: {', '.join(unknown)}")
    return picked


def main(argv: list[str] | None = None) -> int:
    install()  # its ingests write their alert events, as the CLI's do
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs at random moments")
    parser.add_argument(
        "--aimed", type=int, default=2, help="SIGKILLs aimed at an ingest in progress"
    )
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--replicas", type=int, help="API processes (default: 2 on postgres)")
    parser.add_argument("--max-requests", type=int, default=50000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--sources",
        help="the farm's sources to run, comma-separated (default: every one the farm serves)",
    )
    parser.add_argument(
        "--faults", default=",".join(FAULT_KINDS), help="fault kinds, comma-separated"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a service setting (GPUATLAS_NAME), e.g. MAX_PRICE_FACTOR=1000",
    )
    args = parser.parse_args(argv)
    outcome = run(
        min(args.seconds, 3600),
        args.seed,
        args.db,
        kills=min(args.kills, 20),
        aimed=min(args.aimed, 20),
        clients=min(args.clients, 16),
        max_requests=args.max_requests,
        replicas=min(args.replicas, 4) if args.replicas else None,
        kinds=tuple(k for k in args.faults.split(",") if k in FAULT_KINDS) or FAULT_KINDS,
        sources=_pick_sources(args.sources),
        extra_env={f"GPUATLAS_{k.upper()}": v for k, _, v in (s.partition("=") for s in args.set)},
    )
    print_report(outcome)
    if args.json:
        args.json.write_text(
            json.dumps(
                {**outcome.figures, "violations": outcome.violations, "farm_log": outcome.log},
                indent=2,
                default=str,
            )
        )
    return 1 if outcome.violations else 0


if __name__ == "__main__":
    sys.exit(main())
