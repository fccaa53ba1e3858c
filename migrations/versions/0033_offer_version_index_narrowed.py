"""One offer's observations are indexed by (offer_id, version_from) only

``ix_price_observation_offer_version`` held ``version_to`` too, so that a pinned read could
tell from the index alone whether a row was in force. Every such read now steps back to
the offer's last observation opened by the version (from the index alone) and reads that
one row by id for its ``version_to`` (``service.query.sql.seen_at``; the source ranking's
probe of another source's offer likewise): the column in the index served nothing. About
5 bytes less per observation on SQLite, 8 on PostgreSQL (docs/benchmarks.md). The index
is built again on both databases (one sort of the table); the downgrade restores it.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-05 20:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0033"
down_revision: str | Sequence[str] | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ix_price_observation_offer_version"
TABLE = "price_observation"


def upgrade() -> None:
    op.drop_index(NAME, table_name=TABLE)
    op.create_index(NAME, TABLE, ["offer_id", "version_from"], unique=False)


def downgrade() -> None:
    op.drop_index(NAME, table_name=TABLE)
    op.create_index(NAME, TABLE, ["offer_id", "version_from", "version_to"], unique=False)
