"""Run one crawl in a child process with a timeout, so a crash or hang never spreads.

The parent (:func:`run_crawl_in_child`, used by the scheduler and ``POST
/v1/sources/{name}/run``) creates the crawl run first, then starts
``python -m service.crawl.child RUN_ID`` in its own process group and hands it the
settings on stdin (credentials never appear on a command line). The child crawls into
that run and exits 0 whatever the crawl's outcome. When the child dies instead, or
outlives ``settings.crawl_timeout_seconds``, the parent kills its whole process group
(Scrapy's grandchild too) and writes ``failed: crashed`` or ``failed: timeout`` on the
run, unless the child already closed it. Either way the caller carries on. A child whose
parent was killed kills its own group :data:`BACKSTOP_SECONDS` after that limit.

The child's temporary files (responses spooled to disk, such as AWS's offer files of
several GB) go to a folder of its own (``TMPDIR``), which the parent deletes when the
child is gone, however it ended: a killed crawl leaves nothing behind. A killed parent
cannot delete it: the next crawl in a child, or the next scheduler to start, does once
neither process is alive (:mod:`service.crawl.scratch`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass

from sqlalchemy import Engine, select, update

from schema.crawl import CrawlRun
from schema.enums import CrawlStatus
from schema.types import utcnow
from service.catalog.run_owner import claim_run
from service.catalog.runs import start_crawl_run
from service.core.config import PROJECT_ROOT, Settings
from service.core.db import writer
from service.crawl.scratch import mark_child, scratch_folder, sweep

RUN = CrawlRun.__table__  # type: ignore[attr-defined]
STDERR_TAIL = 3000
BACKSTOP_SECONDS = 30.0
"""How long after its parent would have killed it a child kills its own process group: it
outlives a killed parent (a session of its own), and a crawl that hangs then must still
end, and let go of the database's write lock."""
log = logging.getLogger("gpuatlas.crawl")


@dataclass
class ChildOutcome:
    source: str
    crawl_run_id: int
    status: str
    reason: str | None
    exit_code: int | None
    seconds: float

    @property
    def label(self) -> str:
        return f"{self.status}: {self.reason}" if self.reason else self.status


def start_run(engine: Engine, name: str, trigger: str) -> int:
    """Create the crawl run a child will fill (the parent can always close it)."""
    from crawlers.registry import get_source  # the scheduler's side; the API uses its table

    source_cls = get_source(name)
    return start_crawl_run(
        engine, name, trigger=trigger, parser_version=getattr(source_cls, "parser_version", None)
    )


def run_crawl_in_child(
    engine: Engine,
    settings: Settings,
    name: str,
    *,
    trigger: str = "scheduler",
    run_id: int | None = None,
    timeout: float | None = None,
) -> ChildOutcome:
    """Crawl ``name`` in a child process; returns once the run has a final status."""
    import time

    started = time.monotonic()
    if run_id is None:
        run_id = start_run(engine, name, trigger)
    limit = settings.crawl_timeout_seconds if timeout is None else timeout
    path = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
    sweep()  # what crawls of killed processes left behind
    with scratch_folder(run_id) as scratch:
        child = subprocess.Popen(  # noqa: S603 (our own module, fixed arguments)
            [
                sys.executable,
                "-m",
                "service.crawl.child",
                str(run_id),
                name,
                trigger,
                repr(limit + BACKSTOP_SECONDS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path, "TMPDIR": str(scratch)},
            start_new_session=True,  # its own process group: a timeout kills grandchildren too
        )
        mark_child(scratch, child.pid)
        reason, error, stderr = _wait(engine, settings, child, run_id, limit)
    code = child.returncode
    if reason is None and code != 0:
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        reason, error = "crashed", f"child process {how}"
    if reason is not None:
        tail = (stderr or b"").decode("utf-8", "replace")[-STDERR_TAIL:]
        _close(engine, run_id, reason, f"{error}\n{tail}".strip())
    elif _status(engine, run_id)[0] == CrawlStatus.running.value:  # exit 0 but never closed
        _close(engine, run_id, "crashed", "child process exited without closing its run")
    status, final_reason = _status(engine, run_id)
    outcome = ChildOutcome(name, run_id, status, final_reason, code, time.monotonic() - started)
    log.info("crawl %s (run %s): %s", name, run_id, outcome.label)
    return outcome


def _wait(
    engine: Engine, settings: Settings, child: subprocess.Popen[bytes], run_id: int, limit: float
) -> tuple[str | None, str | None, bytes | None]:
    """Hand the child its settings and wait for it (killed past ``limit`` seconds): the
    reason and error to record when it did not end by itself, and its stderr."""
    try:
        _, stderr = child.communicate(settings.model_dump_json().encode(), timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        _, stderr = child.communicate()
        return "timeout", f"no result after {limit:g} s: child process killed", stderr
    except BaseException:  # the parent itself is being stopped: take the child along
        _kill_group(child)
        child.wait()
        _close(engine, run_id, "interrupted", "the parent process stopped during the crawl")
        raise
    return None, None, stderr


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(child.pid, signal.SIGKILL)


def _close(engine: Engine, run_id: int, reason: str, error: str) -> None:
    """Mark a still-running run failed (a run the child closed keeps its own status)."""
    with writer(engine).begin() as conn:
        conn.execute(
            update(RUN)
            .where(RUN.c.id == run_id, RUN.c.status == CrawlStatus.running.value)
            .values(
                status=CrawlStatus.failed.value,
                reason=reason,
                error=error[-4000:],
                finished_at=utcnow(),
            )
        )


def _status(engine: Engine, run_id: int) -> tuple[str, str | None]:
    with engine.connect() as conn:
        row = conn.execute(select(RUN.c.status, RUN.c.reason).where(RUN.c.id == run_id)).one()
    return str(row.status), row.reason


def crawl_into_run(engine: Engine, settings: Settings, name: str, run_id: int, trigger: str) -> str:
    """What the child does: :func:`service.crawl.run.crawl_source`, into an existing run."""
    from service.crawl.run import crawl_source  # only in the child: it imports the crawlers

    try:
        return crawl_source(engine, settings, name, trigger=trigger, crawl_run_id=run_id).label
    except Exception as exc:  # recorded on the run by crawl_source; report, don't crash
        return f"failed: internal error: {type(exc).__name__}"


def main(argv: list[str]) -> int:
    from service.alerts.listeners import install
    from service.core.db import make_engine

    install()  # the crawl's ingest writes its alert events
    run_id, name, trigger = int(argv[0]), argv[1], argv[2]
    if len(argv) > 3:
        _end_by(float(argv[3]))
    settings = Settings.model_validate_json(sys.stdin.buffer.read())
    engine = make_engine(settings.database_url)
    try:
        with writer(engine).begin() as conn:  # the run is ours now: if we die, it is closed
            claim_run(conn, run_id)
        print(crawl_into_run(engine, settings, name, run_id, trigger), flush=True)
    finally:
        engine.dispose()
    return 0


def _end_by(seconds: float) -> None:
    """Kill this process's group (Scrapy's process too) ``seconds`` from now, unless it has
    ended: the parent kills it :data:`BACKSTOP_SECONDS` sooner while it lives; this is for
    a child whose parent was killed. A thread of its own, so that a main thread blocked in
    a call that does not return to the interpreter cannot hold it back. Its run is then
    closed as ``failed: interrupted`` by the next crawl of its source or the next
    scheduler to start (its owner is gone)."""
    timer = threading.Timer(max(seconds, 0.0), _expire)
    timer.daemon = True
    timer.start()


def _expire() -> None:
    if os.getpgid(0) == os.getpid():  # the leader of its own group, as it is started
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
