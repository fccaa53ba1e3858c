"""PostgreSQL ``COPY (SELECT …) TO STDOUT``: the server writes the rows, we forward bytes.

The SELECT is an SQLAlchemy statement compiled for the connection's dialect. Its bound
parameters stay parameters: psycopg binds a COPY's parameters client-side, quoting each
value with its own adapter, so no user input is pasted into the SQL text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import psycopg
from sqlalchemy import Connection
from sqlalchemy.sql import ClauseElement

CSV = "FORMAT csv"
"""Default CSV: comma, ``"`` quotes (doubled inside), NULL as an empty unquoted field,
``\\n`` line ends; a field is quoted when it holds a comma, a quote, CR or LF (or is empty:
an empty string, to tell it from NULL)."""
LINES = "FORMAT csv, DELIMITER E'\\x02', QUOTE E'\\x01'"
"""One text column per row written as it is, plus ``\\n``: for values that never hold a
raw control character (JSON text escapes every one), so CSV never quotes them."""


def usable(conn: Connection) -> bool:
    """The connection can COPY through psycopg 3 with UTF-8 text."""
    if conn.dialect.name != "postgresql" or conn.dialect.driver != "psycopg":
        return False
    dbapi = conn.connection.dbapi_connection
    info = getattr(dbapi, "info", None)
    return info is not None and info.encoding == "utf-8"


def compile_copy(conn: Connection, stmt: ClauseElement, options: str) -> tuple[str, dict[str, Any]]:
    """``COPY (stmt) TO STDOUT (options)`` and its parameters, as psycopg takes them.

    ``IN`` lists are expanded at compile time (``render_postcompile``); every value goes
    through its type's bind processing, as SQLAlchemy's own execution does.
    """
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = dict(compiled.construct_params() or {})
    processors: Mapping[str, Any] = getattr(compiled, "_bind_processors", {})
    for name, value in params.items():
        process = processors.get(name)
        if callable(process) and value is not None:
            params[name] = process(value)
    return f"COPY ({compiled.string}) TO STDOUT ({options})", params


def copy_out(
    conn: Connection,
    statement: str,
    params: dict[str, Any],
    chunk: int,
    head: bytes = b"",
    fix: Callable[[bytes], bytes] | None = None,
) -> Iterator[bytes]:
    """The COPY's output (after ``head``) in pieces of about ``chunk`` bytes.

    Every piece holds whole rows (libpq hands COPY data over a row at a time), so
    ``fix``, when given, may rewrite each piece as rows. Runs in ``conn``'s transaction
    (its isolation level applies). If the consumer stops early, psycopg cancels the COPY
    on the server and drains what was already sent.
    """
    dbapi = cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)
    buffer = bytearray(head)
    with dbapi.cursor() as cursor, cursor.copy(statement, params) as copy:
        for data in copy:
            buffer += data
            if len(buffer) >= chunk:
                yield fix(bytes(buffer)) if fix else bytes(buffer)
                buffer.clear()
    yield fix(bytes(buffer)) if fix else bytes(buffer)
