"""An observation's validity times as integers of microseconds on SQLite

``valid_from`` and ``valid_to`` were SQLite text (``2026-12-05 02:03:04.567891``, 26 bytes
each); they become integers of microseconds since 1970-01-01 UTC (8 bytes each): 36 bytes
less per observation (``schema.types.UTCMicros``). Readers see the same aware UTC times.
The table is rewritten (``service.core.sqlite_rebuild``; its indexes and their statistics
are rebuilt from their stored definitions). A value that is not such a time stops the
migration, which then changes nothing; the downgrade writes the text back.

PostgreSQL stores them as ``timestamptz`` (8 bytes) already: nothing to do there.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-05 03:00:00
"""

from collections.abc import Sequence
from datetime import UTC, datetime

from alembic import op

from schema.types import EPOCH, MICROSECOND, utc_micros
from service.core.sqlite_rebuild import rebuild_table, register

revision: str = "0026"
down_revision: str | Sequence[str] | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TEXT = "%Y-%m-%d %H:%M:%S.%f"
"""How SQLite held them (SQLAlchemy's DATETIME text, naive UTC)."""
COLUMNS = ("valid_from", "valid_to")


def _micros(value: object) -> int | None:
    if value is None or isinstance(value, int):
        return value  # type: ignore[return-value]
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise ValueError(f"price_observation holds a time that is not one: {value!r:.80}") from None
    return utc_micros(when if when.tzinfo else when.replace(tzinfo=UTC))


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value  # type: ignore[return-value]
    return (EPOCH + int(value) * MICROSECOND).strftime(TEXT)  # type: ignore[call-overload]


def _rewrite(kind: str, function: str) -> None:
    """SQLite only: both columns retyped to ``kind``, each value converted by the
    registered ``function``."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    register(bind, "gpuatlas_micros", _micros)
    register(bind, "gpuatlas_time_text", _text)
    rebuild_table(bind, "price_observation", {c: (kind, f"{function}({c})") for c in COLUMNS})


def upgrade() -> None:
    _rewrite("BIGINT", "gpuatlas_micros")


def downgrade() -> None:
    _rewrite("DATETIME", "gpuatlas_time_text")
