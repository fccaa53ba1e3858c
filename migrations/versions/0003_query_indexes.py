"""Query indexes: first-party precedence lookups and the change feed.

- ``ix_offer_identity`` (provider, sku, region, price_kind): the NOT EXISTS that hides a
  peer offer behind a first-party offer of the same identity.
- ``ix_price_observation_version_to``: observations closed in a version range
  (``/v1/diff``, ``/v1/changes``).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("offer", schema=None) as batch_op:
        batch_op.create_index(
            "ix_offer_identity", ["provider", "sku", "region", "price_kind"], unique=False
        )
    with op.batch_alter_table("price_observation", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_price_observation_version_to"), ["version_to"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("price_observation", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_price_observation_version_to"))
    with op.batch_alter_table("offer", schema=None) as batch_op:
        batch_op.drop_index("ix_offer_identity")
