"""ix_offer_gpu_kind_provider: the GPU overview's grouped aggregate reads one covering index

The overview (service.query.overview) groups every current offer by (GPU, price kind,
provider). Without this index SQLite scans the table and sorts every row for the GROUP BY
(~200 ms at 200,000 offers); along this index the groups arrive in order and every column
the aggregate reads is in the index (~80 ms). Partial (active offers only): no other read
can use it (the listing binds the status as a parameter, pinned reads include withdrawn
offers), so their plans stay as they were. On SQLite the predicate is written
``+status = 'active' AND +gpu_slug IS NOT NULL``: only a statement with exactly these terms
(the overview's) can use it (740 distinct listing statements of the listing benchmark keep
their plans), and neither term can seek another index, so SQLite's planner (no statistics)
takes this one rather than a status index with a table lookup per offer and a sort.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = [
    "gpu_slug",
    "price_kind",
    "provider",
    "gpu_hour_usd_e10",
    "country",
    "last_changed_at",
    "status",
]
ACTIVE = sa.text("status = 'active'")
ACTIVE_KNOWN_GPU = sa.text("+status = 'active' AND +gpu_slug IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_offer_gpu_kind_provider",
        "offer",
        COLUMNS,
        unique=False,
        sqlite_where=ACTIVE_KNOWN_GPU,
        postgresql_where=ACTIVE,
    )


def downgrade() -> None:
    op.drop_index("ix_offer_gpu_kind_provider", table_name="offer")
