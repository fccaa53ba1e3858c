"""An observation's payload sha256 as its 32 bytes, not 64 characters of hexadecimal

Every price observation names the raw payload it was read from. As text the name took
64 bytes of a ~195-byte row on SQLite (65 on PostgreSQL); as bytes it takes 32 (33).
Readers see the same hexadecimal text as before (``schema.types.Digest``).

SQLite: the table is rewritten with the column declared BLOB and each value decoded
(``service.core.sqlite_rebuild``; its indexes, expression and partial ones included, are
created again from their stored DDL). PostgreSQL: ``ALTER COLUMN ... TYPE bytea USING
decode(...)``. A value that is not hexadecimal text stops the migration, which then
changes nothing. The downgrade writes the lowercase hexadecimal text back.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05 02:30:00
"""

from collections.abc import Sequence

from alembic import op

from schema.types import digest_bytes
from service.core.sqlite_rebuild import rebuild_table, register

revision: str = "0025"
down_revision: str | Sequence[str] | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


HEX = "CASE WHEN raw_sha256 IS NULL THEN NULL ELSE lower(hex(raw_sha256)) END"


def _unhex(value: object) -> bytes | None:
    """SQLite 3.40 has no ``unhex()``: the decoding as ``Digest`` stores it, registered
    for the rebuild (what is not lowercase hexadecimal text is refused, named)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    return digest_bytes(str(value))


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        register(bind, "gpuatlas_unhex", _unhex)
        rebuild_table(
            bind, "price_observation", {"raw_sha256": ("BLOB", "gpuatlas_unhex(raw_sha256)")}
        )
    else:
        op.execute(
            "ALTER TABLE price_observation ALTER COLUMN raw_sha256 TYPE bytea "
            "USING decode(raw_sha256, 'hex')"
        )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        rebuild_table(
            bind, "price_observation", {"raw_sha256": ("VARCHAR(64)", HEX)}
        )
    else:
        op.execute(
            "ALTER TABLE price_observation ALTER COLUMN raw_sha256 TYPE varchar(64) "
            "USING encode(raw_sha256, 'hex')"
        )
