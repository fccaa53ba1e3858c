"""Who hears of a catalog change, inside the ingest transaction that made it.

The alert outbox writes its events in the same transaction as the ingest that caused
them: a rolled-back or quarantined ingest leaves no event, a committed one every event.
The catalog does not import the alerts for it. The outbox registers itself here once per
process (:func:`service.alerts.listeners.install`, called where a process starts: the CLI,
the API, the crawl child, the tests' conftest), and :func:`service.catalog.ingest.ingest`
calls the listener with each diff it writes. An ingest in a process where nothing
registered refuses to start (:class:`IngestError`) rather than drop alert events silently.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection

from service.catalog.diff import Diff
from service.catalog.results import IngestError


class DiffListener(Protocol):
    def __call__(
        self,
        conn: Connection,
        version: int,
        diff: Diff,
        now: datetime,
        observations: Callable[[], list[tuple[Any, ...]]],
    ) -> int:
        """Act on the diff of catalog version ``version``, written on ``conn`` (not yet
        committed). ``observations`` gives the observation rows the writer inserted, as
        :data:`service.catalog.columns.OBS_COLUMNS` (added offers first, then changed and
        reopened ones, in diff order); call it only when needed, it may build them."""
        ...


listener: DiffListener | None = None
"""The one listener of this process (see :func:`listen`)."""
wants: Callable[[Connection], bool] | None = None
"""Whether the listener will read an ingest's changes (see :func:`wanted`)."""


def listen(new: DiffListener, interested: Callable[[Connection], bool] | None = None) -> None:
    """Make ``new`` the listener every ingest of this process calls (idempotent);
    ``interested`` tells, at the start of an ingest, whether it will read the changes."""
    global listener, wants
    listener, wants = new, interested


def wanted(conn: Connection) -> bool:
    """Whether this ingest must keep its changes for the listener. An ingest streams its
    records in batches; the changes of all of them are kept (memory in proportion to the
    changes) only when the listener will read them, e.g. while some alert subscription is
    live. Without the hook, always."""
    return True if wants is None else wants(conn)


def required() -> DiffListener:
    """The registered listener; an ingest without one would lose alert events."""
    if listener is None:
        raise IngestError(
            "no listener for catalog changes: call service.alerts.listeners.install() "
            "when the process starts"
        )
    return listener
