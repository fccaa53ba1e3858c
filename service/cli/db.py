"""``gpuatlas db upgrade | downgrade | compact``: the database schema (Alembic migrations)
and its upkeep."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import FormatOpt, engine, err, handle_errors, settings
from service.cli.output import Format, emit

app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)


@app.command("upgrade")
@handle_errors
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Migrate the database to REVISION (default: head)."""
    from service.core.migrate import upgrade

    engine(migrated=False)  # one clear line for a database that cannot be reached
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

    engine(migrated=False)
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


@app.command("size")
@handle_errors
def db_size(fmt: FormatOpt = Format.table) -> None:
    """What the catalog takes on disk: per table its rows, its bytes (its own and its
    indexes') and bytes per row, largest first; on SQLite also the free pages that ``db
    compact`` gives back (it reads every page of an SQLite file: a 790 MB file takes under 2 s)."""
    from service.core.sizes import database_size

    with engine().connect() as conn:
        size = database_size(conn)
    rows = [
        {
            "table": t.name,
            "rows": t.rows,
            "table_mb": round(t.table_bytes / 1e6, 2),
            "indexes_mb": round(t.index_bytes / 1e6, 2),
            "total_mb": round(t.total_bytes / 1e6, 2),
            "bytes_per_row": None if t.bytes_per_row is None else round(t.bytes_per_row, 1),
        }
        for t in size.tables
    ]
    emit(rows, fmt, title="database size")
    free = "" if size.free_bytes is None else f", {size.free_bytes / 1e6:,.1f} MB of it free pages"
    err.print(f"{size.total_bytes / 1e6:,.1f} MB in all{free}", highlight=False)
