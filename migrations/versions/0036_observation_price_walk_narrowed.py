"""The observations' price walk index holds the price only

``ix_price_observation_gpu_hour_key`` (SQLite) and ``ix_price_observation_gpu_hour``
(PostgreSQL) held the offer, ``version_from`` and ``version_to`` after the price, so that
the pinned walk (``service.query.offers._pinned_walk``) could tell from the index alone
whether a row was in force at its version. The walk now reads each candidate's row by id
for its offer and versions (and orders the rows of one price by offer itself). An entry
no longer moves when its row is closed (``version_to`` was part of the key: on SQLite each
close deleted the entry and inserted it again, at a random place), and the index is 40 %
smaller on SQLite, a third smaller on PostgreSQL: 127.0 -> 116.4 bytes per observation on SQLite
at 5,000,000 observations as a catalog grows, for a few ms more on an ``as_of`` page
(docs/benchmarks.md, "Ninth round"). The index is built again on both databases (one
sort of the table); the downgrade restores it.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-06 02:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0036"
down_revision: str | Sequence[str] | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "price_observation"
SQLITE_KEY = "CAST(round(CAST(gpu_hour_usd AS FLOAT) * 10000000000) AS INTEGER)"
IN_FORCE = ["offer_id", "version_from", "version_to"]


def _index(price_only: bool) -> None:
    if op.get_bind().dialect.name == "sqlite":
        name, price = "ix_price_observation_gpu_hour_key", sa.text(SQLITE_KEY)
    else:
        name, price = "ix_price_observation_gpu_hour", "gpu_hour_usd"
    op.drop_index(name, table_name=TABLE)
    op.create_index(name, TABLE, [price, *([] if price_only else IN_FORCE)], unique=False)


def upgrade() -> None:
    _index(price_only=True)


def downgrade() -> None:
    _index(price_only=False)
