"""Standard observability: prometheus-client metrics summed over worker processes, request
ids on every answer and in every log line, JSON logs.

The multiprocess test runs ``gpuatlas serve --workers 2`` for real (two uvicorn worker
processes behind one socket) and checks that a scrape, whichever worker answers it, counts
every request of both.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.core.config import Settings
from service.core.logs import log_config
from tests.conftest import ROOT
from tests.support.api_client import api_client

HEX_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def client(sqlite_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    yield from api_client(settings)


def healthz_count(text: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gpuatlas_http_requests_total" and sample.labels == {
                "method": "GET",
                "route": "/healthz",
                "status": "200",
            }:
                return sample.value
    return 0.0


def test_every_answer_carries_a_request_id(client: TestClient) -> None:
    mine = client.get("/healthz", headers={"X-Request-ID": "trace-42:a.b_c"})
    assert mine.headers["x-request-id"] == "trace-42:a.b_c"  # the caller's own, repeated
    fresh = {client.get("/healthz").headers["x-request-id"] for _ in range(3)}
    assert len(fresh) == 3 and all(HEX_ID.fullmatch(i) for i in fresh)
    # hostile or oversized ids are not repeated into headers and logs: a new one instead
    for bad in (b"x" * 129, b"a b", b"<script>", "ünïcode".encode(), b""):
        answer = client.get("/healthz", headers={b"X-Request-ID": bad})
        assert HEX_ID.fullmatch(answer.headers["x-request-id"]), bad
    # errors too (a problem+json answer)
    missing = client.get("/v1/offers/999999")
    assert missing.status_code == 404 and HEX_ID.fullmatch(missing.headers["x-request-id"])


def test_metrics_are_prometheus_client_exposition(client: TestClient) -> None:
    for _ in range(3):
        client.get("/healthz")
    client.get("/v1/offers/123")  # a route template, not one series per id
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    families = {f.name: f for f in text_string_to_metric_families(answer.text)}
    assert healthz_count(answer.text) == 3
    assert families["gpuatlas_http_request_duration_seconds"].type == "histogram"
    routes = {s.labels.get("route") for s in families["gpuatlas_http_requests"].samples}
    assert "/v1/offers/{offer_id}" in routes and "/v1/offers/123" not in routes
    assert families["gpuatlas_active_offers"].samples[0].value == 0
    assert families["gpuatlas_catalog_version"].type == "gauge"
    assert families["gpuatlas_crawl_runs"].type == "counter"


def test_log_config_json_lines_carry_the_request_id() -> None:
    config = log_config("json")
    formatter = config["formatters"]["default"]
    assert formatter["()"] == "pythonjsonlogger.json.JsonFormatter"
    assert config["handlers"]["default"]["filters"] == ["request_id"]
    assert config["loggers"]["uvicorn.access"]["propagate"] is False
    assert "request_id" in log_config("text")["formatters"]["default"]["format"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_workers_add_up_and_log_json(sqlite_url: str, tmp_path: Path) -> None:
    port = _free_port()
    folder = tmp_path / "metrics"
    log_path = tmp_path / "serve.log"
    env = {
        **os.environ,
        "GPUATLAS_DATABASE_URL": sqlite_url,
        "GPUATLAS_SCHEDULER_ENABLED": "false",
        "GPUATLAS_LOG_FORMAT": "json",
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "PYTHONPATH": str(ROOT),
    }
    gpuatlas = str(Path(sys.executable).parent / "gpuatlas")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [gpuatlas, "serve", "--port", str(port), "--workers", "2"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        sent = 0
        deadline = time.time() + 90
        with httpx.Client(timeout=5) as probe:
            while True:
                assert proc.poll() is None, log_path.read_text()
                assert time.time() < deadline, "not healthy: " + log_path.read_text()
                try:
                    if probe.get(f"{base}/healthz").status_code == 200:
                        sent += 1
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)

        def hit(_: int) -> str:
            # a connection per request, so the kernel hands them to both workers
            with httpx.Client(timeout=10) as c:
                return c.get(f"{base}/healthz").headers["x-request-id"]

        ids: list[str] = []
        with ThreadPoolExecutor(8) as pool:
            while True:  # until both workers have counted requests
                ids += pool.map(hit, range(40))
                sent += 40
                workers = {p.name for p in folder.glob("counter_*.db")}
                if len(workers) >= 2 or sent > 800:
                    break
        assert len({p.name for p in folder.glob("counter_*.db")}) == 2, "one worker served all"

        # whichever worker answers the scrape, it counts every request of both
        with httpx.Client(timeout=10) as c:
            for _ in range(6):
                assert healthz_count(c.get(f"{base}/metrics").text) == sent
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)

    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    requests = [r for r in lines if r.get("logger") == "gpuatlas.request"]
    logged = {r["request_id"] for r in requests if r["path"] == "/healthz"}
    assert set(ids) <= logged  # the answer's X-Request-ID is the log line's request_id
    sample = next(r for r in requests if r["path"] == "/healthz")
    assert sample["status"] == 200 and sample["route"] == "/healthz"
    assert sample["level"] == "INFO" and sample["time"].endswith("+00:00")
    assert isinstance(sample["duration_ms"], int | float)
    assert not any("color_message" in r for r in lines)
