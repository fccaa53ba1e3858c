"""``gpuatlas db upgrade | downgrade``: the database schema (Alembic migrations)."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import engine, err, handle_errors, settings

app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)


@app.command("upgrade")
@handle_errors
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Migrate the database to REVISION (default: head)."""
    from service.core.migrate import upgrade

    upgrade(settings().database_url, revision)
    if revision == "head":
        from service.crawl.sources import sync_sources

        sync_sources(engine())
    err.print(f"database at {revision}")


@app.command("downgrade")
@handle_errors
def db_downgrade(revision: Annotated[str, typer.Argument()]) -> None:
    """Migrate the database down to REVISION ('base' empties it)."""
    from service.core.migrate import downgrade

    downgrade(settings().database_url, revision)
    err.print(f"database at {revision}")
