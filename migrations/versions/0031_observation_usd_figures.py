"""A price in USD stores its USD figures once

An observation of a price quoted in USD stored its amount twice (``amount`` and
``amount_usd``), its hourly amount twice (``hourly_amount`` and ``hourly_usd``) and a
rate of 1 (``fx_rate``): the conversion is the identity. Those three are now null for a
price in USD, and the readers take its own figures and 1 (``service.query.sql.usd_figure``;
``schema.prices.USD``). Elsewhere a null USD figure still means no rate was known. About
8 of the 165 bytes an observation takes on SQLite (docs/benchmarks.md), more on
PostgreSQL (a NUMERIC of 7-10 bytes each).

The upgrade refuses, naming the row, an observation in USD whose stored USD figures are not
its own figures and 1 (only a hand-edited row could hold one): dropping them would lose
what it says. Both databases rewrite the USD rows (SQLite: in place; the file keeps its
size until ``VACUUM``). The downgrade writes the three figures back.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-05 17:50:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0031"
down_revision: str | Sequence[str] | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "price_observation"
USD = "currency = 'USD'"


def _differs(stored: str, own: str) -> str:
    return f"({stored} IS NOT NULL AND {stored} <> {own})"


def upgrade() -> None:
    bind = op.get_bind()
    one = "'1'" if bind.dialect.name == "sqlite" else "1"
    found = bind.exec_driver_sql(
        f"SELECT id FROM {TABLE} WHERE {USD} AND ("
        f"{_differs('amount_usd', 'amount')} OR {_differs('hourly_usd', 'hourly_amount')} "
        f"OR {_differs('fx_rate', one)}) ORDER BY id LIMIT 1"
    ).scalar()
    if found is not None:
        raise ValueError(
            f"price observation {found} is in USD but stores other USD figures or a rate "
            "other than 1: they would be lost; not migrated"
        )
    bind.exec_driver_sql(
        f"UPDATE {TABLE} SET amount_usd = NULL, hourly_usd = NULL, fx_rate = NULL WHERE {USD}"
    )


def downgrade() -> None:
    bind = op.get_bind()
    one = "'1'" if bind.dialect.name == "sqlite" else "1"
    bind.exec_driver_sql(
        f"UPDATE {TABLE} SET amount_usd = amount, hourly_usd = hourly_amount, "
        f"fx_rate = {one} WHERE {USD}"
    )
