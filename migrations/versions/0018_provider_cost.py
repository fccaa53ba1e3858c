"""provider_cost: transfer and storage prices per provider (and region), in tiers

Reference data (fixtures/reference/costs.yaml), loaded with the rest of the reference
data; read by the TCO. See schema/costs.py.

Revision ID: 0018
Revises: 0013
Create Date: 2026-12-04 03:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import schema.types

revision: str = '0018'
down_revision: str | Sequence[str] | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('provider_cost',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('provider', sa.String(length=64), nullable=False),
    sa.Column('region', sa.String(length=100), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('from_gb', schema.types.DecimalType(), nullable=False),
    sa.Column('price', schema.types.DecimalType(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('source_url', sa.String(length=1000), nullable=False),
    sa.Column('checked', sa.Date(), nullable=False),
    sa.Column('notes', sa.String(length=2000), nullable=True),
    sa.ForeignKeyConstraint(['provider'], ['provider.slug'], name=op.f('fk_provider_cost_provider_provider')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_provider_cost')),
    sa.UniqueConstraint('provider', 'region', 'kind', 'from_gb', name=op.f('uq_provider_cost_provider_region_kind_from_gb'))
    )
    op.create_index(op.f('ix_provider_cost_provider'), 'provider_cost', ['provider'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_provider_cost_provider'), table_name='provider_cost')
    op.drop_table('provider_cost')
