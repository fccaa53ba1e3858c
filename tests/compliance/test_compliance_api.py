"""Compliance over HTTP and the command line: export-control answers, sources, one error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, update
from typer.testing import CliRunner

from schema.catalog import Provider
from service.api import problems
from service.api.routes import compliance
from service.cli.app import app as cli_app
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from tests.support.problems import assert_problem


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    """Only the compliance router, with the service's problem handlers (fast, isolated)."""
    api = FastAPI()
    api.state.engine = engine
    api.state.settings = settings.model_copy(update={"reference_stale_days": 30})
    problems.install(api)
    api.include_router(compliance.router)
    with TestClient(api) as test_client:
        yield test_client


def test_export_control_answers_and_time_travel(client: TestClient) -> None:
    url = "/v1/gpus/nvidia-h100-sxm-80gb/export-control"
    body = client.get(url, params={"destination": "CN", "as_of": "2024-06-01"}).json()
    assert body["classification"]["eccn"] == "3A090.a"
    assert body["classification"]["paragraph"] == "3A090.a.1"
    assert (body["tpp"], body["performance_density"]) == ("15832", "19.45")
    assert body["rule_set"]["slug"] == "us-ac-2023-11"
    assert body["licence_required"] is True and body["licence"] == "required"
    assert body["citations"] and all(c.startswith("http") for c in body["citations"])
    assert "not legal advice" in body["notice"]
    # an alias in the path, and the same GPU on two dates under two rule sets
    h20 = "/v1/gpus/" + quote("H20 96GB") + "/export-control"
    old = client.get(h20, params={"destination": "cn", "as_of": "2024-06-01"}).json()
    new = client.get(h20, params={"destination": "CN", "as_of": "2025-06-01"}).json()
    assert (old["gpu"], old["licence_required"]) == ("nvidia-h20-96gb", False)
    assert (new["rule_set"]["slug"], new["licence_required"]) == ("us-ac-2025-05", True)
    today = client.get(url, params={"destination": "DE"}).json()
    assert today["as_of"] == datetime.now(UTC).date().isoformat()
    assert today["licence_required"] is False


def test_export_control_errors_are_problem_documents(client: TestClient) -> None:
    url = "/v1/gpus/nvidia-h100-sxm-80gb/export-control"
    body = assert_problem(client.get("/v1/gpus/b9000/export-control?destination=CN"), 404)
    assert "b9000" in body["detail"]
    assert_problem(client.get(url, params={"destination": "XX"}), 422, "destination")
    assert_problem(client.get(url, params={"destination": "CHN"}), 422, "destination")
    assert_problem(client.get(url), 422, "destination")
    body = assert_problem(
        client.get(url, params={"destination": "CN", "as_of": "2023-11-16"}), 422, "as_of"
    )
    assert "no export-control rule set is in force on 2023-11-16" in body["detail"]
    assert_problem(client.get(url, params={"destination": "CN", "as_of": "2024-13-01"}), 422)
    assert_problem(client.get(url, params={"destination": "CN", "dest": "x"}), 400)


def test_sources_list_every_dataset_and_flag_stale(client: TestClient, engine: Engine) -> None:
    body = client.get("/v1/compliance/sources").json()
    names = {d["name"] for d in body["datasets"]}
    assert {"certifications", "country_lists", "export_rules", "gpu_classifications"} <= names
    assert {"providers", "regions", "gpus"} <= names
    assert body["stale_after_days"] == 30 and "not legal advice" in body["notice"]
    for dataset in body["datasets"]:
        assert dataset["rows"] > 0, dataset["name"]
        for entry in dataset["entries"]:
            assert entry["source_urls"], (dataset["name"], entry["key"])
            assert all(u.startswith("http") for u in entry["source_urls"])
    with engine.begin() as conn:
        conn.execute(
            update(Provider).where(Provider.slug == "aws").values(checked=date(2020, 1, 1))
        )  # type: ignore[arg-type]
    body = client.get("/v1/compliance/sources").json()
    providers = next(d for d in body["datasets"] if d["name"] == "providers")
    stale = {e["key"] for e in providers["entries"] if e["stale"]}
    assert "aws" in stale and providers["stale_rows"] >= 1
    assert providers["oldest_check"] == "2020-01-01"
    assert_problem(client.get("/v1/compliance/sources?x=1"), 400)


def test_the_service_app_mounts_the_compliance_routes(tmp_path: Path) -> None:
    from service.api.main import create_app

    settings = Settings(  # type: ignore[call-arg]
        database_url=f"sqlite:///{tmp_path / 'x.db'}",
        environment="test",
        scheduler_enabled=False,
        _env_file=None,
    )
    paths = set(create_app(settings).openapi()["paths"])
    assert {"/v1/gpus/{slug}/export-control", "/v1/compliance/sources"} <= paths


def test_cli_export_control(cli: CliRunner, engine: Engine) -> None:
    load_reference(engine, REFERENCE_DIR)

    def run(*args: str) -> tuple[int, str, str]:
        result = cli.invoke(cli_app, ["export-control", *args])
        return result.exit_code, result.stdout, result.stderr

    code, out, _ = run(
        "H100 SXM5 80GB", "--destination", "CN", "--as-of", "2024-06-01", "-f", "json"
    )
    assert code == 0
    body = json.loads(out)
    assert (body["gpu"], body["licence_required"], body["tpp"]) == (
        "nvidia-h100-sxm-80gb",
        True,
        "15832",
    )
    code, out, _ = run("T4", "-d", "CN", "--as-of", "2026-02-01")
    assert code == 0 and "not_required" in out and "not legal advice" in out
    for args, expected, message in [
        (("H100", "-d", "XX"), 2, "usage error: --destination: 'XX' is not an ISO 3166-1"),
        (("H100", "-d", "CHN"), 2, "usage error: --destination:"),
        (("H100", "-d", "CN", "--as-of", "June"), 2, "usage error: --as-of: 'June' is not a date"),
        (("B9000", "-d", "CN"), 1, "error: unknown GPU 'B9000'"),
        (("H100", "-d", "CN", "--as-of", "2020-01-01"), 1, "no export-control rule set"),
    ]:
        code, _, err = run(*args)
        assert code == expected, (args, err)
        assert message in err and len(err.strip().splitlines()) == 1, err
    code, _, _ = run("H100")  # --destination is required
    assert code == 2
