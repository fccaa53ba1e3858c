"""Who hears of a certification change, inside the reference load that made it.

A reference load that changes what a provider holds raises ``cert_gained``/``cert_lost``
alert events, committed with the new certification versions or not at all (the outbox
invariant). The compliance loader does not import the alerts for it: the alerts register
their listener here once per process (:func:`service.alerts.listeners.install`, called
where a process starts: the CLI, the API, the crawl child, the tests' conftest). A load
that would change certifications in a process where nothing registered refuses, rather
than drop the events silently.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sqlalchemy import Connection

from service.compliance.held import CertKey, CertRow
from service.core.reference_error import ReferenceError


class CertificationListener(Protocol):
    def __call__(self, conn: Connection, before: dict[CertKey, CertRow], now: datetime) -> int:
        """Act on the certification rows a load just wrote on ``conn`` (not yet committed);
        ``before`` is what was current before the load."""
        ...


listener: CertificationListener | None = None
"""The one listener of this process (see :func:`listen`)."""


def listen(new: CertificationListener) -> None:
    """Make ``new`` the listener every reference load of this process calls (idempotent)."""
    global listener
    listener = new


def required() -> CertificationListener:
    """The registered listener; a load without one would lose certification alerts."""
    if listener is None:
        raise ReferenceError(
            "no listener for certification changes: call service.alerts.listeners.install() "
            "when the process starts"
        )
    return listener
