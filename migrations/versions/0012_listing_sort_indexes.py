"""Listing indexes: every sort walks an index, the precedence probe finds places by region

- ``ix_offer_status_provider`` (status, provider, id): ``sort=provider`` / ``-provider`` walk
  it instead of sorting every match (as ``ix_offer_status_gpu_hour`` serves the default).
- ``ix_offer_status_gpu_count`` (status, gpu_count, id): ``sort=gpu_count`` reads each
  distinct count's offers in id order (on SQLite the exact decimal is text, so the index
  order is not numeric: the counts are ordered in Python, see
  ``service.query.offers._by_value``).
- ``ix_offer_location_region`` (region): the precedence probe "another source's offer is
  placed in this offer's region" starts from the region's locations, not from every offer
  of the SKU (see ``service.query.sql.outranked``).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 02:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0012'
down_revision: str | Sequence[str] | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.create_index('ix_offer_status_provider', ['status', 'provider', 'id'], unique=False)
        batch_op.create_index('ix_offer_status_gpu_count', ['status', 'gpu_count', 'id'], unique=False)
    with op.batch_alter_table('offer_location', schema=None) as batch_op:
        batch_op.create_index('ix_offer_location_region', ['region'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('offer_location', schema=None) as batch_op:
        batch_op.drop_index('ix_offer_location_region')
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.drop_index('ix_offer_status_gpu_count')
        batch_op.drop_index('ix_offer_status_provider')
