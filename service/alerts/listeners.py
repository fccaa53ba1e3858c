"""The alerts hear of every catalog and certification change, in the writer's transaction.

:func:`install` registers the outbox (:func:`service.alerts.outbox.enqueue_for_diff`) as
the catalog's diff listener and the certification alerts
(:func:`service.alerts.certs.enqueue_certification_changes`) as the compliance loader's
listener. Every process that may ingest or load reference data calls it once when it
starts: the CLI, the API, the crawl child, the tests' conftest, the benchmark and chaos
scripts. The catalog and the compliance loader import nothing of the alerts.
"""

from __future__ import annotations

from service.alerts.certs import enqueue_certification_changes
from service.alerts.outbox import enqueue_for_diff, wants_changes
from service.catalog import diff_listener
from service.compliance import listener as certification_listener


def install() -> None:
    """Register the alerts' listeners in this process (idempotent)."""
    diff_listener.listen(enqueue_for_diff, wants_changes)
    certification_listener.listen(enqueue_certification_changes)
