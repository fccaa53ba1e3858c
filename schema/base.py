"""The metadata every table shares, with a constraint naming convention set once."""

from __future__ import annotations

from sqlalchemy import Enum, MetaData, String, TypeDecorator
from sqlmodel import AutoString, SQLModel

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

SQLModel.metadata.naming_convention = NAMING_CONVENTION
metadata = SQLModel.metadata


def text_by_code_point(meta: MetaData) -> None:
    """Every character column of ``meta`` compares by code point on PostgreSQL (``COLLATE
    "C"``, as migration 0037 sets it), as SQLite and Python compare: one order of text on
    both databases, whatever collation the server's databases are created with."""
    for table in meta.tables.values():
        for column in table.columns:
            kind = column.type
            plain = isinstance(kind, String) and not isinstance(kind, Enum | TypeDecorator)
            if (plain or isinstance(kind, AutoString)) and getattr(kind, "collation", None) is None:
                pg = String(getattr(kind, "length", None), collation="C")
                column.type = kind.with_variant(pg, "postgresql")
