"""``service.core.in_list.among``: the same rows as ``IN`` on both databases, one
parameter and one statement text on PostgreSQL whatever the count."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, String, Table, insert, select

from service.core.in_list import among

META = MetaData()
ROWS = Table("in_list_rows", META, Column("id", Integer, primary_key=True), Column("name", String))


@pytest.fixture
def rows(engine: Engine) -> Engine:
    META.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(ROWS), [{"id": i, "name": f"n{i}'\""} for i in range(1, 3001)])
    return engine


@pytest.mark.parametrize("count", [0, 1, 2, 100, 999, 2500])
def test_among_finds_what_in_finds(rows: Engine, count: int) -> None:
    rng = random.Random(count)
    wanted = rng.sample(range(-50, 3100), count)  # some absent, some negative
    with rows.connect() as conn:
        dialect = conn.dialect.name
        found = set(
            conn.execute(select(ROWS.c.id).where(among(ROWS.c.id, wanted, dialect))).scalars()
        )
        names = [f"n{i}'\"" for i in wanted] + ["", "n1%", "\\"]
        by_name = set(
            conn.execute(select(ROWS.c.id).where(among(ROWS.c.name, names, dialect))).scalars()
        )
    expected = {i for i in wanted if 1 <= i <= 3000}
    assert found == expected
    assert by_name == expected


def test_postgresql_gets_one_parameter_and_one_text(rows: Engine) -> None:
    with rows.connect() as conn:
        dialect = conn.dialect.name
        texts = {
            str(
                select(ROWS.c.id)
                .where(among(ROWS.c.id, list(range(n)), dialect))
                .compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
            )
            for n in (1, 5, 300)
        }
    if dialect == "postgresql":
        assert len(texts) == 1 and "ANY" in texts.pop()
    else:  # SQLite: one text a count (an IN list)
        assert len(texts) == 3
