"""gpu_model.default_rank and offer.gpu_inferred: family defaults of the GPU name parser

A raw GPU name that leaves out memory or form factor ("A100", "H100") resolves to the
variant its family's default names (see fixtures/reference/README.md); such an offer
says so, so a reader can tell a stated model from an inferred one.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010'
down_revision: str | Sequence[str] | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ADD COLUMN on both databases: a batch on SQLite would recreate offer, which
    # observations reference
    op.add_column('gpu_model', sa.Column('default_rank', sa.Integer(), nullable=True))
    op.add_column(
        'offer',
        sa.Column('gpu_inferred', sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        # a plain DROP COLUMN: batch mode would recreate offer, which observations reference
        op.execute('ALTER TABLE offer DROP COLUMN gpu_inferred')
        op.execute('ALTER TABLE gpu_model DROP COLUMN default_rank')
        return
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.drop_column('gpu_inferred')
    with op.batch_alter_table('gpu_model', schema=None) as batch_op:
        batch_op.drop_column('default_rank')
