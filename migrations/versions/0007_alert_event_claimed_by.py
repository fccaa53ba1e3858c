"""alert event claimant

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | Sequence[str] | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column('alert_event', sa.Column('claimed_by', sa.String(length=200), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        # native DROP COLUMN (SQLite >= 3.35): batch mode would copy and drop the table,
        # which other tables' foreign keys refuse once it holds rows
        op.execute('ALTER TABLE alert_event DROP COLUMN claimed_by')
    else:
        op.drop_column('alert_event', 'claimed_by')
