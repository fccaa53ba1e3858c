"""A crawl run whose process died is closed as ``failed: interrupted`` as soon as that can
be known: when its source crawls again and when a scheduler starts, not 6 hours later.

The dying processes are real: a child Python process opens a run on the test database and
SIGKILLs itself; another opens one and stays alive (its run must stay ``running``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, select, update

from schema.crawl import CrawlRun
from schema.types import utcnow
from service.catalog.run_owner import (
    STALE_AFTER,
    close_dead_runs,
    group_alive,
    owner_alive,
    owner_of,
    this_owner,
)
from service.catalog.runs import start_crawl_run
from service.core.config import PROJECT_ROOT, Settings
from service.core.db import writer
from service.crawl.child import run_crawl_in_child
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply

RUN = CrawlRun.__table__  # type: ignore[attr-defined]

OPEN_RUN = textwrap.dedent(
    """
    import os, signal, sys, time
    from service.core.db import make_engine
    from service.catalog.runs import start_crawl_run
    run_id = start_crawl_run(make_engine(sys.argv[1]), sys.argv[2])
    print(run_id, flush=True)
    if sys.argv[3] == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)
    """
)


def open_run(url: str, source: str, how: str) -> tuple[int, subprocess.Popen[str]]:
    """A separate process opens a crawl run of ``source``, then dies or stays alive."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", OPEN_RUN, url, source, how],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    run_id = int(proc.stdout.readline())
    proc.stdout.close()
    if how == "die":
        assert proc.wait(timeout=30) == -signal.SIGKILL
    return run_id, proc


def row(engine: Engine, run_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(select(RUN).where(RUN.c.id == run_id)).mappings().one())


def test_owner_identity_and_liveness() -> None:
    me = this_owner()
    assert me.count(":") >= 2 and str(os.getpid()) in me
    assert owner_alive(me) is True
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    host = me.rsplit(":", 2)[0]
    assert owner_alive(f"{host}:{gone.stdout.strip()}:1") is False
    recycled = f"{host}:{os.getpid()}:1"  # our pid, another start time: not us
    assert owner_alive(recycled) is False
    assert owner_alive(f"elsewhere.example:{os.getpid()}:1") is None  # another host
    for garbage in (None, "", "nonsense", "a:b:c", f"{host}:-1:5"):
        assert owner_alive(garbage) is None


def test_a_dead_owners_run_is_closed_when_its_source_crawls_again(
    engine: Engine, db_url: str
) -> None:
    alive_id, alive = open_run(db_url, "acme", "live")
    dead, _ = open_run(db_url, "acme", "die")
    try:
        other_source, _ = open_run(db_url, "other", "die")
        assert row(engine, dead)["status"] == "running" and row(engine, dead)["owner"]
        mine = start_crawl_run(engine, "acme")
        closed = row(engine, dead)
        assert (closed["status"], closed["reason"]) == ("failed", "interrupted")
        assert closed["finished_at"] is not None and "stopped" in closed["error"]
        assert row(engine, alive_id)["status"] == "running"  # its process still runs
        assert row(engine, other_source)["status"] == "running"  # another source: later
        assert row(engine, mine)["owner"] == this_owner()
        with writer(engine).begin() as conn:  # the scheduler's start-up sweep: every source
            assert close_dead_runs(conn, utcnow()) == [other_source]
        assert row(engine, alive_id)["status"] == "running"
    finally:
        alive.kill()
        alive.wait()
    with writer(engine).begin() as conn:
        assert close_dead_runs(conn, utcnow()) == [alive_id]


def test_an_unverifiable_owner_is_closed_only_when_stale(engine: Engine) -> None:
    run_id = start_crawl_run(engine, "acme")
    with writer(engine).begin() as conn:  # as if opened on another host
        conn.execute(update(RUN).where(RUN.c.id == run_id).values(owner="elsewhere:1:1"))
        assert close_dead_runs(conn, utcnow(), "acme") == []
        assert close_dead_runs(conn, utcnow() + STALE_AFTER + timedelta(seconds=1)) == [run_id]


def test_a_crawl_child_owns_its_run(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    route = "/pls/apex/cetools/api/v1/products/?currencyCode=USD"
    server.route(route, Reply.file(FIXTURES / "oracle" / "products-USD.json"))
    update_ = {"source_base_urls": {"oracle": server.url}, "http_max_retries": 0}
    outcome = run_crawl_in_child(engine, settings.model_copy(update=update_), "oracle")
    assert outcome.label == "ok"
    owner = row(engine, outcome.crawl_run_id)["owner"]
    assert owner and owner != this_owner() and owner_alive(owner) is False  # the child, gone


def test_an_exited_process_not_yet_reaped_is_not_alive() -> None:
    """A zombie (an orphaned crawl child whose new parent does not reap it stays one) still
    answers a signal and keeps its /proc entry: it is gone all the same."""
    proc = subprocess.Popen(["sleep", "30"])
    try:
        owner = owner_of(proc.pid)
        assert owner_alive(owner) is True and group_alive(os.getpgid(proc.pid))
        os.kill(proc.pid, signal.SIGKILL)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped
        os.kill(proc.pid, 0)  # the zombie still answers
        assert owner_alive(owner) is False
    finally:
        proc.wait()
    assert owner_alive(owner) is False


def test_a_group_is_alive_while_any_of_its_processes_runs() -> None:
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 30 & read line"], stdin=subprocess.PIPE, start_new_session=True
    )
    try:
        assert group_alive(leader.pid)
        assert leader.stdin is not None
        leader.stdin.close()
        leader.wait()  # the leader is gone; its sleep is not
        assert owner_alive(owner_of(leader.pid)) is False
        assert group_alive(leader.pid)
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while group_alive(leader.pid):  # the sleep's new parent reaps it (or it stays a zombie)
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert not group_alive(2**62)  # a group no process can lead
