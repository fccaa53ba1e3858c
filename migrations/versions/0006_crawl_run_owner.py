"""crawl run owner

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 02:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | Sequence[str] | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('crawl_run') as batch:
        batch.add_column(sa.Column('owner', sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('crawl_run') as batch:
        batch.drop_column('owner')
