"""Alembic environment: the schema's metadata, on SQLite (batch mode) and PostgreSQL."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from sqlalchemy import Connection
from sqlmodel.sql.sqltypes import AutoString

import schema
from schema.types import DecimalType, Digest, UTCDateTime, UTCMicros
from service.core.db import make_engine
from service.core.migrate import on_dialect

config = context.config
target_metadata = schema.metadata


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    """Render the project's column types by name, and SQLModel's AutoString as sa.String."""
    if type_ != "type":
        return False
    if isinstance(obj, AutoString):
        return f"sa.String(length={obj.length})" if obj.length else "sa.String()"
    if isinstance(obj, DecimalType | Digest | UTCDateTime | UTCMicros):
        autogen_context.imports.add("import schema.types")
        return f"schema.types.{type(obj).__name__}()"
    return False


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=render_item,
        include_object=on_dialect(connection.dialect.name),
    )


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
