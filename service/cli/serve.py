"""``gpuatlas serve | scheduler``: the long-running processes (the API, the scheduler)."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import engine, err, handle_errors, settings


@handle_errors
def serve(
    host: Annotated[str | None, typer.Option(help="bind address")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535)] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, max=64, help="worker processes (default GPUATLAS_WORKERS, 1)"),
    ] = None,
) -> None:
    """Serve the API (and, unless disabled, the scheduler)."""
    import logging
    import os
    import tempfile

    import uvicorn

    from service.core.logs import configure, log_config

    engine()
    config = settings()
    configure(config.log_format, config.log_level)
    processes = workers or config.workers
    if processes > 1:
        # prometheus-client's multiprocess mode: set before any worker imports it
        from service.api.metrics import MULTIPROC_ENV, prepare_multiprocess

        folder = os.environ.get(MULTIPROC_ENV) or os.path.join(
            tempfile.gettempdir(), f"gpuatlas-metrics-{port or config.port}"
        )
        prepare_multiprocess(folder)
        os.environ[MULTIPROC_ENV] = folder
        logging.getLogger("gpuatlas.serve").info(
            "%d workers; metrics of every worker in %s", processes, folder
        )
    uvicorn.run(
        "service.api.main:serving_app",
        factory=True,
        host=host or config.host,
        port=port or config.port,
        workers=processes,
        log_config=log_config(config.log_format, config.log_level),
        access_log=False,
        proxy_headers=False,
    )


@handle_errors
def scheduler() -> None:
    """Run the scheduler alone (no API): crawls each source on its schedule."""
    import signal
    import threading

    from service.core.logs import configure
    from service.crawl.scheduler import Leader

    config = settings()
    configure(config.log_format, config.log_level)
    leader = Leader(engine(), config)
    leader.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    err.print("scheduler running; Ctrl-C stops it")
    done.wait()
    leader.stop()
