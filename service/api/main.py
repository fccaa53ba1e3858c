"""The FastAPI application: assembles routers, error handling and the database engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service.alerts.listeners import install as install_alert_outbox
from service.api import metrics, problems
from service.api.conditional import ContentETagMiddleware
from service.api.head import HeadAsGetMiddleware
from service.api.observe import ObserveMiddleware
from service.api.response_cache import ResponseCache, ResponseCacheMiddleware
from service.api.routes import (
    catalog,
    compare,
    export,
    health,
    offers,
    overview,
    reference,
    sources_run,
)
from service.api.routes import compliance as compliance_routes
from service.api.routes import coverage as coverage_routes
from service.api.routes import feeds as feed_routes
from service.api.routes import quality as quality_routes
from service.api.routes import subscriptions as subscription_routes
from service.core.config import Settings, get_settings
from service.core.db import make_engine
from service.core.gcpause import settle_for_serving
from service.web import routes as web_routes

API_DESCRIPTION = """GPU cloud prices and compliance facts, versioned.

Read endpoints are public. Money is exact decimal (JSON strings), times are UTC,
every price carries its provenance (source, crawl run, raw payload hash, FX rate).
Errors are RFC 9457 problem details."""


def serving_app() -> FastAPI:
    """The application as ``gpuatlas serve`` runs it (uvicorn's factory, in each worker):
    the garbage collector settled for a long-running server once it starts
    (:func:`service.core.gcpause.settle_for_serving`)."""
    return create_app(serving=True)


def create_app(settings: Settings | None = None, *, serving: bool = False) -> FastAPI:
    settings = settings or get_settings()
    install_alert_outbox()  # an ingest in this process writes its alert events

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if serving:  # not in a test's process: its frozen objects would never be collected
            settle_for_serving()
        leader = None
        if settings.scheduler_enabled:
            from service.crawl.scheduler import Leader

            leader = Leader(app.state.engine, settings)
            leader.start()
        app.state.leader = leader
        try:
            yield
        finally:
            if leader is not None:
                leader.stop()
            app.state.response_cache.close()
            app.state.engine.dispose()
            metrics.process_exit()

    app = FastAPI(title="gpuatlas", version="0.1.0", description=API_DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    app.state.engine = make_engine(settings.database_url)
    app.state.metrics = metrics.Metrics()
    app.state.response_cache = ResponseCache(
        app.state.engine,
        settings.response_cache_mb * 1024 * 1024,
        on_outcome=app.state.metrics.cache_outcome,
    )
    app.add_middleware(ResponseCacheMiddleware, cache=app.state.response_cache)
    app.add_middleware(ContentETagMiddleware)  # outside the cache, inside metrics
    app.add_middleware(HeadAsGetMiddleware)  # a HEAD is the GET inside, logged as a HEAD
    problems.install(app)
    problems.document(app)
    # outermost: a request's id, metrics and log line cover everything inside
    app.add_middleware(ObserveMiddleware, metrics=app.state.metrics)
    app.include_router(health.router)
    app.include_router(offers.router)
    app.include_router(compare.router)
    app.include_router(overview.router)
    app.include_router(catalog.router)
    app.include_router(sources_run.router)
    app.include_router(subscription_routes.router)
    app.include_router(feed_routes.router)
    app.include_router(reference.router)
    app.include_router(export.router)
    app.include_router(compliance_routes.router)
    app.include_router(web_routes.router)
    web_routes.mount_static(app)
    app.include_router(quality_routes.router)
    app.include_router(coverage_routes.router)
    return app
