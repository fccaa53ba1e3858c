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
    with op.batch_alter_table('alert_event') as batch:
        batch.add_column(sa.Column('claimed_by', sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('alert_event') as batch:
        batch.drop_column('claimed_by')
