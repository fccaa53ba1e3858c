"""Fork server for the SIGKILL test: imports once, then forks one ingest per request.

Reads a target ("a" or "b") per line on stdin, optionally followed by the URL of another
database to ingest into; for each, forks a child that prints ``ready <pid>``, ingests
that record set and exits. Children are reaped automatically, so a killed child's pid
disappears as soon as it is dead. A second argument sets the bulk-load index rebuild
threshold (``service.catalog.bulk.REBUILD_MIN_ROWS``) and a third the threshold of PostgreSQL's
per-load foreign-key checks (``service.catalog.writer.PER_LOAD_CHECKS_MIN_ROWS``), so small
ingests take those paths too.
"""

from __future__ import annotations

import os
import signal
import sys

from service.alerts.listeners import install
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from service.core.db import make_engine
from tests.catalog.test_ingest_kill import record_set


def main() -> None:
    install()  # its ingests write their alert events, as the CLI's do
    url = sys.argv[1]
    if len(sys.argv) > 2:
        import service.catalog.bulk

        service.catalog.bulk.REBUILD_MIN_ROWS = int(sys.argv[2])
    if len(sys.argv) > 3:
        import service.catalog.writer

        service.catalog.writer.PER_LOAD_CHECKS_MIN_ROWS = int(sys.argv[3])
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
    prepared = {"a": record_set("a"), "b": record_set("b")}
    for line in sys.stdin:
        target, _, other = line.strip().partition(" ")
        pid = os.fork()
        if pid == 0:
            engine = make_engine(other or url)  # a fresh engine: nothing shared with the parent
            print(f"ready {os.getpid()}", flush=True)
            ingest(engine, settings, CrawlResult(source="acme", records=prepared[target]))
            os._exit(0)


if __name__ == "__main__":
    main()
