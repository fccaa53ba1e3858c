"""``gpuatlas db upgrade | downgrade | compact``: the database schema (Alembic migrations)
and its upkeep."""

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


@app.command("compact")
@handle_errors
def db_compact() -> None:
    """Give the database's free pages back and pack its indexes (SQLite ``VACUUM``: the
    file is rewritten, ingests wait for it, and it needs as much free disk as the file);
    on PostgreSQL ``VACUUM (ANALYZE)``, which makes dead rows' space reusable."""
    from service.core.upkeep import compact

    before, after = compact(engine())
    err.print(f"database compacted: {before / 1e6:,.1f} MB -> {after / 1e6:,.1f} MB")
