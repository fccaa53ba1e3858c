"""PostgreSQL bulk loads: foreign keys checked once per load instead of once per row.

PostgreSQL checks a foreign key of every inserted row on its own: a lookup of the
referenced row that also locks it (``FOR KEY SHARE``). Loading 200,000 offers and their
observations runs 600,000 of them, a third of the server's work for a first ingest.

Where the ingest's role may set ``session_replication_role`` (a superuser, or a role
granted ``SET`` on it, PostgreSQL 15 and later), :func:`foreign_keys_checked_per_load`
sets it to ``replica`` for the load (``SET LOCAL``: this transaction only, and only for
the load; every other session keeps its checks), which stops the per-row checks. When
the load is done it puts the setting back and does, for the whole load, what the per-row
checks would have done:

* it locks the referenced rows the load refers to (``FOR KEY SHARE``, as each check
  would), so that no one deletes or re-keys them before this transaction ends; rows
  this same transaction inserted need no lock (no one else can see them);
* it looks for loaded rows whose reference has no row, with one anti-join per foreign
  key, and raises :class:`BrokenReference` naming them if there are any, so the caller's
  transaction rolls back and nothing of the load is committed.

Without the privilege, or when a loaded table has triggers or rules of its own (which
``replica`` would silence too), nothing changes: the per-row checks run as always.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Table

ROLE_SETTING = "session_replication_role"
log = logging.getLogger("gpuatlas.ingest")
_told: set[str] = set()


class BrokenReference(Exception):
    """Rows of a bulk load refer to rows that do not exist (a foreign key violated)."""


@dataclass(frozen=True)
class Load:
    """The rows of ``table`` a bulk load inserts: those whose ``key`` is ``first_id`` or
    more (ids only grow; a table keyed by another table's id, such as ``offer_line`` by
    its offer's, names that column)."""

    table: Table
    first_id: int
    key: str = "id"


def row_checks_needed(conn: Connection, tables: Sequence[Table]) -> str | None:
    """Why a PostgreSQL load into ``tables`` must keep the per-row checks (this session
    may not set ``session_replication_role``, or one of ``tables`` has a trigger or rule
    that ``replica`` would also silence), or None."""
    version = int(conn.exec_driver_sql("SHOW server_version_num").scalar() or 0)
    if not conn.exec_driver_sql(privilege_query(version)).scalar():
        grant = (
            f"GRANT SET ON PARAMETER {ROLE_SETTING} TO <role>"
            if version >= 150000
            else "a superuser (PostgreSQL 15 and later: a grant of SET on it)"
        )
        return f"this role may not set {ROLE_SETTING} ({grant} would allow it)"
    names = [table.name for table in tables]
    own = conn.exec_driver_sql(
        "SELECT array(SELECT DISTINCT c.relname FROM pg_class AS c WHERE c.oid = ANY(%(oids)s) "
        "AND (EXISTS (SELECT 1 FROM pg_trigger AS t WHERE t.tgrelid = c.oid "
        "AND NOT t.tgisinternal) OR EXISTS (SELECT 1 FROM pg_rewrite AS r "
        "WHERE r.ev_class = c.oid)) ORDER BY c.relname)",
        {"oids": [_oid(conn, name) for name in names]},
    ).scalar()
    if own:
        return f"{', '.join(own)} has triggers or rules of its own, which replica would silence"
    return None


def privilege_query(server_version_num: int) -> str:
    """A query answering whether this session may set ``session_replication_role``. Before
    PostgreSQL 15 only a superuser may (and ``has_parameter_privilege`` does not exist
    there: naming it would fail the query even in a branch never taken)."""
    if server_version_num >= 150000:
        return f"SELECT has_parameter_privilege('{ROLE_SETTING}', 'SET')"
    return "SELECT current_setting('is_superuser') = 'on'"


def _oid(conn: Connection, name: str) -> int:
    oid = conn.exec_driver_sql("SELECT to_regclass(%(name)s)::oid", {"name": name}).scalar()
    if oid is None:
        raise LookupError(f"no table {name!r} in this database")
    return int(oid)


@contextmanager
def foreign_keys_checked_per_load(conn: Connection, loads: Sequence[Load]) -> Iterator[None]:
    """The body's inserts into the tables of ``loads`` are not checked row by row; their
    foreign keys are checked, and the referenced rows locked, once at the end (see the
    module's docstring). In the caller's transaction, which must be open. If the body
    fails, nothing is done: the caller's rollback ends the setting with the rest."""
    if not loads or conn.dialect.name != "postgresql":
        yield
        return
    reason = row_checks_needed(conn, [load.table for load in loads])
    if reason is not None:
        if reason not in _told:  # once per process and reason: it holds until changed
            _told.add(reason)
            log.info("large loads keep PostgreSQL's per-row foreign-key checks: %s", reason)
        yield
        return
    previous = conn.exec_driver_sql(f"SELECT current_setting('{ROLE_SETTING}')").scalar()
    conn.exec_driver_sql(f"SELECT set_config('{ROLE_SETTING}', 'replica', true)")
    yield
    conn.exec_driver_sql(
        f"SELECT set_config('{ROLE_SETTING}', %(previous)s, true)", {"previous": previous}
    )
    firsts = {load.table.name: load.first_id for load in loads}
    for load in loads:
        _check_load(conn, load, firsts)


def _check_load(conn: Connection, load: Load, firsts: dict[str, int]) -> None:
    table = load.table.name
    constraints = sorted(
        load.table.foreign_key_constraints, key=lambda fk: [c.name for c in fk.columns]
    )
    for fk in constraints:
        columns = [column.name for column in fk.columns]
        target = fk.referred_table.name
        keys = [element.column.name for element in fk.elements]
        # MATCH SIMPLE, PostgreSQL's default: a row with any of the columns null is not
        # checked
        loaded = " AND ".join(
            [f"c.{load.key} >= %(first)s", *(f"c.{column} IS NOT NULL" for column in columns)]
        )
        listed = ", ".join(f"c.{column}" for column in columns)
        to_lock, params = loaded, {"first": load.first_id}
        if target in firsts and keys == ["id"]:  # rows this transaction inserted: no lock
            to_lock += f" AND c.{columns[0]} < %(target_first)s"
            params["target_first"] = firsts[target]
        conn.exec_driver_sql(
            f"SELECT 1 FROM {target} AS r WHERE ({', '.join(f'r.{k}' for k in keys)}) IN "
            f"(SELECT DISTINCT {listed} FROM {table} AS c WHERE {to_lock}) FOR KEY SHARE OF r",
            params,
        )
        matches = " AND ".join(f"r.{k} = c.{c}" for k, c in zip(keys, columns, strict=True))
        missing = conn.exec_driver_sql(
            f"SELECT DISTINCT {listed} FROM {table} AS c WHERE {loaded} "
            f"AND NOT EXISTS (SELECT 1 FROM {target} AS r WHERE {matches}) LIMIT 3",
            {"first": load.first_id},
        ).all()
        if missing:
            shown = ", ".join(repr(row[0] if len(row) == 1 else tuple(row)) for row in missing)
            named = ", ".join(columns) if len(columns) == 1 else f"({', '.join(columns)})"
            raise BrokenReference(
                f"{table}.{named} refers to no {target}.{', '.join(keys)}: {shown} "
                f"(rows loaded from id {load.first_id} on; nothing was committed)"
            )
