"""Run Alembic programmatically against the configured database."""

from __future__ import annotations

from typing import Any

from alembic import command
from alembic.config import Config

from service.core.config import MIGRATIONS_DIR
from service.core.db import normalize_url


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", normalize_url(database_url).replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url), revision)


def on_dialect(dialect: str) -> Any:
    """Alembic's ``include_object`` for ``dialect``: leaves out the schema's objects made for
    another database only (``Index(...).ddl_if(dialect=...)``), which autogenerate does not
    itself honour."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        only = getattr(getattr(obj, "_ddl_if", None), "dialect", None)
        return only is None or only == dialect

    return include
