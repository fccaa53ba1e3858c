"""index price_observation.version_to only where it is set

``version_to`` is null for every observation still in force: most of the table. Every
query that reads the index asks for a closed observation (``version_to = v`` or a range
of versions), so the null entries were never read; they only cost every first
observation of an offer an index entry (and 1.7 MiB per 200,000 offers).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30 11:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | Sequence[str] | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 'ix_price_observation_version_to'
SET = sa.text('version_to IS NOT NULL')


def upgrade() -> None:
    op.drop_index(NAME, table_name='price_observation')
    op.create_index(
        NAME,
        'price_observation',
        ['version_to'],
        unique=False,
        sqlite_where=SET,
        postgresql_where=SET,
    )


def downgrade() -> None:
    op.drop_index(NAME, table_name='price_observation')
    op.create_index(NAME, 'price_observation', ['version_to'], unique=False)
