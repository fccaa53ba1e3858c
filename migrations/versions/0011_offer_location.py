"""offer_location: where a globally priced offer can run; region.gpus and region.members

A price quoted once for all regions (region ``global``) or for a group of regions (a
price page's ``north-america``) is still launched somewhere. ``offer_location`` holds
those places, one row per (offer, region), with the basis that named them (the source,
reference regions, or peer catalogs' regional rows); see docs/locations.md. The rows are
derived state: the catalog writer rewrites them, they are not versioned.

``region.gpus`` narrows a region to the GPU families known there; ``region.members``
makes a region row a group of other regions of its provider.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 22:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0011'
down_revision: str | Sequence[str] | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('offer_location',
    sa.Column('offer_id', sa.Integer(), nullable=False),
    sa.Column('region', sa.String(length=100), nullable=False),
    sa.Column('country', sa.String(length=2), nullable=True),
    sa.Column('basis', sa.String(length=16), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['offer_id'], ['offer.id'], name=op.f('fk_offer_location_offer_id_offer')),
    sa.PrimaryKeyConstraint('offer_id', 'region', name=op.f('pk_offer_location'))
    )
    with op.batch_alter_table('offer_location', schema=None) as batch_op:
        batch_op.create_index('ix_offer_location_offer_id_country', ['offer_id', 'country'], unique=False)
    with op.batch_alter_table('region', schema=None) as batch_op:
        batch_op.add_column(sa.Column('gpus', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('members', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('region', schema=None) as batch_op:
        batch_op.drop_column('members')
        batch_op.drop_column('gpus')
    with op.batch_alter_table('offer_location', schema=None) as batch_op:
        batch_op.drop_index('ix_offer_location_offer_id_country')
    op.drop_table('offer_location')
