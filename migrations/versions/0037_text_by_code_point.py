"""PostgreSQL compares the catalog's text by code point, as SQLite does

A PostgreSQL database takes its server's default collation, which on most installations is
a language's (``en_US.UTF-8``, or ICU's ``en-US``): there ``-`` and case weigh less than
letters, so ``US-WEST`` sorts between ``us-east`` and ``us-west``, and ``coreweave/north-america``
lands elsewhere than on SQLite, which compares bytes. The same catalog then listed its
regions, compliance sources and any other text order differently on the two databases,
and cursors built on one order were read back in the other. Every character column of
every table is now ``COLLATE "C"`` on PostgreSQL (by code point, as SQLite and Python
compare), its indexes rebuilt by the same statement, one ``ALTER TABLE`` per table.
SQLite has nothing to change. The downgrade returns the columns to the database's default.

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-06 15:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0037"
down_revision: str | Sequence[str] | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLLATE = """
DO $$
DECLARE t record;
BEGIN
  FOR t IN
    SELECT c.oid::regclass AS name,
           string_agg(format('ALTER COLUMN %I TYPE %s COLLATE {collation}',
                             a.attname, format_type(a.atttypid, a.atttypmod)), ', '
                      ORDER BY a.attnum) AS changes
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.relnamespace = current_schema()::regnamespace
      AND c.relkind IN ('r', 'p') AND NOT c.relispartition
      AND c.relname <> 'alembic_version'
      AND a.attnum > 0 AND NOT a.attisdropped
      AND a.atttypid IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype)
      AND a.attcollation <> '{collation}'::regcollation
    GROUP BY c.oid
  LOOP
    EXECUTE format('ALTER TABLE %s %s', t.name, t.changes);
  END LOOP;
END $$
"""


def _collate(collation: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_COLLATE.format(collation=collation))


def upgrade() -> None:
    _collate('"C"')


def downgrade() -> None:
    _collate('"default"')
