"""The server's garbage collector: ``gpuatlas serve`` (uvicorn's factory
``service.api.main:serving_app``) freezes what exists once the application starts and
collects the youngest generation less often; an application built for a test does neither
(docs/api.md, "Serving")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PROBE = """
import gc, json
from fastapi.testclient import TestClient
from service.api.main import {factory}
before = gc.get_threshold()
with TestClient({factory}()) as client:
    assert client.get("/healthz").status_code == 200
    print(json.dumps({{"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold(),
                       "before": before}}))
"""


def _probe(factory: str, tmp_path: Path) -> dict[str, list[int] | int]:
    env = {
        **os.environ,
        "GPUATLAS_DATABASE_URL": f"sqlite:///{tmp_path / 'gc.db'}",
        "GPUATLAS_SCHEDULER_ENABLED": "false",
        "GPUATLAS_ENVIRONMENT": "test",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(factory=factory)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_served_application_settles_the_collector(tmp_path: Path) -> None:
    served = _probe("serving_app", tmp_path)
    assert served["frozen"] > 10_000  # the imported modules and the application
    assert served["threshold"][0] == 50_000 and served["before"][0] < 50_000  # type: ignore[index]


def test_an_application_built_for_a_test_leaves_the_collector_alone(tmp_path: Path) -> None:
    built = _probe("create_app", tmp_path)
    assert built["frozen"] == 0 and built["threshold"] == built["before"]
