"""Which process owns a running crawl run, and whether that process is still alive.

A crawl run is ``running`` from :func:`service.catalog.runs.start_crawl_run` until its crawl
closes it. When the process doing the crawl dies without closing it (SIGKILL, power loss,
an OOM kill of the scheduler and its child together), nobody else would: the run records
its **owner**, ``host:pid:start`` (``start`` is the process's start time in clock ticks
since boot, from ``/proc``, so a recycled pid is not mistaken for the owner). A run whose
owner ran on this host and is gone is closed as ``failed: interrupted`` the next time its
source starts a crawl and when a scheduler starts. Runs owned by another host are only
closed once they are older than ``STALE_AFTER`` (their owner cannot be checked from here).
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

from sqlalchemy import Connection, select, update

from schema.crawl import CrawlRun
from schema.enums import CrawlStatus
from schema.text import ascii_digits

RUN = CrawlRun.__table__  # type: ignore[attr-defined]
STALE_AFTER = timedelta(hours=6)
"""A run still ``running`` after this long was interrupted, whoever owned it."""
INTERRUPTED = "interrupted"
DEAD_STATES = frozenset("ZX")
"""A process's states (/proc/PID/stat) once it has exited: a zombie (an orphan whose new
parent does not reap it stays one) or dead."""


def _stat(pid: int | str) -> tuple[str, str, str] | None:
    """The process's state, process group and start time (fields 3, 5 and 22 of
    /proc/PID/stat), or None (no such process, or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after it
    fields = stat[stat.rindex(")") + 2 :].split()
    return (fields[0], fields[2], fields[19]) if len(fields) > 19 else None


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, or None without /proc."""
    found = _stat(pid)
    return found[2] if found else None


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a process that has not exited (a zombie does not
    count). Without /proc, whether the group exists at all."""
    if not Path("/proc/self/stat").exists():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, OverflowError):
            return False
        except OSError:
            return True  # exists, another user's
        return True
    wanted = str(pgid)
    for entry in os.listdir("/proc"):
        if ascii_digits(entry):
            found = _stat(entry)
            if found is not None and found[1] == wanted and found[0] not in DEAD_STATES:
                return True
    return False


@cache
def _host() -> str:
    return socket.gethostname()[:100]


def this_owner() -> str:
    """``host:pid:start`` of the calling process."""
    return owner_of(os.getpid())


def owner_of(pid: int) -> str:
    """``host:pid:start`` of process ``pid`` of this host (``?`` for its start when /proc
    cannot tell: such an owner counts as alive as long as the pid exists)."""
    return f"{_host()}:{pid}:{_start_ticks(pid) or '?'}"


def owner_alive(owner: str | None) -> bool | None:
    """True/False for an owner on this host; None when it cannot be told (other host,
    no owner recorded, unreadable)."""
    if not owner:
        return None
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != _host() or not ascii_digits(parts[1]):
        return None
    pid, start = int(parts[1]), parts[2]
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or a pid no process can have
        return False
    except PermissionError:
        pass  # exists, owned by another user
    found = _stat(pid)
    if found is None:
        return True
    state, _, current = found
    if state in DEAD_STATES:  # exited, not yet reaped: it will never close anything
        return False
    return start in ("?", current)


def close_dead_runs(conn: Connection, now: datetime, source: str | None = None) -> list[int]:
    """Close the ``running`` runs (of ``source``, or all) whose owner is gone or that are
    older than :data:`STALE_AFTER`; returns their ids. Runs inside ``conn``'s transaction."""
    query = select(RUN.c.id, RUN.c.owner, RUN.c.started_at).where(
        RUN.c.status == CrawlStatus.running.value
    )
    if source is not None:
        query = query.where(RUN.c.source == source)
    dead = [
        row.id
        for row in conn.execute(query)
        if owner_alive(row.owner) is False or row.started_at < now - STALE_AFTER
    ]
    if dead:
        conn.execute(
            update(RUN)
            .where(RUN.c.id.in_(dead), RUN.c.status == CrawlStatus.running.value)
            .values(
                status=CrawlStatus.failed.value,
                reason=INTERRUPTED,
                error="the process running this crawl stopped without closing it",
                finished_at=now,
            )
        )
    return dead


def claim_run(conn: Connection, run_id: int) -> None:
    """Make the calling process the owner of ``run_id`` (a crawl child taking over the run
    its parent created)."""
    conn.execute(update(RUN).where(RUN.c.id == run_id).values(owner=this_owner()))
