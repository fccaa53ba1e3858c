"""A command on a database whose schema is not this code's says what to run, instead of
failing on the first statement the older (or newer) schema refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from service.core.config import get_settings
from service.core.db import make_engine
from service.core.migrate import upgrade
from service.core.revision import head_revision, unmigrated_reason
from tests.support.cli import run


@pytest.fixture
def runner_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'r.db'}"
    monkeypatch.setenv("GPUATLAS_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url, CliRunner()
    get_settings.cache_clear()


def test_the_head_is_the_newest_migration() -> None:
    versions = Path(__file__).parents[2] / "migrations" / "versions"
    newest = max(p.name.split("_", 1)[0] for p in versions.glob("0*.py"))
    assert head_revision() == newest


def test_an_older_schema_names_both_revisions_and_the_command(runner_on) -> None:  # type: ignore[no-untyped-def]
    url, runner = runner_on
    upgrade(url, "0033")
    code, out, err = run(runner, "versions")
    assert code != 0
    assert f"schema revision 0033 and this gpuatlas needs {head_revision()}" in out + err
    assert "gpuatlas db upgrade" in out + err
    code, _, _ = run(runner, "db", "upgrade")
    assert code == 0
    code, out, err = run(runner, "versions")
    assert code == 0, out + err


def test_a_never_migrated_and_a_newer_schema_are_told_apart(runner_on) -> None:  # type: ignore[no-untyped-def]
    url, runner = runner_on
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE other (id INTEGER)"))
        assert unmigrated_reason(engine) == (
            "the database is not migrated: run `gpuatlas db upgrade`"
        )
        upgrade(url)
        assert unmigrated_reason(engine) is None
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        reason = unmigrated_reason(engine)
        assert reason is not None and "revision 9999, newer than this gpuatlas" in reason
    finally:
        engine.dispose()
    code, out, err = run(runner, "offers")
    assert code != 0 and "newer than this gpuatlas" in out + err
