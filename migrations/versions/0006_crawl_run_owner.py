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
    op.add_column('crawl_run', sa.Column('owner', sa.String(length=200), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        # native DROP COLUMN (SQLite >= 3.35): batch mode would copy and drop the table,
        # which other tables' foreign keys refuse once it holds rows
        op.execute('ALTER TABLE crawl_run DROP COLUMN owner')
    else:
        op.drop_column('crawl_run', 'owner')
