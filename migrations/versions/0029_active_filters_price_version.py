"""ix_offer_active_filters also holds last_changed_version (SQLite)

A pinned (``as_of``) page that no bounded read can give sorts every match, as two reads in
one statement (``service.query.pinned_union``): the active offers whose price has not
changed since the version, at their stored keys, and the observations closed since. The
first read tests ``last_changed_version``, which the covering index of a current
listing's filters-first read (0028) did not hold, so it read the table's rows (~240 bytes
each): 65 of 73 ms for a page of the listing benchmark at 210,000 offers. With the column
the read scans the index alone: 44 ms. The column changes only with the offer's price,
whose sort keys the index already holds, so an ingest rewrites no more entries.

Same partial predicate as 0028 (``+status = 'active' AND +id > 0``), SQLite only; the index
is rebuilt (0.8 s at 210,000 offers).

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-05 13:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | Sequence[str] | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ix_offer_active_filters"
BEFORE = [
    "price_kind",
    "gpu_slug",
    "gpu_count",
    "gpu_memory_gb",
    "country",
    "region",
    "provider",
    "source",
    "bare_metal",
    "interconnect",
    "network",
    "network_gbps",
    "gpu_hour_usd_e10",
    "hourly_usd_e10",
    "pflop_hour_usd_e10",
    "status",
]
AFTER = [*BEFORE, "last_changed_version"]
ACTIVE_SCAN = sa.text("+status = 'active' AND +id > 0")


def _rebuild(columns: list[str]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.drop_index(NAME, table_name="offer")
    op.create_index(NAME, "offer", columns, unique=False, sqlite_where=ACTIVE_SCAN)


def upgrade() -> None:
    _rebuild(AFTER)


def downgrade() -> None:
    _rebuild(BEFORE)
