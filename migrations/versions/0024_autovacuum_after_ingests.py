"""PostgreSQL vacuums the offers and observations soon after each ingest

A listing reads its sort's index from where its page starts (``ix_offer_status_*``, and
``ix_price_observation_gpu_hour`` for a pinned one) and, for the bound of its walk, only
the index: an index-only scan, which reads the table's row too for every page the
visibility map does not mark all-visible. An ingest updates the offers it reprices (and
closes their observations), so their pages lose that mark until the table is vacuumed,
and by default autovacuum waits for 20 % of a table's rows to change. A 5 %-repriced crawl
every hour left the offers' pages unmarked for hours: the walk's bound (4,000 index
entries) read 4,000 table rows, 12 ms instead of 0.4, and the listing mix's p50 was 21.7 ms
against 13.5 ms after a VACUUM (docs/benchmarks.md, "The listing mix", seventh round).

Here autovacuum takes ``offer``, ``offer_location`` and ``price_observation`` once 2 % of
their rows changed or were inserted (analyze at 5 %): within a minute of an ingest that
reprices a few percent (``autovacuum_naptime``). SQLite has no visibility map: nothing.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05 00:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("offer", "offer_location", "price_observation")
SETTINGS = {
    "autovacuum_vacuum_scale_factor": "0.02",
    "autovacuum_vacuum_insert_scale_factor": "0.02",
    "autovacuum_analyze_scale_factor": "0.05",
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    settings = ", ".join(f"{name} = {value}" for name, value in SETTINGS.items())
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} SET ({settings})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} RESET ({', '.join(SETTINGS)})")
