"""drop ix_offer_provider

``ix_offer_identity`` (provider, sku, region, price_kind) starts with ``provider``: every
lookup by provider uses it as well, so the single-column index only cost every offer
insert one more index entry.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 07:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0008'
down_revision: str | Sequence[str] | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index('ix_offer_provider', table_name='offer')


def downgrade() -> None:
    op.create_index('ix_offer_provider', 'offer', ['provider'], unique=False)
