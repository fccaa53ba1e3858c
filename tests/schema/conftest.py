"""A real SQLite file holding one table of the project's own column types."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, Table, create_engine

from schema.types import CompactDate, Digest, UTCMicros

TYPED = Table(
    "t",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("d", Digest),
    Column("at", UTCMicros),
    Column("day", CompactDate),
)


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[Engine]:
    engine = create_engine(f"sqlite:///{tmp_path / 'typed.db'}")
    TYPED.metadata.create_all(engine)
    yield engine
    engine.dispose()
