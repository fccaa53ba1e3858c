"""The query API under test: the app of the given settings, its scheduler off."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi.testclient import TestClient

from service.api.main import create_app
from service.core.config import Settings


def api_client(settings: Settings) -> Iterator[TestClient]:
    """``yield from api_client(settings)`` in a fixture: a client, closed afterwards."""
    app = create_app(settings.model_copy(update={"scheduler_enabled": False}))
    with TestClient(app) as client:
        yield client
