"""offer.line_digest: the digest of the raw line behind an offer's current state

- ``offer.line_digest`` (16 bytes, BLOB / BYTEA, nullable): blake2b-128 of the JSON Lines
  line last seen, unchanged, with the offer's current state (service.catalog.lines). An
  ingest with the same parser version and reference data as the source's last good
  ingest skips a line whose digest an active offer holds: not parsed, validated or
  diffed. Storage only, never returned; NULL (no line known) is always safe.

Existing offers start with NULL: their next ingest verifies their lines and records them.
Plain ADD / DROP COLUMN on both databases (see 0015).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("offer", sa.Column("line_digest", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # a plain DROP COLUMN: batch mode would recreate offer, which observations reference
        op.execute("ALTER TABLE offer DROP COLUMN line_digest")
        return
    op.drop_column("offer", "line_digest")
