"""The gpuatlas command: public names, formats, exit codes and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from tests.conftest import ROOT
from tests.support.cli import run
from tests.support.factories import record, records

GPUATLAS = [sys.executable, "-m", "service.cli.app"]


def write_jsonl(path: Path, items: list) -> Path:  # type: ignore[type-arg]
    path.write_bytes(b"\n".join(orjson.dumps(i) for i in items) + b"\n")
    return path


def test_ingest_versions_offers_history_roundtrip(cli: CliRunner, tmp_path: Path) -> None:
    code, _, _ = run(cli, "reference", "load")
    assert code == 0
    file = write_jsonl(
        tmp_path / "feed.jsonl",
        records(5, source="mytool", provider="lambda", gpu_name_raw="H100 SXM"),
    )
    code, out, err = run(cli, "ingest", "mytool", "--file", str(file), "-f", "json")
    assert code == 0, err
    assert json.loads(out)[0]["added"] == 5
    code, out, _ = run(cli, "versions", "-f", "json")
    assert [v["id"] for v in json.loads(out)] == [1]
    code, out, _ = run(cli, "offers", "--gpu", "h100", "--limit", "3", "-f", "json")
    rows = json.loads(out)
    assert len(rows) == 3
    assert rows[0]["gpu"] == "nvidia-h100-sxm-80gb"
    assert rows[0]["price"]["amount"] == "20"  # exact decimal text, never a float
    prices = [float(r["price_per_gpu_hour_usd"]) for r in rows]
    assert prices == sorted(prices)
    code, out, _ = run(cli, "history", str(rows[0]["id"]), "-f", "json")
    assert code == 0 and len(json.loads(out)) == 1
    code, out, _ = run(cli, "offers", "--provider", "lambda", "-f", "csv")
    assert out.splitlines()[0].startswith("id,provider,source,sku")
    code, out, _ = run(cli, "offers", "--country", "de", "-f", "jsonl")
    assert code == 0 and len(out.splitlines()) == 5
    assert all(json.loads(line)["country"] == "DE" for line in out.splitlines())
    code, out, _ = run(cli, "offers", "--country", "FR", "-f", "jsonl")
    assert code == 0 and out == ""
    code, out, _ = run(cli, "offers")
    assert code == 0 and "offers (USD per GPU-hour ascending)" in out


def test_ingest_file_with_bad_lines_rejects_them_and_keeps_the_rest(
    cli: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "mixed.jsonl"
    good = [orjson.dumps(record(i, source="mytool")) for i in range(3)]
    path.write_bytes(
        b"\n".join(
            [
                good[0],
                b"{not json",
                good[1],
                b"[1,2]",
                good[2],
                orjson.dumps(record(9, source="mytool", amount="-1")),
            ]
        )
    )
    code, out, err = run(cli, "ingest", "mytool", "--file", str(path), "-f", "json")
    assert code == 0, err
    summary = json.loads(out)[0]
    assert summary["added"] == 3 and summary["rejected"] == 3
    rejected = [line for line in err.splitlines() if line.startswith("rejected")]
    assert rejected[0].startswith("rejected line 2: invalid JSON")
    assert rejected[1].startswith("rejected line 4: record: Input should be a valid dictionary")
    assert rejected[2] == "rejected line 6: amount: price must be positive"


def test_a_byte_order_mark_before_the_first_line_is_no_part_of_it(
    cli: CliRunner, tmp_path: Path
) -> None:
    """A file saved by a Windows editor starts with a UTF-8 BOM: its first record was
    rejected as invalid JSON. Read again unchanged, the file is confirmed, lines skipped."""
    path = tmp_path / "excel.jsonl"
    lines = [orjson.dumps(record(i, source="mytool")) for i in range(3)]
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")
    code, out, err = run(cli, "ingest", "mytool", "--file", str(path), "-f", "json")
    assert code == 0 and json.loads(out)[0]["added"] == 3, err
    changed = [orjson.dumps(record(i, source="mytool", amount="9.5")) for i in range(1)]
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join([*changed, *lines[1:]]) + b"\n")
    code, out, err = run(cli, "ingest", "mytool", "--file", str(path), "-f", "json")
    summary = json.loads(out)[0]
    assert code == 0 and summary["changed"] == 1 and summary["rejected"] == 0, err


def test_ingest_prints_the_first_rejections_by_line_and_counts_the_rest(
    cli: CliRunner, tmp_path: Path
) -> None:
    """Unreadable lines were printed before invalid records whatever their lines (line 7
    before line 2), so the 20 shown could skip the file's first problems; and nothing
    said more were left out."""
    path = tmp_path / "mixed.jsonl"
    lines = [orjson.dumps(record(0, source="mytool")), b"[1,2]", b"{not json"]
    lines += [orjson.dumps(record(1, source="mytool", amount="-1"))]
    lines += [b"{not json"] * 10 + [b"null"] * 14  # 27 rejected in all
    path.write_bytes(b"\n".join(lines) + b"\n")
    code, out, err = run(cli, "ingest", "mytool", "--file", str(path), "-f", "json")
    assert code == 0, err
    assert json.loads(out)[0]["rejected"] == 27
    shown = [line for line in err.splitlines() if line.startswith("rejected line")]
    assert [int(line.split()[2].rstrip(":")) for line in shown] == list(range(2, 22))
    assert shown[:3] == [
        "rejected line 2: record: Input should be a valid dictionary or instance of OfferRecord",
        "rejected line 3: invalid JSON (unexpected character, expected a string key: line 1 column 2 (char 1))",
        "rejected line 4: amount: price must be positive",
    ]
    run_id = int(err.splitlines()[-1].rsplit(" ", 1)[1])
    assert err.splitlines()[-1] == f"7 more rejected lines not shown: gpuatlas rejections {run_id}"

    # every stored rejection, by line, with its reason (once) and its record's excerpt
    code, out, err = run(cli, "rejections", str(run_id), "-f", "json")
    assert code == 0, err
    listed = json.loads(out)
    assert [r["line"] for r in listed] == list(range(2, 29))
    assert listed[1]["reason"].startswith("invalid JSON (unexpected character")
    assert listed[2]["reason"] == "amount: price must be positive"
    assert listed[2]["record"]["amount"] == "-1" and listed[2]["record"]["source"] == "mytool"
    assert err.strip() == f"run {run_id} (mytool, ok): 27 rejected"
    code, out, err = run(cli, "rejections", str(run_id), "--limit", "2", "-f", "jsonl")
    assert code == 0 and len(out.splitlines()) == 2 and "2 shown (--limit)" in err
    code, _, err = run(cli, "rejections", "999999")
    assert code == 1 and err.strip() == "error: crawl run 999999 does not exist"
    code, _, err = run(cli, "rejections", "0")
    assert code == 2 and "RUN_ID" in err


def test_usage_errors_exit_2(cli: CliRunner) -> None:
    assert run(cli, "offers", "--price-kind", "forever")[0] == 2
    assert run(cli, "offers", "--country", "Germany")[0] == 2
    code, _, err = run(cli, "offers", "--country", "ZZ")  # two letters, no country's
    assert code == 2 and "--country: 'ZZ' is not an ISO 3166-1 alpha-2 country" in err
    assert run(cli, "crawl")[0] == 2
    assert run(cli, "nonsense")[0] == 2


def test_errors_are_one_line(cli: CliRunner, tmp_path: Path) -> None:
    code, _, err = run(cli, "history", "999999")
    assert code == 1 and err.strip() == "error: offer 999999 does not exist"
    code, _, err = run(cli, "ingest", "mytool", "--file", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "no such file" in err and len(err.strip().splitlines()) == 1
    fifo = tmp_path / "records.jsonl"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):  # read twice (hashed, then its lines): a file it must be
        for args in (["ingest", "mytool", "--file"], ["crawl", "lambda", "--from-file"]):
            code, _, err = run(cli, *args, str(path))
            assert code == 1 and err.strip().splitlines() == [
                f"error: {path} is not a regular file (a folder, FIFO or device)"
            ]
    code, _, err = run(cli, "ingest", "Bad Name!", "--file", str(tmp_path / "x"))
    assert code == 1 and "invalid source name" in err
    code, _, err = run(cli, "crawl", "no-such-source")
    assert code == 1 and "unknown source" in err


def _gpuatlas(url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GPUATLAS, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={"GPUATLAS_DATABASE_URL": url, "PATH": "/usr/bin:/bin", **env},
        check=False,
    )


def test_an_invalid_setting_is_named_and_its_value_never_shown(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    result = _gpuatlas(
        url,
        "offers",
        GPUATLAS_CRAWL_TIMEOUT_SECONDS="-1",
        GPUATLAS_ENVIRONMENT="s3cret-staging",
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: invalid settings: GPUATLAS_ENVIRONMENT: Input should be 'development', "
        "'test' or 'production'; GPUATLAS_CRAWL_TIMEOUT_SECONDS: Input should be greater "
        "than 0"
    ]
    placeholder = _gpuatlas(url, "offers", GPUATLAS_ENVIRONMENT="production")
    assert placeholder.returncode == 1
    assert placeholder.stderr.strip() == (
        "error: invalid settings: GPUATLAS_SECRET_KEY is a development placeholder; set a "
        "real secret in production"
    )
    garbled = _gpuatlas(url, "sources", GPUATLAS_SCHEDULES='{"vastai": "10m"')
    assert garbled.returncode == 1
    assert garbled.stderr.strip() == (
        "error: invalid settings: GPUATLAS_SCHEDULES: not valid JSON (lists and mappings "
        "are written as JSON)"
    )


def test_sources_warns_of_a_misspelt_schedule(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.core.config import get_settings

    monkeypatch.setenv("GPUATLAS_SCHEDULES", '{"vast-ai": "10m"}')
    get_settings.cache_clear()
    try:
        code, out, err = run(cli, "sources")
    finally:
        get_settings.cache_clear()
    assert code == 0 and "vastai" in out  # listed all the same
    assert "warning: GPUATLAS_SCHEDULES names unknown sources: 'vast-ai'" in err


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://x@y/z", "unsupported database 'mysql'"),
        ("not a url at all", "invalid database URL"),
        ("sqlite:////nonexistent-dir/sub/gpuatlas.db", "cannot open database"),
        ("postgresql://nobody@127.0.0.1:1/none", "cannot open database"),
    ],
)
def test_unusable_database_url_is_one_clear_line(url: str, expected: str) -> None:
    result = _gpuatlas(url, "versions")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://nobody:s3cr3t@127.0.0.1:1/none", "postgresql://nobody:***@127.0.0.1:1"),
        ("postgresql://nobody:s3cr3t@127.0.0.1:port/none", "'postgresql://nobody:***@127.0"),
        ("postgresql://nobody@127.0.0.1:1/none?password=s3cr3t", "none?password=***:"),
        ("mysql://nobody:s3cr3t@127.0.0.1/none", "unsupported database 'mysql'"),
    ],
)
@pytest.mark.parametrize("command", [["versions"], ["db", "upgrade"]])
def test_a_database_password_is_never_shown(url: str, shown: str, command: list[str]) -> None:
    """The URL is named in the error (which database could not be opened), its password
    masked: stderr ends up in logs and CI output."""
    result = _gpuatlas(url, *command)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "s3cr3t" not in result.stderr and shown in result.stderr, result.stderr


def test_corrupt_database_file_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"this is not a database" * 500)
    result = _gpuatlas(f"sqlite:///{path}", "versions")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "not a database" in result.stderr
    debug = _gpuatlas(f"sqlite:///{path}", "--debug", "versions")
    assert "Traceback" in debug.stderr


@pytest.mark.parametrize("name", ["providers.yaml", "certifications.yaml", "costs.yaml"])
@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_reference_load_refuses_a_file_that_is_not_regular(
    sqlite_url: str, tmp_path: Path, name: str, kind: str
) -> None:
    """A FIFO in the reference folder blocked ``reference load`` for ever, and a link to
    /dev/zero read until memory ran out: each is refused at once, named."""
    folder = tmp_path / "reference"
    shutil.copytree(ROOT / "fixtures" / "reference", folder)
    target = folder / name
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    else:
        target.symlink_to("/dev/zero")
    result = _gpuatlas(sqlite_url, "reference", "load", "--dir", str(folder))
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [f"error: {name}: not a regular file"]


def test_unmigrated_database_says_what_to_run(tmp_path: Path) -> None:
    """A SQLite file that is not there is named, and not created (an empty file was left
    behind by every command that only reads); one that is there but empty is not migrated."""
    missing = tmp_path / "new.db"
    lines = tmp_path / "mine.jsonl"
    lines.write_text("{}\n")
    for command in (["offers"], ["versions"], ["ingest", "mine", "--file", str(lines)]):
        result = _gpuatlas(f"sqlite:///{missing}", *command)
        assert result.returncode == 1, result.stderr
        assert result.stderr.strip() == (
            f"error: no database at {missing}: `gpuatlas db upgrade` creates it"
        ), command
        assert not missing.exists()
    missing.touch()
    result = _gpuatlas(f"sqlite:///{missing}", "offers")
    assert result.returncode == 1 and "not migrated: run `gpuatlas db upgrade`" in result.stderr


def test_unmapped_names_are_listed(cli: CliRunner, tmp_path: Path) -> None:
    file = write_jsonl(
        tmp_path / "feed.jsonl", [record(0, source="mytool", gpu_name_raw="Quantum Flux 9000")]
    )
    assert run(cli, "ingest", "mytool", "--file", str(file))[0] == 0
    code, out, _ = run(cli, "unmapped", "--kind", "gpu", "-f", "json")
    assert code == 0
    assert [(r["kind"], r["value"], r["occurrences"]) for r in json.loads(out)] == [
        ("gpu", "Quantum Flux 9000", 1)
    ]
    assert run(cli, "unmapped", "--kind", "colour")[0] == 2


def test_csv_output_keeps_a_sources_formulas_inert(cli: CliRunner, tmp_path: Path) -> None:
    """``-f csv`` and ``gpuatlas export`` write a scraped name a spreadsheet would run as
    a text cell (an apostrophe before it); ``-f json`` as the source wrote it."""
    import csv
    import io

    assert run(cli, "reference", "load")[0] == 0
    evil = '=HYPERLINK("http://evil.example","click")'
    feed = write_jsonl(
        tmp_path / "feed.jsonl",
        [record(0, source="mytool", sku=evil, region="@A1"), record(1, source="mytool")],
    )
    assert run(cli, "ingest", "mytool", "--file", str(feed), "-f", "json")[0] == 0
    code, out, _ = run(cli, "offers", "--provider", "acme", "-f", "csv")
    assert code == 0
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(out))}
    assert sorted(r["sku"] for r in rows.values()) == ["'" + evil, "gpu-1"]
    assert "'@A1" in {r["region"] for r in rows.values()}
    code, out, _ = run(cli, "offers", "--provider", "acme", "-f", "json")
    assert evil in {offer["sku"] for offer in json.loads(out)}
    target = tmp_path / "all.csv"
    assert run(cli, "export", "-o", str(target), "--provider", "acme")[0] == 0
    exported = list(csv.DictReader(io.StringIO(target.read_text())))
    assert sorted(r["sku"] for r in exported) == ["'" + evil, "gpu-1"]


def test_the_crawl_command_spools_into_a_scratch_folder_of_its_own(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``gpuatlas crawl`` writes to temporary files goes to its own marked folder
    (service.crawl.scratch.own_scratch), gone when the command ends."""
    import tempfile

    from service.crawl import run as crawl_run

    seen: list[str] = []
    real = crawl_run.crawl_source

    def spying(*args: object, **kwargs: object) -> object:
        seen.append(tempfile.gettempdir())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(crawl_run, "crawl_source", spying)
    assert run(cli, "reference", "load")[0] == 0
    products = ROOT / "fixtures" / "oracle" / "products-USD.json"
    code, _, err = run(cli, "crawl", "oracle", "--from-file", str(products), "-f", "json")
    assert code == 0, err
    assert len(seen) == 1 and Path(seen[0]).name.startswith("gpuatlas-runcli-")
    assert not Path(seen[0]).exists() and tempfile.gettempdir() != seen[0]


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_a_failed_crawl_of_saved_files_says_what_is_wrong(
    cli: CliRunner, tmp_path: Path, dry_run: list[str]
) -> None:
    """A saved file the source cannot read failed the crawl as 'failed: invalid payload'
    and nothing more (which file, what in it); with --dry-run the same failure came back
    as an error of the command (exit 1) instead of a failed crawl (exit 3)."""
    assert run(cli, "reference", "load")[0] == 0
    saved = tmp_path / "instance-types.json"
    saved.write_bytes(b"\xe8 not UTF-8")
    good = ROOT / "fixtures" / "lambda" / "instance-types.json"
    files = ["--from-file", str(good), "--from-file", str(saved)]  # the bad one is named
    code, out, err = run(cli, "crawl", "lambda", *files, *dry_run, "-f", "json")
    assert code == 3, err
    assert "Traceback" not in err and "error:" not in err
    assert (
        f"lambda failed: invalid payload: {saved}: UnicodeDecodeError: 'utf-8' codec can't decode"
        in err.replace("\n", "")
    )
    rows = json.loads(out)
    if dry_run:
        assert rows == []
    else:
        assert rows[0]["status"] == "failed: invalid payload"
