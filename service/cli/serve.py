"""``gpuatlas serve | scheduler``: the long-running processes (the API, the scheduler)."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import engine, err, handle_errors, settings


@handle_errors
def serve(
    host: Annotated[str | None, typer.Option(help="bind address")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535)] = None,
) -> None:
    """Serve the API (and, unless disabled, the scheduler)."""
    import uvicorn

    engine()
    config = settings()
    uvicorn.run(
        "service.api.main:create_app",
        factory=True,
        host=host or config.host,
        port=port or config.port,
        log_level="info",
        proxy_headers=False,
    )


@handle_errors
def scheduler() -> None:
    """Run the scheduler alone (no API): crawls each source on its schedule."""
    import logging
    import signal
    import threading

    from service.crawl.scheduler import Leader

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    leader = Leader(engine(), settings())
    leader.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    err.print("scheduler running; Ctrl-C stops it")
    done.wait()
    leader.stop()
