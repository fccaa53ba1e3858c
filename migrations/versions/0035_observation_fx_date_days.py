"""An observation's ``fx_date`` is kept as days on SQLite

On SQLite the date of the rates a converted price used was 10 characters of ISO text; it
is now an integer of days since 1970-01-01 (2-3 bytes, ``schema.types.CompactDate``), read
back as the same date. About 8 bytes less per converted observation (none for a price in
USD, which has no rates). PostgreSQL already keeps a ``date`` (4 bytes): nothing changes
there. SQLite rewrites the table (``service.core.sqlite_rebuild``); a value that is not a
date stops the migration, named, with nothing changed. The downgrade writes the text back.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-05 20:55:00
"""

from collections.abc import Sequence
from datetime import date, timedelta

from alembic import op

from service.core.sqlite_rebuild import rebuild_table, register

revision: str = "0035"
down_revision: str | Sequence[str] | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EPOCH_DAY = date(1970, 1, 1)


def _days(value: object) -> int | None:
    if value is None or isinstance(value, int):
        return value  # type: ignore[return-value]
    try:
        return (date.fromisoformat(str(value)) - EPOCH_DAY).days
    except ValueError:
        raise ValueError(f"price_observation holds an fx_date that is not one: {value!r:.80}") from None


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value  # type: ignore[return-value]
    return (EPOCH_DAY + timedelta(days=int(value))).isoformat()  # type: ignore[call-overload]


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    register(bind, "gpuatlas_days", _days)
    rebuild_table(bind, "price_observation", {"fx_date": ("INTEGER", "gpuatlas_days(fx_date)")})


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    register(bind, "gpuatlas_day_text", _text)
    rebuild_table(bind, "price_observation", {"fx_date": ("DATE", "gpuatlas_day_text(fx_date)")})
