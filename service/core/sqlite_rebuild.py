"""SQLite: rewrite a table with some of its columns' declared types and stored values
changed, which ``ALTER TABLE`` cannot do (https://www.sqlite.org/lang_altertable.html,
"Making Other Kinds Of Table Schema Changes").

The table is created afresh from its own stored DDL (only the named columns' types
replaced), filled from the old one in rowid order with each changed column computed by an
SQL expression of the old row, and renamed over it; its indexes and triggers are created
again from their exact stored DDL (expression and partial indexes included, which
Alembic's batch mode, working from reflection, would drop), and the statistics ANALYZE
kept for them are restored. A table that others refer to by foreign key is refused
(dropping it would delete their parent rows). All of it runs in the caller's
transaction: an error (a value the expression refuses) rolls everything back and the
table is left as it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

_STAT_TABLES = ("sqlite_stat1", "sqlite_stat4")
_ERRORS = "gpuatlas.rebuild_errors"


def rebuild_table(
    conn: Connection,
    table: str,
    changes: Mapping[str, tuple[str, str]],
    nullable: Collection[str] = (),
) -> None:
    """Rewrite ``table``: ``changes`` maps a column to (its new declared type, the SQL
    expression of the old row that gives its new value, e.g. ``lower(hex(raw_sha256))``).
    The columns of ``changes`` named in ``nullable`` lose their ``NOT NULL`` (a declared
    type ending in ``NOT NULL`` adds it)."""
    unlisted = set(nullable) - set(changes)
    if unlisted:
        raise ValueError(f"nullable names columns not changed: {', '.join(sorted(unlisted))}")
    if conn.dialect.name != "sqlite":
        raise ValueError(f"a table rebuild is for SQLite, not {conn.dialect.name}")
    found = conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).scalar()
    if found is None:
        raise LookupError(f"no table {table}")
    columns = [row[1] for row in conn.exec_driver_sql(f'PRAGMA table_info("{table}")')]
    unknown = set(changes) - set(columns)
    if unknown:
        raise LookupError(f"{table} has no column {', '.join(sorted(unknown))}")
    referring = _referring(conn, table)
    if referring:  # dropping the table would delete (or cascade to) their rows' parents
        raise ValueError(
            f"{', '.join(referring)} refer to {table} by foreign key: a rebuild would drop "
            "their parent rows; not supported"
        )
    rebuilt = f"{table}_rebuilt"
    types = {c: t for c, (t, _) in changes.items()}
    ddl = _retyped(str(found), table, rebuilt, types, frozenset(nullable))
    dependents = [
        (name, sql)
        for name, sql in conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type IN ('index', 'trigger') "
            "AND tbl_name = ? AND sql IS NOT NULL ORDER BY type, name",
            (table,),
        )
    ]
    names = tuple(name for name, _ in dependents)
    stats = _saved_stats(conn, table)
    conn.exec_driver_sql(ddl)
    listed = ", ".join(f'"{c}"' for c in columns)
    values = ", ".join(changes[c][1] if c in changes else f'"{c}"' for c in columns)
    errors: list[str] = conn.info.setdefault(_ERRORS, [])
    errors.clear()
    try:
        conn.exec_driver_sql(
            f'INSERT INTO "{rebuilt}" ({listed}) SELECT {values} FROM "{table}" ORDER BY rowid'
        )
    except DBAPIError as error:
        if errors:  # SQLite's own message says only that a function raised
            raise ValueError(errors[0]) from error
        raise
    conn.exec_driver_sql(f'DROP TABLE "{table}"')
    conn.exec_driver_sql(f'ALTER TABLE "{rebuilt}" RENAME TO "{table}"')
    for _, sql in dependents:
        conn.exec_driver_sql(sql)
    _restore_stats(conn, table, names, stats)


def register(conn: Connection, name: str, convert: Callable[[Any], Any]) -> None:
    """Make ``convert`` the SQL function ``name`` on this connection, for a rebuild's
    expressions: a value it refuses (by raising) stops the rebuild, which re-raises its
    message as a ``ValueError`` (SQLite's own error names neither the value nor the
    reason)."""
    errors: list[str] = conn.info.setdefault(_ERRORS, [])

    def checked(value: Any) -> Any:
        try:
            return convert(value)
        except Exception as error:
            errors.append(str(error))
            raise

    dbapi: Any = conn.connection.dbapi_connection
    dbapi.create_function(name, 1, checked, deterministic=True)


def _referring(conn: Connection, table: str) -> list[str]:
    """The other tables with a foreign key to ``table``."""
    names = conn.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name != ?", (table,)
    ).scalars()
    return [
        name
        for name in list(names)
        if any(
            row[2] == table for row in conn.exec_driver_sql(f'PRAGMA foreign_key_list("{name}")')
        )
    ]


def _retyped(
    ddl: str,
    table: str,
    rebuilt: str,
    types: Mapping[str, str],
    nullable: frozenset[str] = frozenset(),
) -> str:
    """The table's DDL for the new table: its name, each named column's type, and no
    ``NOT NULL`` for the ``nullable`` ones."""
    head = re.compile(rf'^\s*CREATE TABLE\s+"?{re.escape(table)}"?\s*\(', re.IGNORECASE)
    if not head.match(ddl):
        raise ValueError(f"unexpected DDL for {table}: {ddl[:80]!r}")
    out = head.sub(f'CREATE TABLE "{rebuilt}" (', ddl, count=1)
    for column, kind in types.items():
        # a column's definition opens a line of SQLAlchemy's DDL: its name, then its type
        not_null = r"(\s+NOT NULL)?" if column in nullable else ""
        line = re.compile(
            rf'^(\s*)"?{re.escape(column)}"?\s+[A-Z]+(\(\d+(,\s*\d+)?\))?{not_null}', re.M
        )
        out, count = line.subn(rf"\g<1>{column} {kind}", out)
        if count != 1:
            raise ValueError(f"column {column} defined {count} times in {table}'s DDL")
    return out


def _saved_stats(conn: Connection, table: str) -> dict[str, list[Any]]:
    present = {
        name
        for (name,) in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'sqlite_stat%'"
        )
    }
    return {
        stat: list(conn.exec_driver_sql(f"SELECT * FROM {stat} WHERE tbl = ?", (table,)))
        for stat in _STAT_TABLES
        if stat in present
    }


def _restore_stats(
    conn: Connection, table: str, names: tuple[str, ...], stats: dict[str, list[Any]]
) -> None:
    """The statistics of the table and of its indexes as they were before the rebuild
    (dropping the table dropped them)."""
    for stat, rows in stats.items():
        conn.exec_driver_sql(f"DELETE FROM {stat} WHERE tbl = ?", (table,))
        for row in rows:
            values = tuple(row)
            if values[1] is not None and values[1] not in names and values[1] != table:
                continue
            conn.exec_driver_sql(
                f"INSERT INTO {stat} VALUES ({', '.join('?' * len(values))})", values
            )
