"""Per-source schedules (APScheduler 3.11), wired to the same function the CLI calls.

One scheduler per database: on SQLite a lock file next to the database refuses a
second one; on PostgreSQL the holder of an advisory lock schedules and the others wait
to take over.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from crawlers.registry import all_sources
from schema.types import utcnow
from service.catalog.run_owner import close_dead_runs
from service.core.config import Settings
from service.core.db import writer
from service.crawl.schedules import (  # noqa: F401 (parse_interval re-exported)
    check_source_settings,
    intervals,
    parse_interval,
)
from service.crawl.scratch import sweep
from service.crawl.sources import sync_sources
from service.query.runs import last_good_crawls

log = logging.getLogger("gpuatlas.scheduler")
LEADER_LOCK_KEY = 0x67707562  # "gpub"
ALERTS_EXECUTOR = "alerts"
"""The dispatcher's executor (one thread), apart from the crawls' pool."""


class SchedulerLockError(RuntimeError):
    """Another scheduler already runs on this database."""


def source_schedules(settings: Settings) -> dict[str, int]:
    """Source name -> interval in seconds (configuration overrides the source default)."""
    defaults = {name: getattr(cls, "schedule", "6h") for name, cls in all_sources().items()}
    check_source_settings(settings, defaults)
    return intervals(settings, defaults)


def build_scheduler(
    engine: Engine, settings: Settings, run: Callable[[str], Any] | None = None
) -> BackgroundScheduler:
    from service.crawl.child import run_crawl_in_child

    def crawl(name: str) -> None:
        """One scheduled crawl, in a child process with a timeout (``crawl_timeout_seconds``):
        a crash or hang is written on its crawl run and never reaches the scheduler."""
        try:
            if run is not None:
                report = run(name)
            else:
                report = run_crawl_in_child(engine, settings, name, trigger="scheduler")
            log.info("scheduled crawl %s: %s", name, getattr(report, "label", report))
        except Exception:  # e.g. the database is down: the next run tries again
            log.exception("scheduled crawl %s could not run", name)

    scheduler = BackgroundScheduler(timezone="UTC")
    with engine.connect() as conn:
        last = last_good_crawls(conn)
    now = utcnow()
    for name, seconds in source_schedules(settings).items():
        previous = last.get(name)
        first = (
            previous + timedelta(seconds=seconds)
            if previous
            else now + timedelta(seconds=min(seconds, 30))
        )
        scheduler.add_job(
            crawl,
            IntervalTrigger(seconds=seconds, jitter=min(300, seconds // 10)),
            args=[name],
            id=f"crawl:{name}",
            name=f"crawl {name}",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(60, seconds // 2),
            next_run_time=max(first, now + timedelta(seconds=5)),
        )
    add_dispatcher_job(scheduler, engine, settings)
    add_compaction_job(scheduler, engine, settings)
    return scheduler


COMPACTION_JOB = "upkeep:compact"


def add_compaction_job(scheduler: BackgroundScheduler, engine: Engine, settings: Settings) -> None:
    """Compact the database on ``compact_schedule`` (UTC; none: never), as ``gpuatlas db
    compact`` does (:func:`service.core.upkeep.compact`): a catalog grown by ingests keeps
    its indexes packed. A wall-clock schedule, so a service restarted more often than it
    runs still runs it; one missed while the service was down is not made up later."""
    from service.core.upkeep import scheduled_compaction

    if settings.compact_schedule is None:
        return
    scheduler.add_job(
        scheduled_compaction,
        CronTrigger.from_crontab(settings.compact_schedule, timezone="UTC"),
        args=[engine],
        id=COMPACTION_JOB,
        name="compact the database",
        max_instances=1,
        coalesce=True,
        misfire_grace_time=3600,
    )


def add_dispatcher_job(scheduler: BackgroundScheduler, engine: Engine, settings: Settings) -> None:
    """Deliver due alert webhooks every few seconds (one run at a time)."""
    from service.alerts.dispatch import run_dispatcher_once

    def dispatch() -> None:
        try:
            run_dispatcher_once(engine, settings)
        except Exception:  # the next run retries; never stop the scheduler
            log.exception("alert dispatcher run failed")

    # a thread of its own: a full crawl pool (every source due at once, slow pages) must
    # never hold alert delivery back
    with contextlib.suppress(ValueError):  # already added
        scheduler.add_executor(ThreadPoolExecutor(max_workers=1), alias=ALERTS_EXECUTOR)
    scheduler.add_job(
        dispatch,
        IntervalTrigger(seconds=settings.dispatcher_interval_seconds),
        executor=ALERTS_EXECUTOR,
        id="alerts:dispatch",
        name="deliver alert webhooks",
        max_instances=1,
        coalesce=True,
        misfire_grace_time=settings.dispatcher_interval_seconds * 2,
    )


class SqliteSchedulerLock:
    """An exclusive lock file beside the SQLite database: one scheduler per file."""

    def __init__(self, database_url: str) -> None:
        database = make_url(database_url).database or ":memory:"
        self.path = Path(f"{database}.scheduler.lock")
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise SchedulerLockError(
                f"another scheduler is already running on this database ({self.path} is "
                "locked); run the API with GPUATLAS_SCHEDULER_ENABLED=false or stop the other"
            ) from None
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


class Leader:
    """Runs the scheduler while this process holds the database's scheduler lock."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine, self.settings = engine, settings
        self.poll_seconds = settings.scheduler_poll_seconds
        self.scheduler: BackgroundScheduler | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sqlite_lock: SqliteSchedulerLock | None = None

    @property
    def is_leader(self) -> bool:
        return self.scheduler is not None

    def start(self) -> None:
        source_schedules(self.settings)  # a bad GPUATLAS_SCHEDULES fails here, on both backends
        try:
            sync_sources(self.engine)  # the API reads source metadata from the database
        except Exception:  # stale metadata must not keep the scheduler from running
            log.exception("could not sync source metadata")
        if self.engine.dialect.name == "sqlite":
            self._sqlite_lock = SqliteSchedulerLock(self.settings.database_url)
            self._sqlite_lock.acquire()
            self._close_dead_runs()
            self.scheduler = build_scheduler(self.engine, self.settings)
            self.scheduler.start()
            return
        self._thread = threading.Thread(target=self._campaign, name="scheduler-leader", daemon=True)
        self._thread.start()

    def _close_dead_runs(self) -> None:
        """Runs left ``running`` by dead crawl processes get their final status now, and
        the scratch folders nothing uses any more are removed (service.crawl.scratch)."""
        sweep()
        try:
            with writer(self.engine).begin() as conn:
                closed = close_dead_runs(conn, utcnow())
        except Exception:  # never keep the scheduler from starting
            log.exception("could not close the runs of dead crawl processes")
            return
        if closed:
            log.info("closed %d crawl runs left running by dead processes", len(closed))

    def _campaign(self) -> None:
        """PostgreSQL: hold an advisory lock on a dedicated connection while leading."""
        while not self._stop.is_set():
            try:
                with self.engine.connect() as conn:
                    got = conn.execute(
                        text("SELECT pg_try_advisory_lock(:key)"), {"key": LEADER_LOCK_KEY}
                    ).scalar()
                    conn.commit()
                    if got:
                        log.info("this process is the scheduler leader")
                        self._close_dead_runs()
                        self.scheduler = build_scheduler(self.engine, self.settings)
                        self.scheduler.start()
                        while not self._stop.wait(self.poll_seconds):
                            conn.execute(text("SELECT 1"))  # lock lives with this connection
                            conn.commit()
            except Exception:
                log.exception("scheduler leadership lost")
            finally:
                if self.scheduler is not None:
                    self.scheduler.shutdown(wait=False)
                    self.scheduler = None
            self._stop.wait(self.poll_seconds)

    def stop(self) -> None:
        self._stop.set()
        if self.scheduler is not None and self._thread is None:
            self.scheduler.shutdown(wait=False)
            self.scheduler = None
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._sqlite_lock is not None:
            self._sqlite_lock.release()
