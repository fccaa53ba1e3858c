"""A client that goes away in the middle of an export gets its database connection back
to the pool at once (on PostgreSQL the COPY is cancelled: it waited in ``ClientWrite`` for
a reader that was gone, holding its snapshot, a pool connection and, cluster-wide,
``DROP DATABASE``)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from fastapi import FastAPI
from sqlalchemy import Engine

from service.api.main import create_app
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from tests.support.factories import records

OFFERS = 2500
"""More than one piece of every format (64 KiB of text; a Parquet row group of 2,000)."""


async def _leave_after_first_piece(app: FastAPI, query: str) -> int:
    """Request ``/v1/export?query`` as uvicorn does, and disconnect once the first piece
    of the body has arrived; the pieces received."""
    pieces: list[bytes] = []
    gone = anyio.Event()
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            pieces.append(message["body"])
            gone.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},  # uvicorn's
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/v1/export",
        "raw_path": b"/v1/export",
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
        "state": {},
    }
    await app(scope, receive, send)
    return len(pieces)


@pytest.mark.parametrize("format", ["csv", "jsonl", "parquet"])
def test_a_client_gone_mid_export_frees_its_connection(
    engine: Engine, settings: Settings, format: str
) -> None:
    ingest(engine, settings, CrawlResult(source="acme", records=records(OFFERS)))
    app = create_app(settings.model_copy(update={"scheduler_enabled": False}))
    try:
        pool = app.state.engine.pool
        assert anyio.run(_leave_after_first_piece, app, f"format={format}") == 1
        assert pool.checkedout() == 0  # before: the export's connection stayed out
        anyio.run(_leave_after_first_piece, app, f"format={format}&provider=none")
        assert pool.checkedout() == 0  # an export that was complete (empty) anyway
    finally:
        app.state.engine.dispose()
