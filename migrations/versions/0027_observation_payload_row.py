"""An observation names the crawl_run_payload row its price was read from, not the digest

Every price observation names the raw payload it was read from. As the payload's sha256
that took 32 bytes (33 on PostgreSQL) of every row, though a crawl's thousands of rows
share a few payloads. The ``crawl_run_payload`` row (the payload's sha256, and the URL and
time it was fetched by that run) takes an integer of 1-4 bytes, and says more: where the
bytes came from. Readers see the same ``raw_payload_sha256`` as before
(``service.query.sql.payload_sha256``).

Each digest maps to its run's first ``crawl_run_payload`` row for that sha256 (an ingest
stores a crawl's payloads before its prices, so there is one), else to the first row of
any run for it (the same bytes). A digest that no ``crawl_run_payload`` row holds stops
the migration, named, and nothing changes: the provenance would otherwise be lost.

SQLite: the table is rewritten with the column an INTEGER (``service.core.
sqlite_rebuild``, indexes and statistics kept), then renamed. PostgreSQL: ``ALTER COLUMN
... TYPE integer USING`` a lookup function, then renamed. The downgrade writes each
row's sha256 back from its payload row.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05 05:00:00
"""

from collections.abc import Sequence

from alembic import op
from sqlalchemy import Connection

from schema.types import digest_bytes
from service.core.sqlite_rebuild import rebuild_table, register

revision: str = "0027"
down_revision: str | Sequence[str] | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "price_observation"

# The lookups, as temporary tables (what both databases' conversions read): a run's first
# row for a sha256, and the first row of any run for it.
LOOKUPS = (
    "CREATE TEMPORARY TABLE payload_by_run AS SELECT crawl_run_id AS run, sha256, "
    "min(id) AS id FROM crawl_run_payload GROUP BY crawl_run_id, sha256",
    "CREATE UNIQUE INDEX ix_payload_by_run ON payload_by_run (run, sha256)",
    "CREATE TEMPORARY TABLE payload_first AS SELECT sha256, min(id) AS id "
    "FROM crawl_run_payload GROUP BY sha256",
    "CREATE UNIQUE INDEX ix_payload_first ON payload_first (sha256)",
)

SQLITE_HEX = f'lower(hex("{TABLE}".raw_sha256))'
SQLITE_PAYLOAD_ID = (
    f'CASE WHEN "{TABLE}".raw_sha256 IS NULL THEN NULL ELSE coalesce('
    f'(SELECT b.id FROM temp.payload_by_run AS b WHERE b.run = "{TABLE}".crawl_run_id '
    f"AND b.sha256 = {SQLITE_HEX}), "
    f"(SELECT f.id FROM temp.payload_first AS f WHERE f.sha256 = {SQLITE_HEX})) END"
)

PG_PAYLOAD_ID = (
    "CREATE FUNCTION pg_temp.gpuatlas_payload_id(run integer, digest bytea) RETURNS integer "
    "LANGUAGE sql STABLE AS $$ SELECT coalesce("
    "(SELECT b.id FROM pg_temp.payload_by_run AS b WHERE b.run = $1 "
    "AND b.sha256 = encode($2, 'hex')), "
    "(SELECT f.id FROM pg_temp.payload_first AS f WHERE f.sha256 = encode($2, 'hex'))) $$"
)
PG_PAYLOAD_SHA = (
    "CREATE FUNCTION pg_temp.gpuatlas_payload_sha(payload integer) RETURNS bytea "
    "LANGUAGE sql STABLE AS $$ SELECT decode(p.sha256, 'hex') FROM crawl_run_payload AS p "
    "WHERE p.id = $1 $$"
)


def _refuse_unknown_digests(bind: Connection) -> None:
    """Stop, naming one, when a digest has no ``crawl_run_payload`` row to point at."""
    if bind.dialect.name == "sqlite":
        digest = "lower(hex(o.raw_sha256))"
    else:
        digest = "encode(o.raw_sha256, 'hex')"
    found = bind.exec_driver_sql(
        f"SELECT o.id, {digest} FROM {TABLE} AS o WHERE o.raw_sha256 IS NOT NULL "
        f"AND {digest} NOT IN (SELECT p.sha256 FROM crawl_run_payload AS p) "
        "ORDER BY o.id LIMIT 1"
    ).first()
    if found is not None:
        raise ValueError(
            f"price observation {found[0]} was read from payload {found[1]}, which no "
            "crawl_run_payload row holds: its provenance would be lost; not migrated"
        )


def upgrade() -> None:
    bind = op.get_bind()
    _refuse_unknown_digests(bind)
    for statement in LOOKUPS:
        bind.exec_driver_sql(statement)
    if bind.dialect.name == "sqlite":
        rebuild_table(bind, TABLE, {"raw_sha256": ("INTEGER", SQLITE_PAYLOAD_ID)})
    else:
        bind.exec_driver_sql(PG_PAYLOAD_ID)
        bind.exec_driver_sql(
            f"ALTER TABLE {TABLE} ALTER COLUMN raw_sha256 TYPE integer "
            "USING pg_temp.gpuatlas_payload_id(crawl_run_id, raw_sha256)"
        )
        bind.exec_driver_sql("DROP FUNCTION pg_temp.gpuatlas_payload_id(integer, bytea)")
    bind.exec_driver_sql("DROP TABLE payload_by_run")
    bind.exec_driver_sql("DROP TABLE payload_first")
    bind.exec_driver_sql(f"ALTER TABLE {TABLE} RENAME COLUMN raw_sha256 TO payload_id")


def _unhex(value: object) -> bytes | None:
    return None if value is None else digest_bytes(str(value))


def downgrade() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql(f"ALTER TABLE {TABLE} RENAME COLUMN payload_id TO raw_sha256")
    if bind.dialect.name == "sqlite":
        register(bind, "gpuatlas_unhex", _unhex)
        sha = f'(SELECT p.sha256 FROM crawl_run_payload AS p WHERE p.id = "{TABLE}".raw_sha256)'
        rebuild_table(bind, TABLE, {"raw_sha256": ("BLOB", f"gpuatlas_unhex({sha})")})
    else:
        bind.exec_driver_sql(PG_PAYLOAD_SHA)
        bind.exec_driver_sql(
            f"ALTER TABLE {TABLE} ALTER COLUMN raw_sha256 TYPE bytea "
            "USING pg_temp.gpuatlas_payload_sha(raw_sha256)"
        )
        bind.exec_driver_sql("DROP FUNCTION pg_temp.gpuatlas_payload_sha(integer)")
