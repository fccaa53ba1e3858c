"""price_observation indexes for history at scale (issue 20, item 5)

* ``(offer_id, valid_from)`` becomes ``(offer_id, version_from, version_to)``: the row a
  catalog version saw (an ``as_of`` listing, a diff) is found in the index of its offer
  without reading the offer's other rows; one offer's history reads the same entries.
  ``valid_from`` was 26 bytes of text per entry on SQLite: the index is 40 % smaller.
* ``(version_from)`` becomes ``(version_from, offer_id)`` and the partial
  ``(version_to)`` becomes ``(version_to, offer_id)``: a page of the change feed walks
  both in (version, offer) order and stops after the page, instead of sorting every change
  since ``since``.

Indexes only: no row is touched, so every figure keeps its provenance.

It follows ``0018`` (merged on main first, itself after ``0013``): one line of revisions.

Revision ID: 0014
Revises: 0018
Create Date: 2026-12-04 03:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0014'
down_revision: str | Sequence[str] | None = '0018'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = 'price_observation'
SET = sa.text('version_to IS NOT NULL')


def upgrade() -> None:
    op.drop_index('ix_price_observation_offer_valid', table_name=TABLE)
    op.create_index(
        'ix_price_observation_offer_version', TABLE, ['offer_id', 'version_from', 'version_to']
    )
    op.drop_index('ix_price_observation_version_from', table_name=TABLE)
    op.create_index('ix_price_observation_version_from', TABLE, ['version_from', 'offer_id'])
    op.drop_index('ix_price_observation_version_to', table_name=TABLE)
    op.create_index(
        'ix_price_observation_version_to',
        TABLE,
        ['version_to', 'offer_id'],
        sqlite_where=SET,
        postgresql_where=SET,
    )


def downgrade() -> None:
    op.drop_index('ix_price_observation_version_to', table_name=TABLE)
    op.create_index(
        'ix_price_observation_version_to',
        TABLE,
        ['version_to'],
        sqlite_where=SET,
        postgresql_where=SET,
    )
    op.drop_index('ix_price_observation_version_from', table_name=TABLE)
    op.create_index('ix_price_observation_version_from', TABLE, ['version_from'])
    op.drop_index('ix_price_observation_offer_version', table_name=TABLE)
    op.create_index('ix_price_observation_offer_valid', TABLE, ['offer_id', 'valid_from'])
