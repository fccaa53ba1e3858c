"""An ingest reports its progress: records read after each batch written, then "finishing";
``gpuatlas ingest`` shows it as a bar on stderr (table format only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine
from typer.testing import CliRunner

from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.core.config import Settings
from tests.support.cli import run
from tests.support.factories import record, records


def test_progress_follows_the_batches_then_finishes(engine: Engine, settings: Settings) -> None:
    calls: list[tuple[int, bool]] = []
    crawl = records(230) + [{**record(999), "amount": "-1"}]  # an invalid one is read too
    result = ingest(
        engine,
        settings,
        CrawlResult(source="acme", records=crawl),
        batch_size=50,
        on_progress=lambda read, finishing: calls.append((read, finishing)),
    )
    assert result.seen == 230 and result.rejected == 1
    batches = [read for read, finishing in calls if not finishing]
    assert batches == sorted(batches) and len(batches) == 5  # ceil(231 / 50)
    assert calls[-1] == (231, True) and sum(finishing for _, finishing in calls) == 1


def test_a_quarantined_crawl_still_reports_its_end(engine: Engine, settings: Settings) -> None:
    ingest(engine, settings, CrawlResult(source="acme", records=records(40)))
    calls: list[tuple[int, bool]] = []
    few = ingest(  # a tenth of the offers: quarantined, nothing written
        engine,
        settings,
        CrawlResult(source="acme", records=records(4)),
        on_progress=lambda read, finishing: calls.append((read, finishing)),
    )
    assert few.status.value == "quarantined"
    assert calls[-1] == (4, True)  # the batches were read and judged: the end follows


def _write(path: Path, n: int, source: str = "mytool") -> Path:
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in records(n, source=source)) + b"\n")
    return path


def test_the_cli_shows_a_bar_over_the_lines(cli: CliRunner, tmp_path: Path) -> None:
    feed = _write(tmp_path / "feed.jsonl", 120)
    code, out, err = run(cli, "ingest", "mytool", "--file", str(feed))
    assert code == 0, err
    assert "finishing" in err and "120/120" in err  # the last state of the bar
    assert "mytool" in out
    # the same file again is confirmed unread: no bar
    code, _, err = run(cli, "ingest", "mytool", "--file", str(feed))
    assert code == 0 and "finishing" not in err and "lines" not in err
    # for programs, stderr stays quiet
    other = _write(tmp_path / "other.jsonl", 30, "othertool")
    code, out, err = run(cli, "ingest", "othertool", "--file", str(other), "-f", "json")
    assert code == 0 and json.loads(out)[0]["seen"] == 30
    assert "finishing" not in err and "lines" not in err


def test_a_crawl_reports_its_ingest(engine: Engine, settings: Settings) -> None:
    from service.crawl.run import crawl_source
    from tests.conftest import FIXTURES

    calls: list[tuple[int, bool]] = []

    def crawl() -> Any:
        return crawl_source(
            engine,
            settings,
            "lambda",
            from_files=[FIXTURES / "lambda" / "instance-types.json"],
            on_ingest=lambda read, finishing: calls.append((read, finishing)),
        )

    report = crawl()
    assert report.status.value == "ok"
    assert calls and calls[-1][1] is True
    assert calls[-1][0] == report.counts["seen"] + report.counts["rejected"] > 0
    # confirmed unchanged the second time: nothing is ingested, nothing reported
    calls.clear()
    again = crawl()
    assert again.status.value == "ok" and calls == []
