"""An observation no longer repeats the source of its FX rate

Every price observation carried ``fx_source``: ``identity`` for a price in USD, else the
source of the rates it was converted with (the ECB crawl's name). Both are known without
it: a USD price needs no rate, and the rates are the ``fx_rate`` rows of the
observation's ``fx_date`` (stored rates never change), which also name the crawl run that
loaded them. Nothing read the column (the API shows ``fx_rate_usd`` and ``fx_date``), and it
took about 8 of the 173 bytes an observation takes on SQLite, 9-12 on PostgreSQL
(docs/benchmarks.md, "History at scale").

Both databases: ``ALTER TABLE ... DROP COLUMN``. SQLite rewrites each row (the table's
indexes and statistics stay); PostgreSQL marks the column dropped at once and new rows are
written without it (existing rows give their space back when rewritten, e.g. by ``VACUUM
FULL``). The downgrade adds the column back and fills it as the ingest did: ``identity``
for a price in USD, else the source of the rates of its ``fx_date`` (the USD rate's
first, as the conversion took it), null where the price had no rate.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-05 17:10:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0030"
down_revision: str | Sequence[str] | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "price_observation"
REFILL = (
    f"UPDATE {TABLE} SET fx_source = CASE WHEN currency = 'USD' THEN 'identity' ELSE ("
    "SELECT r.source FROM fx_rate AS r "
    f"WHERE r.rate_date = {TABLE}.fx_date AND r.currency IN ('USD', {TABLE}.currency) "
    "ORDER BY CASE WHEN r.currency = 'USD' THEN 0 ELSE 1 END LIMIT 1) END "
    "WHERE fx_rate IS NOT NULL"
)


def upgrade() -> None:
    op.get_bind().exec_driver_sql(f"ALTER TABLE {TABLE} DROP COLUMN fx_source")


def downgrade() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql(f"ALTER TABLE {TABLE} ADD COLUMN fx_source VARCHAR(64)")
    bind.exec_driver_sql(REFILL)
