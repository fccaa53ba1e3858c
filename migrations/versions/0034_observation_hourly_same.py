"""A price per instance-hour stores its hourly figures once

An observation's ``hourly_amount`` (and, converted, its ``hourly_usd``) is its price for
one hour of the whole instance: for a price quoted per instance-hour, the most common,
that is its ``amount`` (and ``amount_usd``) again. Those are now null, and the readers take
``amount`` and ``amount_usd`` (``schema.prices.HOURLY_SAME``,
``service.query.sql.OBS_HOURLY_AMOUNT`` and ``OBS_HOURLY_USD``). A row's figure is nulled
only when its stored text is its amount's (the ingest writes canonical decimals); any
other row keeps its own.

A null stored before this migration could only have been written by hand (the ingest has
always computed the hourly figures): it would then read as the amount, so the upgrade
refuses, naming the row, an observation without ``hourly_amount``, or converted (a USD
amount known) without ``hourly_usd``. Both databases update the rows in place (SQLite:
the file keeps its size until ``VACUUM``). The downgrade writes the figures back.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-05 20:10:00
"""

from collections.abc import Sequence

from alembic import op
from sqlalchemy import Connection

revision: str = "0034"
down_revision: str | Sequence[str] | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "price_observation"
CONVERTED = "currency <> 'USD' AND amount_usd IS NOT NULL"


def _text(column: str) -> str:
    return f"CAST({column} AS TEXT)"


def _refuse_unknown(bind: Connection) -> None:
    found = bind.exec_driver_sql(
        f"SELECT id FROM {TABLE} WHERE hourly_amount IS NULL "
        f"OR ({CONVERTED} AND hourly_usd IS NULL) ORDER BY id LIMIT 1"
    ).scalar()
    if found is not None:
        raise ValueError(
            f"price observation {found} stores no hourly figure: it would read as its "
            "amount; not migrated"
        )


def upgrade() -> None:
    bind = op.get_bind()
    _refuse_unknown(bind)
    bind.exec_driver_sql(
        f"UPDATE {TABLE} SET hourly_amount = NULL, hourly_usd = CASE WHEN hourly_usd IS NOT "
        f"NULL AND {_text('hourly_usd')} = {_text('amount_usd')} THEN NULL ELSE hourly_usd END "
        f"WHERE {_text('hourly_amount')} = {_text('amount')}"
    )


def downgrade() -> None:
    op.get_bind().exec_driver_sql(
        f"UPDATE {TABLE} SET hourly_amount = amount, hourly_usd = CASE WHEN {CONVERTED} "
        "AND hourly_usd IS NULL THEN amount_usd ELSE hourly_usd END WHERE hourly_amount IS NULL"
    )
