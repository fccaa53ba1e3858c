"""A price in USD stores its USD figures once

An observation of a price quoted in USD stored its amount twice (``amount`` and
``amount_usd``), its hourly amount twice (``hourly_amount`` and ``hourly_usd``) and a
rate of 1 (``fx_rate``): the conversion is the identity. Those three are now null for a
price in USD, and the readers take its own figures and 1 (``service.query.sql.usd_figure``;
``schema.prices.USD``). Elsewhere a null USD figure still means no rate was known. About
8 of the 165 bytes an observation takes on SQLite (docs/benchmarks.md), more on
PostgreSQL (a NUMERIC of 7-10 bytes each).

The upgrade refuses, naming the row, an observation in USD whose stored USD figures are not
its own figures and 1, compared as decimals (only a hand-edited row could hold one):
dropping them would lose what it says. Both databases rewrite the USD rows (SQLite: in place; the file keeps its
size until ``VACUUM``). The downgrade writes the three figures back.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-05 17:50:00
"""

from collections.abc import Sequence
from decimal import Decimal

from alembic import op
from sqlalchemy import Connection

revision: str = "0031"
down_revision: str | Sequence[str] | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "price_observation"
USD = "currency = 'USD'"


def _differs(stored: str, own: str) -> str:
    return f"({stored} IS NOT NULL AND {stored} <> {own})"


def _refuse_other_figures(bind: Connection) -> None:
    """Stop, naming the first, when a USD row stores USD figures other than its own and 1.
    The database's ``<>`` finds the candidates (text on SQLite, where ``2.50`` and ``2.5``
    differ); each is compared exactly as decimals."""
    one = "'1'" if bind.dialect.name == "sqlite" else "1"
    candidates = bind.exec_driver_sql(
        f"SELECT id, amount, amount_usd, hourly_amount, hourly_usd, fx_rate FROM {TABLE} "
        f"WHERE {USD} AND ({_differs('amount_usd', 'amount')} OR "
        f"{_differs('hourly_usd', 'hourly_amount')} OR {_differs('fx_rate', one)}) ORDER BY id"
    )
    for row_id, amount, amount_usd, hourly, hourly_usd, rate in candidates:
        pairs = ((amount_usd, amount), (hourly_usd, hourly), (rate, 1))
        if any(s is not None and Decimal(str(s)) != Decimal(str(o)) for s, o in pairs):
            raise ValueError(
                f"price observation {row_id} is in USD but stores other USD figures or a "
                "rate other than 1: they would be lost; not migrated"
            )


def upgrade() -> None:
    bind = op.get_bind()
    _refuse_other_figures(bind)
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
