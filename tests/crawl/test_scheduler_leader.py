"""One scheduler leader on PostgreSQL: two `gpuatlas scheduler` processes on one database
run each due crawl once; when the leader is SIGKILLed the other takes over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest
from sqlalchemy import Engine, func, select

from crawlers.registry import all_sources
from schema.crawl import CrawlRun
from service.core.db import make_engine
from service.core.migrate import upgrade
from tests.conftest import FIXTURES, ROOT
from tests.support.replay import ReplayServer, Reply

RUN = CrawlRun.__table__  # type: ignore[attr-defined]
ROUTE = "/pls/apex/cetools/api/v1/products/?currencyCode=USD"
INTERVAL = 10
POLL = 0.5
"""GPUATLAS_SCHEDULER_POLL_SECONDS: the follower tries to lead every half second (5 by
default), so a takeover does not wait out a long poll; the lock is what is tested."""

pytestmark = pytest.mark.postgres


def start_scheduler(url: str, base: str, log: IO[bytes]) -> subprocess.Popen[bytes]:
    schedules = dict.fromkeys(all_sources(), "off")
    schedules["oracle"] = f"{INTERVAL}s"
    env = {
        **os.environ,
        "GPUATLAS_DATABASE_URL": url,
        "GPUATLAS_SCHEDULES": json.dumps(schedules),
        "GPUATLAS_SOURCE_BASE_URLS": json.dumps({"oracle": base}),
        "GPUATLAS_HTTP_MAX_RETRIES": "0",
        "GPUATLAS_SCHEDULER_POLL_SECONDS": str(POLL),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [sys.executable, "-c", "from service.cli.app import run; run()", "scheduler"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )


def runs(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(RUN).where(RUN.c.source == "oracle")
            ).scalar()
            or 0
        )


def wait_for(predicate, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False


@pytest.mark.slow
def test_one_leader_and_takeover(pg_url: str, server: ReplayServer, tmp_path: Path) -> None:
    upgrade(pg_url)
    engine = make_engine(pg_url)
    server.route(ROUTE, Reply.file(FIXTURES / "oracle" / "products-USD.json"))
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    handles = [log.open("wb") for log in logs]
    procs = [start_scheduler(pg_url, server.url, handle) for handle in handles]
    try:

        def leaders() -> list[int]:
            return [
                i
                for i, log in enumerate(logs)
                if "is the scheduler leader" in log.read_text(errors="replace")
            ]

        assert wait_for(lambda: len(leaders()) == 1, 30), [p.read_text() for p in logs]
        leader = leaders()[0]
        # Two intervals with both processes alive: crawls happen once per interval, not twice.
        assert wait_for(lambda: runs(engine) >= 2, 3 * INTERVAL + 20)
        time.sleep(INTERVAL / 2)
        count = runs(engine)
        assert count <= 3, f"{count} runs in ~2 intervals: both processes scheduled"
        assert len(leaders()) == 1
        # Kill the leader: the other process takes over within a bounded time.
        os.killpg(procs[leader].pid, signal.SIGKILL)
        procs[leader].wait(timeout=10)
        other = 1 - leader
        assert wait_for(
            lambda: "is the scheduler leader" in logs[other].read_text(errors="replace"), 30
        ), logs[other].read_text()
        before = runs(engine)
        assert wait_for(lambda: runs(engine) > before, 2 * INTERVAL + 20)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)
        for handle in handles:
            handle.close()
        engine.dispose()
