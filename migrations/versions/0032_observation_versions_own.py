"""An observation's validity and crawl run are its versions' own

Every observation the ingest writes opens at its catalog version's time, in that
version's crawl run, and closes at the time of the version that closes it: its
``valid_from``, ``valid_to`` and ``crawl_run_id`` repeated what ``catalog_version`` holds
once per ingest (about 18 of the 158 bytes an observation took on SQLite). They are now
null when they are the versions' (``schema.prices.VERSIONS_OWN``), and the readers take
the versions' (``service.query.sql.OBS_VALID_FROM`` and the like). A row holding other
values keeps them. ``valid_from`` and ``crawl_run_id`` become nullable.

On SQLite ``catalog_version.created_at`` is now stored as an observation's times are
(integer microseconds, ``schema.types.UTCMicros``; PostgreSQL keeps its ``timestamptz``),
so either reads in the other's place; both tables are rewritten (SQLite: a rebuild,
``service.core.sqlite_rebuild``; PostgreSQL: an ``UPDATE`` of the rows that change, whose
old versions ``VACUUM`` reclaims). The downgrade writes the values back.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-05 19:40:00
"""

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from alembic import op
from sqlalchemy import Connection

from service.core.sqlite_rebuild import rebuild_table, register

revision: str = "0032"
down_revision: str | Sequence[str] | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "price_observation"
VERSION = "catalog_version"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def _at(version: str, column: str = "created_at") -> str:
    return f"(SELECT v.{column} FROM {VERSION} v WHERE v.id = {TABLE}.{version})"


def _unless_equal(column: str, version: str, of: str = "created_at") -> str:
    """The column's value, or null where it is the version's (a missing version: kept)."""
    return f"CASE WHEN {column} = {_at(version, of)} THEN NULL ELSE {column} END"


def _or_versions(column: str, version: str, of: str = "created_at") -> str:
    return f"COALESCE({column}, {_at(version, of)})"


def _micros(text: str | None) -> int | None:
    """SQLite's stored ``DATETIME`` text (naive UTC) as integer microseconds."""
    if text is None:
        return None
    when = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return (when - EPOCH) // MICROSECOND


def _text(micros: int | None) -> str | None:
    if micros is None:
        return None
    return (EPOCH + micros * MICROSECOND).replace(tzinfo=None).isoformat(" ", "microseconds")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _upgrade_sqlite(bind)
        return
    op.alter_column(TABLE, "valid_from", nullable=True)
    op.alter_column(TABLE, "crawl_run_id", nullable=True)
    bind.exec_driver_sql(
        f"UPDATE {TABLE} SET valid_from = {_unless_equal('valid_from', 'version_from')}, "
        f"crawl_run_id = {_unless_equal('crawl_run_id', 'version_from', 'crawl_run_id')}, "
        f"valid_to = {_unless_equal('valid_to', 'version_to')} "
        "WHERE valid_from IS NOT NULL OR crawl_run_id IS NOT NULL OR valid_to IS NOT NULL"
    )


def _upgrade_sqlite(bind: Connection) -> None:
    register(bind, "gpuatlas_micros", _micros)
    rebuild_table(bind, VERSION, {"created_at": ("BIGINT", "gpuatlas_micros(created_at)")})
    rebuild_table(
        bind,
        TABLE,
        {
            "valid_from": ("BIGINT", _unless_equal("valid_from", "version_from")),
            "valid_to": ("BIGINT", _unless_equal("valid_to", "version_to")),
            "crawl_run_id": (
                "INTEGER",
                _unless_equal("crawl_run_id", "version_from", "crawl_run_id"),
            ),
        },
        nullable=("valid_from", "crawl_run_id"),
    )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _downgrade_sqlite(bind)
        return
    bind.exec_driver_sql(
        f"UPDATE {TABLE} SET valid_from = {_or_versions('valid_from', 'version_from')}, "
        f"crawl_run_id = {_or_versions('crawl_run_id', 'version_from', 'crawl_run_id')}, "
        f"valid_to = {_or_versions('valid_to', 'version_to')} "
        "WHERE valid_from IS NULL OR crawl_run_id IS NULL "
        "OR (valid_to IS NULL AND version_to IS NOT NULL)"
    )
    op.alter_column(TABLE, "valid_from", nullable=False)
    op.alter_column(TABLE, "crawl_run_id", nullable=False)


def _downgrade_sqlite(bind: Connection) -> None:
    # the observations first, while the versions' times are integers as theirs are
    rebuild_table(
        bind,
        TABLE,
        {
            "valid_from": ("BIGINT NOT NULL", _or_versions("valid_from", "version_from")),
            "valid_to": ("BIGINT", _or_versions("valid_to", "version_to")),
            "crawl_run_id": (
                "INTEGER NOT NULL",
                _or_versions("crawl_run_id", "version_from", "crawl_run_id"),
            ),
        },
        nullable=("valid_from", "crawl_run_id"),
    )
    register(bind, "gpuatlas_datetime", _text)
    rebuild_table(bind, VERSION, {"created_at": ("DATETIME", "gpuatlas_datetime(created_at)")})
