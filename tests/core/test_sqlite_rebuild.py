"""``service.core.sqlite_rebuild``: a table rewritten with new column types, its indexes
(expression and partial ones too), triggers and statistics kept."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from service.core.db import make_engine
from service.core.sqlite_rebuild import rebuild_table

SCHEMA = (
    "CREATE TABLE item (\n\tid INTEGER NOT NULL, \n\tname VARCHAR(10) NOT NULL, "
    "\n\tprice VARCHAR(40), \n\tnote VARCHAR(64), \n\tCONSTRAINT pk_item PRIMARY KEY (id)\n)",
    "CREATE INDEX ix_item_price ON item (CAST(price AS FLOAT), id)",
    "CREATE INDEX ix_item_note ON item (note) WHERE note IS NOT NULL",
    "CREATE TABLE log (item_id INTEGER)",
    "CREATE TRIGGER tr_item AFTER INSERT ON item BEGIN INSERT INTO log VALUES (new.id); END",
)
DDL = "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'item' ORDER BY type, name"


@pytest.fixture
def items(tmp_path) -> Engine:  # type: ignore[no-untyped-def]
    engine = make_engine(f"sqlite:///{tmp_path / 'r.db'}")
    with engine.begin() as conn:
        for statement in SCHEMA:
            conn.exec_driver_sql(statement)
        for i in range(1, 201):
            conn.execute(
                text("INSERT INTO item VALUES (:i, :n, :p, :o)"),
                {"i": i, "n": f"n{i}", "p": f"{i}.5", "o": None if i % 3 else f"{i:04x}"},
            )
        conn.exec_driver_sql("ANALYZE")
    yield engine
    engine.dispose()


def test_a_column_retyped_and_recomputed(items: Engine) -> None:
    with items.begin() as conn:
        before = conn.execute(text(DDL)).all()
        stats = conn.execute(text("SELECT * FROM sqlite_stat1 WHERE tbl = 'item'")).all()
        rows = conn.execute(text("SELECT id, name, price, note FROM item ORDER BY id")).all()
        rebuild_table(conn, "item", {"note": ("BLOB", "CAST(note AS BLOB)")})
    with items.connect() as conn:
        after = conn.execute(text(DDL)).all()
        kept = conn.execute(text("SELECT * FROM sqlite_stat1 WHERE tbl = 'item'")).all()
        typed = conn.execute(text("SELECT DISTINCT typeof(note) FROM item")).scalars().all()
        again = conn.execute(
            text("SELECT id, name, price, CAST(note AS TEXT) FROM item ORDER BY id")
        ).all()
        plan = conn.execute(text("EXPLAIN QUERY PLAN SELECT id FROM item WHERE note = 'x'"))
        assert "ix_item_note" in " ".join(str(r[-1]) for r in plan)
    assert [r for r in after if r[0] != "table"] == [r for r in before if r[0] != "table"]
    table_ddl = next(r[2] for r in after if r[0] == "table")
    assert "note BLOB" in table_ddl and 'CREATE TABLE "item"' in table_ddl
    assert sorted(kept) == sorted(stats)
    assert set(typed) == {"blob", "null"}
    assert again == rows
    with items.begin() as conn:  # the trigger still fires on the rebuilt table
        conn.execute(text("INSERT INTO item VALUES (500, 'x', '1', NULL)"))
        assert conn.execute(text("SELECT count(*) FROM log WHERE item_id = 500")).scalar() == 1


def test_a_failing_value_leaves_the_table_as_it_was(items: Engine) -> None:
    with items.connect() as conn:
        before = conn.execute(text(DDL)).all()
        rows = conn.execute(text("SELECT * FROM item ORDER BY id")).all()
    with pytest.raises(Exception, match="NOT NULL"), items.begin() as conn:
        rebuild_table(conn, "item", {"name": ("VARCHAR(10)", "CASE WHEN id = 150 THEN NULL END")})
    with items.connect() as conn:
        assert conn.execute(text(DDL)).all() == before
        assert conn.execute(text("SELECT * FROM item ORDER BY id")).all() == rows


def test_a_column_made_nullable_and_back(items: Engine) -> None:
    """``nullable`` drops a column's NOT NULL (its rows may then hold null); a type ending
    in NOT NULL puts it back, refusing a null left."""
    with items.begin() as conn:
        rebuild_table(
            conn,
            "item",
            {"name": ("VARCHAR(10)", "CASE WHEN id % 2 = 0 THEN NULL ELSE name END")},
            nullable=("name",),
        )
    with items.connect() as conn:
        ddl = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'item'")).scalar()
        nulls = conn.execute(text("SELECT count(*) FROM item WHERE name IS NULL")).scalar()
    assert "name VARCHAR(10)," in str(ddl) and "price VARCHAR(40)" in str(ddl)
    assert "id INTEGER NOT NULL" in str(ddl) and nulls == 100
    with pytest.raises(Exception, match="NOT NULL"), items.begin() as conn:
        rebuild_table(conn, "item", {"name": ("VARCHAR(10) NOT NULL", "name")}, ("name",))
    with items.begin() as conn:
        rebuild_table(
            conn,
            "item",
            {"name": ("VARCHAR(10) NOT NULL", "COALESCE(name, 'n' || id)")},
            nullable=("name",),
        )
    with items.connect() as conn:
        ddl = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'item'")).scalar()
        names = conn.execute(text("SELECT name FROM item ORDER BY id")).scalars().all()
    assert "name VARCHAR(10) NOT NULL," in str(ddl) and "NOT NULL NOT NULL" not in str(ddl)
    assert names == [f"n{i}" for i in range(1, 201)]
    refused = pytest.raises(ValueError, match="nullable names columns not changed: note")
    with refused, items.begin() as conn:
        rebuild_table(conn, "item", {"name": ("VARCHAR(10)", "name")}, nullable=("note",))


def test_unknown_tables_and_columns_are_refused(items: Engine) -> None:
    with items.begin() as conn:
        with pytest.raises(LookupError, match="no table nothing"):
            rebuild_table(conn, "nothing", {"x": ("BLOB", "x")})
        with pytest.raises(LookupError, match="no column missing"):
            rebuild_table(conn, "item", {"missing": ("BLOB", "missing")})


def test_a_table_others_refer_to_is_refused(items: Engine) -> None:
    with items.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE child (item_id INTEGER REFERENCES item (id))")
        conn.exec_driver_sql("INSERT INTO child VALUES (1)")
    with pytest.raises(ValueError, match="child refer to item"), items.begin() as conn:
        rebuild_table(conn, "item", {"note": ("BLOB", "note")})
    with items.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM item")).scalar() == 200


@pytest.mark.postgres
def test_postgresql_is_refused(pg_url: str) -> None:
    pg_engine = make_engine(pg_url)
    with pg_engine.connect() as conn, pytest.raises(ValueError, match="for SQLite"):
        rebuild_table(conn, "price_observation", {"payload_id": ("BLOB", "payload_id")})
    pg_engine.dispose()
