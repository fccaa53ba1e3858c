"""A farm and a fresh SQLite catalog beside it, for the farm's fast tests (real crawls)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine

from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.db import make_engine
from service.core.migrate import upgrade
from tests.chaos.farm import Farm


@contextmanager
def farm_catalog(
    names: list[str],
    workdir: Path,
    *,
    seed: int = 1,
    timeout: float = 2.0,
    template: Path | None = None,
) -> Iterator[tuple[Farm, Engine, Settings]]:
    """The farm serving ``names`` (started), a migrated catalog with the reference data in
    ``workdir`` (a copy of ``template``, a SQLite file holding both, when given), and
    settings pointing those sources at the farm (one retry)."""
    url = f"sqlite:///{workdir / 'farm.db'}"
    farm = Farm(names, seed, http_timeout=timeout, attempts=2)
    farm.start()
    try:
        if template is not None:
            shutil.copy(template, workdir / "farm.db")
            engine = make_engine(url)
        else:
            upgrade(url)
            engine = make_engine(url)
            load_reference(engine, REFERENCE_DIR)
        settings = Settings(
            database_url=url,
            source_base_urls=farm.base_urls(),
            http_max_retries=1,
            http_timeout_seconds=timeout,
            _env_file=None,  # type: ignore[call-arg]
        )
        try:
            yield farm, engine, settings
        finally:
            engine.dispose()
    finally:
        farm.close()
