"""ix_offer_gpu_kind_provider: the GPU overview's grouped aggregate reads one covering index

The overview (service.query.overview) groups every current offer by (GPU, price kind,
provider). Without this index SQLite scans the table and sorts every row for the GROUP BY
(~200 ms at 200,000 offers); along this index the groups arrive in order and every column
the aggregate reads is in the index (~80 ms). It leads with gpu_slug, so the listing's own
plans (status first, or gpu_slug + status + price) are unchanged.

Revision ID: 0019
Revises: 0017
Create Date: 2026-12-04 09:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = [
    "gpu_slug",
    "price_kind",
    "provider",
    "status",
    "gpu_hour_usd_e10",
    "country",
    "last_changed_at",
]


def upgrade() -> None:
    op.create_index("ix_offer_gpu_kind_provider", "offer", COLUMNS, unique=False)


def downgrade() -> None:
    op.drop_index("ix_offer_gpu_kind_provider", table_name="offer")
