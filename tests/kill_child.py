"""Child process for the SIGKILL test: ingest one record set, announcing when it starts."""

from __future__ import annotations

import sys

from service.config import Settings
from service.db import make_engine
from service.ingest import CrawlResult, ingest
from tests.test_ingest_kill import record_set


def main() -> None:
    url, which = sys.argv[1], sys.argv[2]
    engine = make_engine(url)
    settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
    records = record_set(which)
    print("ready", flush=True)
    ingest(engine, settings, CrawlResult(source="acme", records=records))
    print("done", flush=True)


if __name__ == "__main__":
    main()
