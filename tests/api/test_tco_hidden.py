"""/v1/tco and `gpuatlas tco` with egress and storage, checked against a hand computation
from the shipped reference rates (fixtures/reference/costs.yaml)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from typer.testing import CliRunner

from service.api.main import create_app
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings, get_settings
from tests.support.cli import run
from tests.support.factories import record
from tests.support.problems import assert_problem

D = Decimal
WORKLOAD = {
    "gpu": "h100",
    "gpu_count": "8",
    "hours_per_month": "730",
    "months": "12",
    "egress_tb_per_month": "5",
    "storage_tb": "2",
}


def _offer(i: int, provider: str, region: str, kind: str, amount: str) -> dict[str, Any]:
    return record(
        i,
        provider=provider,
        source=provider,
        sku=f"{provider}-{kind}",
        region=region,
        country="US",
        price_kind=kind,
        gpu_count="8",
        amount=amount,
    )


def seed(engine: Engine, settings: Settings) -> None:
    offers = {
        "aws": [
            _offer(0, "aws", "us-east-1", "on_demand", "98.32"),
            _offer(1, "aws", "ap-southeast-2", "reserved_1y", "60.00"),
        ],
        "runpod": [_offer(2, "runpod", "US-TX-3", "on_demand", "15.92")],
        "nebius": [_offer(3, "nebius", "eu-north1", "on_demand", "23.60")],
    }
    for source, records in offers.items():
        ingest(engine, settings, CrawlResult(source=source, records=records))


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    seed(engine, settings)
    app = create_app(settings.model_copy(update={"scheduler_enabled": False}))
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def bare_client(sqlite_url: str) -> Iterator[TestClient]:
    """An empty catalog: parameters are checked before any query runs."""
    settings = Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings.model_copy(update={"scheduler_enabled": False}))) as c:
        yield c


def _options(body: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["provider"], o["price_kind"]): o for p in body["data"] for o in p["options"]}


def test_hidden_costs_by_hand(client: TestClient) -> None:
    response = client.get("/v1/tco", params=WORKLOAD)
    assert "E+" not in response.text  # totals are written out, never as 5.256E+5
    body = response.json()
    assert body["egress_tb_per_month"] == "5" and body["storage_class"] == "block"
    options = _options(body)

    # AWS on demand in us-east-1, 12.29 USD per GPU-hour: 5 TB out a month is
    # (5,120 - 100 free) x 0.09 = 451.80; 2 TB of gp3 is 2,048 x 0.08 = 163.84
    od = options[("aws", "on_demand")]
    assert D(od["instance_usd"]) == D("12.29") * 8 * 730 * 12 == D("861283.2")
    assert D(od["egress_usd"]) == D("451.80") * 12
    assert D(od["storage_usd"]) == D("163.84") * 12
    assert D(od["inter_region_usd"]) == 0
    assert D(od["total_usd"]) == D("861283.2") + D("5421.6") + D("1966.08")
    assert od["unknown_costs"] == []

    # the reserved offer in Sydney pays Sydney's egress: (5,120 - 100) x 0.114 = 572.28
    r1 = options[("aws", "reserved_1y")]
    assert D(r1["instance_usd"]) == D("7.5") * 8 * 730 * 12
    assert D(r1["egress_usd"]) == D("572.28") * 12
    assert D(r1["total_usd"]) == D("525600") + D("6867.36") + D("1966.08")
    # on demand 71,773.60 + 615.64 a month against 525,600 up front + 736.12 a month
    assert r1["break_even_month"] == 8

    # RunPod: free egress; 2 TB of network volume crosses its tier at 1 TB:
    # 1,024 x 0.07 + 1,024 x 0.05 = 122.88 a month
    rp = options[("runpod", "on_demand")]
    assert D(rp["egress_usd"]) == 0
    assert D(rp["storage_usd"]) == D("122.88") * 12

    # no published egress or storage price for Nebius: left out and said so
    nb = options[("nebius", "on_demand")]
    assert nb["egress_usd"] is None and nb["storage_usd"] is None
    assert D(nb["total_usd"]) == D(nb["instance_usd"])
    assert [u.split(":")[0] for u in nb["unknown_costs"]] == ["internet_egress", "block_storage"]

    # every rate used is shown with its source
    aws = next(p for p in body["data"] if p["provider"] == "aws")
    used = {(r["kind"], r["region"]) for r in aws["hidden_cost_rates"]}
    assert used == {
        ("internet_egress", None),
        ("internet_egress", "ap-southeast-2"),
        ("block_storage", None),
    }
    assert all(
        r["source_url"].startswith("https://aws.amazon.com/") for r in aws["hidden_cost_rates"]
    )


def test_every_egress_tier_is_billed_in_order(client: TestClient) -> None:
    """200 TB a month out of us-east-1 reaches AWS's last tier (the tiers are read back in
    numeric order, which SQLite's text-stored decimals do not sort in)."""
    params = {**WORKLOAD, "egress_tb_per_month": "200", "storage_tb": "0"}
    option = _options(client.get("/v1/tco", params=params).json())[("aws", "on_demand")]
    monthly = (
        (D(10240) - 100) * D("0.09")
        + (D(51200) - 10240) * D("0.085")
        + (D(153600) - 51200) * D("0.07")
        + (D(204800) - 153600) * D("0.05")
    )
    assert monthly == D("912.60") + D("3481.60") + D("7168") + D("2560")
    assert D(option["egress_usd"]) == monthly * 12


def test_object_storage_and_no_hidden_costs(client: TestClient) -> None:
    options = _options(client.get("/v1/tco", params={**WORKLOAD, "storage_class": "object"}).json())
    # S3 Standard, 2,048 GB at 0.023
    assert D(options[("aws", "on_demand")]["storage_usd"]) == D("47.104") * 12
    assert options[("runpod", "on_demand")]["storage_usd"] is None  # no object store known
    bare = _options(client.get("/v1/tco", params={"gpu": "h100"}).json())
    for option in bare.values():
        assert D(option["total_usd"]) == D(option["instance_usd"])
        assert option["unknown_costs"] == []  # nothing asked, nothing unknown


def test_the_cli_gives_the_same_answer(client: TestClient, cli: CliRunner) -> None:
    api = _options(client.get("/v1/tco", params=WORKLOAD).json())
    args = ["tco", "--gpu", "h100", "--egress-tb-per-month", "5", "--storage-tb", "2"]
    code, out, _ = run(cli, *args, "--format", "json")
    assert code == 0
    rows = json.loads(out)
    mine = {(r.pop("provider"), r["price_kind"]): r for r in rows}
    for key, option in api.items():
        assert mine[key] == option, key
    assert mine.keys() == api.keys()
    code, out, err = run(cli, *args)
    assert code == 0 and "451" not in out  # a table of totals, in USD
    assert "nebius" in out and "unknown" in out
    assert "aws internet_egress in ap-southeast-2" in err and "checked 2026-12-04" in err


@pytest.mark.parametrize(
    ("params", "status", "name"),
    [
        ({"egress_tb_per_month": "-1"}, 422, "egress_tb_per_month"),
        ({"egress_tb_per_month": "lots"}, 422, "egress_tb_per_month"),
        ({"egress_tb_per_month": "1e9"}, 422, "egress_tb_per_month"),
        ({"storage_tb": "NaN"}, 422, "storage_tb"),
        ({"inter_region_tb_per_month": "-0.5"}, 422, "inter_region_tb_per_month"),
        ({"storage_class": "tape"}, 422, "storage_class"),
        ({"storage_tb": "9" * 5000}, 422, "storage_tb"),
        ({"egress_tb": "1"}, 400, "egress_tb"),
    ],
)
def test_bad_workloads_are_problems(
    bare_client: TestClient, params: dict[str, str], status: int, name: str
) -> None:
    assert_problem(bare_client.get("/v1/tco", params=params), status, name)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--egress-tb-per-month", "-1"], "--egress-tb-per-month: at least 0"),
        (["--storage-tb", "many"], "--storage-tb: not a number"),
        (["--storage-tb", "inf"], "--storage-tb: at least 0"),
        (["--gpu-count", "0"], "--gpu-count: more than 0"),
        (["--storage-class", "tape"], "--storage-class: block or object"),
        (["--months", "0"], "--months: between 1 and 120"),
    ],
)
def test_bad_cli_workloads_are_usage_errors(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", sqlite_url)
    get_settings.cache_clear()
    try:
        code, _, err = run(CliRunner(), "tco", *args)
    finally:
        get_settings.cache_clear()
    assert code == 2 and message in err
