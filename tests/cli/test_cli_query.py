"""``gpuatlas offers | eligible | history | diff | export`` on real SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, update
from typer.testing import CliRunner

from service.cli.chart import BLOCKS, CHART_MAX_POINTS, chart, render_chart
from service.core.config import get_settings
from tests.support.cli import run
from tests.support.factories import OBS, record

H100 = "nvidia-h100-sxm-80gb"


def ok(runner: CliRunner, *args: str) -> str:
    code, out, err = run(runner, *args)
    assert code == 0, err
    return out


def ingest(runner: CliRunner, tmp_path: Path, source: str, items: list[dict[str, Any]]) -> None:
    path = tmp_path / f"{source}-{len(list(tmp_path.iterdir()))}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(i) for i in items) + b"\n")
    ok(runner, "ingest", source, "--file", str(path))


def lambda_feed(amounts: list[str], skus: list[str] | None = None) -> list[dict[str, Any]]:
    skus = skus or [f"gpu-{i}" for i in range(len(amounts))]
    return [
        record(i, source="lambda-feed", provider="lambda", sku=sku, amount=amount)
        for i, (sku, amount) in enumerate(zip(skus, amounts, strict=True))
    ]


@pytest.fixture
def catalog(cli: CliRunner, tmp_path: Path) -> CliRunner:
    """v1: three 8×H100 lambda offers in DE; v2: four 1×H100 runpod spot offers in the US."""
    ok(cli, "reference", "load")
    ingest(cli, tmp_path, "lambda-feed", lambda_feed(["20", "24", "28"]))
    runpod = [
        record(
            i,
            source="runpod-feed",
            provider="runpod",
            gpu_count="1",
            country="US",
            price_kind="spot",
            bare_metal=True,
            amount=f"{2 + i}.75",
        )
        for i in range(4)
    ]
    ingest(cli, tmp_path, "runpod-feed", runpod)
    return cli


def jsonl(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


# --------------------------------------------------------------------------- offers


def test_offers_filters_sort_and_formats(catalog: CliRunner) -> None:
    rows = json.loads(ok(catalog, "offers", "-f", "json"))
    assert len(rows) == 7
    per_gpu = [Decimal(r["price_per_gpu_hour_usd"]) for r in rows]
    assert per_gpu == sorted(per_gpu)
    assert rows[0]["price"]["amount"] == "20" and rows[0]["gpu"] == H100  # exact decimal text

    def providers(*args: str) -> list[str]:
        return [r["provider"] for r in jsonl(ok(catalog, "offers", *args, "-f", "jsonl"))]

    assert providers("--country", "de") == ["lambda"] * 3
    assert providers("--not-country", "DE,FR") == ["runpod"] * 4
    assert providers("--min-gpus", "2") == ["lambda"] * 3
    assert providers("--max-gpus", "1", "--price-kind", "spot") == ["runpod"] * 4
    assert providers("--provider", "lambda,runpod", "--limit", "2") == ["lambda", "runpod"]
    assert providers("--max-price-per-gpu-hour", "3") == ["lambda", "runpod", "lambda"]
    assert providers("--bare-metal") == ["runpod"] * 4
    assert (
        providers("--gpu", "h100", "--min-gpu-memory-gb", "80", "--source", "lambda-feed")
        == ["lambda"] * 3
    )
    assert providers("--gdpr", "eu_eea") == ["lambda"] * 3
    assert providers("--provider-hq-not-in", "US") == []
    assert providers("--include-peers", "--region", "r1") == ["lambda", "runpod"]

    by_price = [
        r["price"]["amount"] for r in jsonl(ok(catalog, "offers", "--sort=-price", "-f", "jsonl"))
    ]
    assert by_price[:3] == ["28", "24", "20"]
    assert [
        r["price"]["amount"]
        for r in jsonl(ok(catalog, "offers", "--sort", "price", "--desc", "-f", "jsonl"))
    ] == by_price

    # as of version 1 only the lambda offers existed
    assert {r["provider"] for r in jsonl(ok(catalog, "offers", "--as-of", "1", "-f", "jsonl"))} == {
        "lambda"
    }
    table = list(
        csv.DictReader(io.StringIO(ok(catalog, "offers", "--currency", "usd", "-f", "csv")))
    )
    assert len(table) == 7
    first = table[0]
    assert (first["display_price.amount"], first["display_price.currency"]) == ("20", "USD")
    assert first["display_price_per_gpu_hour.amount"] == "2.5"
    assert (first["price.amount"], first["price.currency"]) == ("20", "USD")
    assert json.loads(first["locations"]) == [] and json.loads(first["certifications"]) == []

    code, out, err = run(catalog, "offers", "--limit", "3")
    assert code == 0 and "offers (USD per GPU-hour ascending)" in out and "runpod" in out
    assert "first 3 offers shown" in err
    code, out, err = run(catalog, "offers", "--country", "JP")
    assert code == 0 and "no offers match" in err


def test_eligible_and_explain(catalog: CliRunner) -> None:
    body = json.loads(ok(catalog, "eligible", "--min-gpus", "1", "-f", "json"))
    assert [
        (r["provider"], r["offer_count"], r["cheapest"]["price"]["amount"]) for r in body["data"]
    ] == [
        ("lambda", 3, "20"),
        ("runpod", 4, "2.75"),
    ]
    assert body["excluded"] is None and body["catalog_version"] == 2
    rows = jsonl(ok(catalog, "eligible", "--country", "US", "--explain", "-f", "jsonl"))
    assert [r["provider"] for r in rows if "cheapest" in r] == ["runpod"]
    excluded = {r["provider"]: r["reasons"] for r in rows if "reasons" in r}
    assert excluded["lambda"] == ["country=US"]
    out = ok(catalog, "eligible", "--country", "US", "--explain")
    assert "eligible providers" in out and "excluded providers" in out and "country=US" in out


# --------------------------------------------------------------------------- history


def bottom_blocks(out: str) -> int:
    """Blocks on the chart's bottom row (every point has one there)."""
    rows = [line for line in out.splitlines() if "┤" in line]
    return sum(ch in BLOCKS[1:] for ch in rows[-1].split("┤", 1)[1])


def test_history_series_and_chart(cli: CliRunner, tmp_path: Path, engine: Engine) -> None:
    ok(cli, "reference", "load")
    for amount in ("20", "22", "19.5", "21"):
        ingest(cli, tmp_path, "lambda-feed", lambda_feed([amount]))
    offer = jsonl(ok(cli, "offers", "-f", "jsonl"))[0]["id"]
    series = json.loads(ok(cli, "history", str(offer), "-f", "json"))
    assert [r["amount"] for r in series] == ["20", "22", "19.5", "21"]

    out = ok(cli, "history", str(offer))
    assert "one bar per observation" in out and bottom_blocks(out) == 4
    chart_rows = [line for line in out.splitlines() if "┤" in line]
    assert chart_rows[0].strip().startswith("22 ┤") and chart_rows[-1].startswith("19.5 ┤")
    assert chart_rows[0].split("┤")[1] == " █  "  # only the maximum reaches the top row

    # spread the observations over days: 3 days ago, 2, 1 (and today still in force)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    starts = [today - timedelta(days=d) + timedelta(hours=12) for d in (4, 3, 2, 1)]
    with engine.begin() as conn:
        for obs, start, end in zip(series, starts, [*starts[1:], None], strict=True):
            conn.execute(
                update(OBS)
                .where(OBS.c.version_from == obs["version_from"], OBS.c.offer_id == offer)
                .values(valid_from=start, valid_to=end)
            )
    days = json.loads(ok(cli, "history", str(offer), "--resolution", "day", "-f", "json"))
    assert len(days) == 5  # four days with a change, then today
    assert [d["last"] for d in days] == ["20", "22", "19.5", "21", "21"]
    assert days[1]["min"] == "20" and days[1]["max"] == "22"
    out = ok(cli, "history", str(offer), "--resolution", "day")
    assert "one bar per day" in out and bottom_blocks(out) == 5
    weeks = jsonl(ok(cli, "history", str(offer), "--resolution", "week", "-f", "jsonl"))
    assert 1 <= len(weeks) <= 2 and weeks[-1]["last"] == "21"

    # in force since 2000: more day buckets than one answer holds, said, never cut short
    with engine.begin() as conn:
        conn.execute(
            update(OBS)
            .where(OBS.c.version_from == series[0]["version_from"], OBS.c.offer_id == offer)
            .values(valid_from=datetime(2000, 1, 3, tzinfo=UTC))
        )
    code, _, err = run(cli, "history", str(offer), "--resolution", "day")
    assert code == 1 and "more than 5000 day buckets" in err and "--resolution week" in err
    weeks = jsonl(ok(cli, "history", str(offer), "--resolution", "week", "-f", "jsonl"))
    assert weeks[0]["start"] == "2000-01-03T00:00:00Z" and weeks[-1]["last"] == "21"

    code, _, err = run(cli, "history", "999999")
    assert code == 1 and err.strip() == "error: offer 999999 does not exist"
    code, _, err = run(cli, "history", str(offer), "--resolution", "month")
    assert code == 2


def test_chart_rendering() -> None:
    values = [Decimal(v) for v in ("1", "2", "3", "4", "5")]
    rows = chart(values, height=4)
    assert len(rows) == 4 and all(len(r) == 5 for r in rows)
    assert rows[0][-1] == "█" and rows[0][0] == " "  # the max fills the top, the min does not
    assert rows[-1][0] == "▁" and all(ch != " " for ch in rows[-1])
    flat = chart([Decimal("3.5")] * 3, height=2)
    assert flat == ["   ", "███"]  # a constant series sits at half height
    lines = render_chart(values, "2026-01-01", "2026-01-05", "price in USD", height=4)
    assert lines[1].startswith("5 ┤") and lines[4].startswith("1 ┤")
    assert "2026-01-01" in lines[-1] and "2026-01-05" in lines[-1]
    many = [Decimal(i) for i in range(CHART_MAX_POINTS + 30)]
    lines = render_chart(many, "a", "b", "x")
    assert f"last {CHART_MAX_POINTS} of {CHART_MAX_POINTS + 30} points" in lines[0]
    assert len(lines[-3].split("┤")[1]) == CHART_MAX_POINTS
    assert chart([]) == []


# --------------------------------------------------------------------------- diff


def test_diff_added_changed_withdrawn(cli: CliRunner, tmp_path: Path) -> None:
    ok(cli, "reference", "load")
    ingest(cli, tmp_path, "lambda-feed", lambda_feed(["20", "24", "28"], ["a", "b", "c"]))
    ingest(cli, tmp_path, "lambda-feed", lambda_feed(["20", "30", "9"], ["a", "b", "d"]))
    code, out, err = run(cli, "diff", "1", "2", "-f", "json")
    assert code == 0, err
    changes = {(c["kind"], c["sku"]): c for c in json.loads(out)}
    assert set(changes) == {("changed", "b"), ("withdrawn", "c"), ("added", "d")}
    changed = changes[("changed", "b")]
    assert (changed["old_amount"], changed["new_amount"], changed["change_pct"]) == (
        "24",
        "30",
        "25.0",
    )
    assert changes[("withdrawn", "c")]["new_amount"] is None
    assert changes[("added", "d")]["old_amount"] is None
    assert "1 added, 1 changed, 1 withdrawn" in err
    out = ok(cli, "diff", "1")  # W defaults to the latest
    assert "v1 → v2: 1 added, 1 changed, 1 withdrawn" in out and "+25.0%" in out
    reader = list(csv.DictReader(io.StringIO(ok(cli, "diff", "2", "1", "-f", "csv"))))
    assert {(r["kind"], r["sku"]) for r in reader} == {
        ("changed", "b"),
        ("added", "c"),
        ("withdrawn", "d"),
    }
    assert ok(cli, "diff", "2", "2", "-f", "jsonl") == ""
    header = ok(cli, "diff", "2", "1", "-f", "csv").splitlines()[0]  # the same when empty
    assert ok(cli, "diff", "2", "2", "-f", "csv") == header + "\n"
    runs_header = ok(cli, "runs", "-f", "csv").splitlines()[0]
    assert ok(cli, "runs", "--source", "nothing-ran", "-f", "csv") == runs_header + "\n"
    code, _, err = run(cli, "diff", "1", "99")
    assert code == 1 and err.strip() == "error: catalog version 99 does not exist (latest 2)"


# --------------------------------------------------------------------------- export


def test_export_formats_progress_and_overwrite(catalog: CliRunner, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "h100.csv"
    code, out, err = run(catalog, "export", "-o", str(target), "--min-gpus", "1")
    assert code == 0, err
    assert out == "" and "wrote 7 offers (catalog version 2)" in err  # progress: stderr only
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert len(rows) == 7 and {r["provider"] for r in rows} == {"lambda", "runpod"}
    assert rows[0]["price_per_gpu_hour_usd"] == "2.5"

    lines = out_dir / "lambda.data"
    ok(catalog, "export", "--format", "jsonl", "-o", str(lines), "--provider", "lambda")
    records = jsonl(lines.read_text())
    assert [r["amount"] for r in records] == ["20", "24", "28"]

    parquet = out_dir / "spot.parquet"
    ok(catalog, "export", "-o", str(parquet), "--price-kind", "spot")
    table = pq.read_table(parquet)
    assert table.num_rows == 4 and set(table.column("provider").to_pylist()) == {"runpod"}

    before = target.read_bytes()
    code, out, err = run(catalog, "export", "-o", str(target), "--provider", "runpod")
    assert code == 1 and err.strip() == f"error: {target} exists: use --force to overwrite it"
    assert target.read_bytes() == before
    ok(catalog, "export", "-o", str(target), "--provider", "runpod", "--force")
    assert len(list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))) == 4
    code, _, err = run(catalog, "export", "-o", str(out_dir / "x.xlsx"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in out_dir.iterdir()) == ["h100.csv", "lambda.data", "spot.parquet"]
    assert (target.stat().st_mode & 0o777) == 0o666 & ~_umask()  # as any file it writes


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_exports_to_one_file_write_their_own_partial_files(
    catalog: CliRunner, tmp_path: Path
) -> None:
    """Two exports to one file at once each write a file of their own and the last renamed
    wins whole: the partial file had one fixed name (``.NAME.partial``), so the second
    export wrote into the first's and one renamed it from under the other."""
    target = tmp_path / "all.csv"
    elsewhere = tmp_path / ".all.csv.partial"  # another export's, still being written
    elsewhere.write_bytes(b"id,provider\n1,")
    ok(catalog, "export", "-o", str(target))
    assert elsewhere.read_bytes() == b"id,provider\n1,"
    assert len(list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))) == 7
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")) == [
        ".all.csv.partial"
    ]


def test_export_never_replaces_what_is_not_a_regular_file(
    catalog: CliRunner, tmp_path: Path
) -> None:
    """``--force`` overwrites a file; a folder, a FIFO or a device (``-o /dev/null`` run as
    root) is refused before anything is read, and stays what it was."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    folder = out_dir / "folder.csv"
    folder.mkdir()
    fifo = out_dir / "pipe.csv"
    os.mkfifo(fifo)
    for target in (folder, fifo):
        for force in ([], ["--force"]):
            code, out, err = run(catalog, "export", "-o", str(target), *force)
            assert code == 1, err
            assert out == "" and err.strip().splitlines() == [
                f"error: {target} is not a regular file: export writes a file"
            ]
    assert folder.is_dir() and stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in out_dir.iterdir()) == ["folder.csv", "pipe.csv"]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["offers", "--min-gpus", "many"], "--min-gpus: 'many' is not a number"),
        (["offers", "--min-gpus", "1e-99999"], "--min-gpus: more than 10 decimal places"),
        (["offers", "--gpu", " "], "--gpu: empty"),
        (["offers", "--max-price-per-gpu-hour", "-1"], "--max-price-per-gpu-hour: must be"),
        (["offers", "--min-gpus", "8", "--max-gpus", "1"], "--min-gpus: greater than max_gpus"),
        (["offers", "--country", "Germany"], "--country: use an ISO 3166 alpha-2 code"),
        (["offers", "--not-country", "ZZ"], "--not-country: 'ZZ' is not an ISO 3166-1"),
        (["offers", "--price-kind", "forever"], "--price-kind: unknown 'forever'"),
        (["offers", "--gdpr", "mars"], "--gdpr: one of eu_eea, adequacy, any"),
        (["offers", "--as-of", "yesterday"], "--as-of: a catalog version (integer)"),
        (["offers", "--as-of", "7"], "--as-of: version 7 does not exist yet"),
        (["offers", "--as-of", "9999-12-31T23:59:59-14:00"], "--as-of: out of range"),
        (["export", "-o", "x.csv", "--as-of", "0001-01-01T00:00+14:00"], "--as-of: out of range"),
        (["history", "99999999999999999999999"], "OFFER_ID: an offer id is a number from 1"),
        (["history", "0", "--resolution", "day"], "OFFER_ID: an offer id is a number from 1"),
        (["offers", "--sort", "cheap"], "--sort: one of price_per_gpu_hour"),
        (["offers", "--currency", "QQQ"], "--currency: 'QQQ' is not an ISO 4217 currency"),
        (["offers", "--limit", "0"], "--limit: between 1 and 100000"),
        (["eligible", "--export-destination", "Mars"], "--export-destination: use an ISO"),
        (["offers", "--interconnect", "nvlink9"], "--interconnect: unknown 'nvlink9' (one of"),
        (["eligible", "--network", "ib,efa"], "--network: unknown 'ib' (one of infiniband"),
        (["tco", "--min-network-gbps", "-1"], "--min-network-gbps: must be between 0 and"),
        (["export", "-o", "x.csv", "--min-network-gbps", "fast"], "--min-network-gbps: 'fast'"),
        (["export", "-o", "x.bin"], "--format: csv, jsonl or parquet"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", sqlite_url)
    get_settings.cache_clear()
    try:
        code, out, err = run(CliRunner(), *args)
    finally:
        get_settings.cache_clear()
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("usage error: ") and message in err, err
