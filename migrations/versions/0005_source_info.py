"""source info

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 23:54:51.554859
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import schema.types

revision: str = '0005'
down_revision: str | Sequence[str] | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('source_info',
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('provider', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('schedule', sa.String(length=16), nullable=False),
    sa.Column('credential', sa.String(length=64), nullable=True),
    sa.Column('parser_version', sa.String(length=32), nullable=True),
    sa.Column('docs_url', sa.String(length=500), nullable=True),
    sa.Column('updated_at', schema.types.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_source_info'))
    )


def downgrade() -> None:
    op.drop_table('source_info')
