"""offer.tax_included and region.province: what a CNY price includes, and where

offer.tax_included: whether a quoted price includes sales tax/VAT. Chinese clouds quote CNY
prices with VAT included; the AWS China price list quotes before tax. A price that says
neither is null (most sources), so a reader can tell a stated fact from an unknown one.
region.province: the first-level subdivision of a region (cn-beijing: Beijing, ap-guangzhou:
Guangdong), from the reference data.

Revision ID: 0017
Revises: 0015
Create Date: 2026-12-04 03:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0017'
down_revision: str | Sequence[str] | None = '0015'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ADD COLUMN on both databases: a batch on SQLite would recreate offer, which
    # observations reference
    op.add_column('offer', sa.Column('tax_included', sa.Boolean(), nullable=True))
    op.add_column('region', sa.Column('province', sa.String(length=100), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        # a plain DROP COLUMN: batch mode would recreate offer, which observations reference
        op.execute('ALTER TABLE region DROP COLUMN province')
        op.execute('ALTER TABLE offer DROP COLUMN tax_included')
        return
    op.drop_column('region', 'province')
    op.drop_column('offer', 'tax_included')
