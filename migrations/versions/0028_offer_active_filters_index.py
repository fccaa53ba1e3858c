"""ix_offer_active_filters: a current listing's filters-first read scans a narrow index

A current listing walks its sort's index (status, key, id) and stops at the page. When the
filters keep too few of the walk's first entries, it reads every active offer's id and key
with the filters first, and sorts the matches (``service.query.offers._filtered_first``).
On SQLite that read went through the table (rows of ~240 bytes) or sought
``ix_offer_country`` one country of a ``gdpr`` list at a time with a table row per match:
40-65 ms at 210,000 offers, the slowest 5 % of the listing benchmark's current mix. This
index holds every column a listing filter or sort key reads (~95 bytes an entry), so the
read scans it alone: 20-40 ms.

Partial, on SQLite only, with the predicate ``+status = 'active' AND +id > 0``: only a
statement with exactly these two literal terms (that read's) can use it, so no other
statement's plan changes. PostgreSQL plans that read with its own statistics and gets
no such index.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-05 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | Sequence[str] | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ix_offer_active_filters"
COLUMNS = [
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
ACTIVE_SCAN = sa.text("+status = 'active' AND +id > 0")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.create_index(NAME, "offer", COLUMNS, unique=False, sqlite_where=ACTIVE_SCAN)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index(NAME, table_name="offer")
