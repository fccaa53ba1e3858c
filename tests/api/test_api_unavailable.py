"""A database that does not answer gives 503 problem details with Retry-After, not a 500,
and the service recovers by itself once the database is back."""

from __future__ import annotations

import socket
from pathlib import Path

from fastapi.testclient import TestClient

from service.api.main import create_app
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.db import make_engine
from service.core.migrate import upgrade
from tests.support.problems import assert_problem


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


def app_for(url: str) -> TestClient:
    settings = Settings(
        database_url=url, environment="test", scheduler_enabled=False, _env_file=None
    )  # type: ignore[call-arg]
    return TestClient(create_app(settings))


def test_unreachable_postgres_is_503_with_retry_after() -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/nothing?connect_timeout=2"
    with app_for(url) as client:
        for path in ("/v1/offers", "/v1/versions", "/v1/providers", "/v1/export?format=csv"):
            response = client.get(path)
            body = assert_problem(response, 503)
            assert body["type"].endswith("/database-unavailable"), body
            assert int(response.headers["retry-after"]) > 0
        assert client.get("/healthz").status_code == 200  # the process itself is alive
        assert client.get("/readyz").status_code == 503


def test_sqlite_file_that_appears_later_recovers(tmp_path: Path) -> None:
    db = tmp_path / "later" / "gpuatlas.db"  # its folder does not exist yet
    url = f"sqlite:///{db}"
    with app_for(url) as client:
        assert_problem(client.get("/v1/offers"), 503)
        db.parent.mkdir()
        upgrade(url)
        load_reference(make_engine(url), REFERENCE_DIR)
        response = client.get("/v1/offers")
        assert response.status_code == 200, response.text
        assert response.json()["data"] == []
