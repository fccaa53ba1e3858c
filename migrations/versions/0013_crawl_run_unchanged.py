"""crawl_run.reference_digest and crawl_run.unmapped_counts: what an unchanged crawl needs

A crawl whose raw payloads are byte-identical to the last good crawl of its source, with
the same parser version and the same resolution-relevant reference data, is recorded
without parsing, validating or diffing (docs/ingest.md, "An unchanged crawl").
``reference_digest`` is the digest of the reference data an ingest resolved with;
``unmapped_counts`` the unmapped names it counted, so a confirmed run counts them again
exactly as a full ingest would.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 02:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0013'
down_revision: str | Sequence[str] | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ADD COLUMN on both databases: a batch on SQLite would recreate crawl_run, which
    # payload links, rejections and unmapped names reference
    op.add_column('crawl_run', sa.Column('reference_digest', sa.String(length=64), nullable=True))
    op.add_column('crawl_run', sa.Column('unmapped_counts', sa.JSON(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        # a plain DROP COLUMN: batch mode would recreate crawl_run, which other tables
        # reference (its DROP TABLE fails with rows in them)
        op.execute('ALTER TABLE crawl_run DROP COLUMN unmapped_counts')
        op.execute('ALTER TABLE crawl_run DROP COLUMN reference_digest')
        return
    op.drop_column('crawl_run', 'unmapped_counts')
    op.drop_column('crawl_run', 'reference_digest')
