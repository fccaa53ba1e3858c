"""``column IN (values)`` written for the database that runs it.

SQLAlchemy writes an ``IN`` list as one bound parameter per value, rendered into the
statement at each execution. On PostgreSQL that costs every call on a page of offers:
the statement's text is different for each count of ids (so psycopg converts it again and
never prepares it: texts past its cache's length are not cached), and SQLAlchemy renders
the list's hundred parameters each time. ``= ANY(%(ids)s::INTEGER[])`` is one parameter,
one text whatever the count, converted once and prepared by the driver after its fifth
use (docs/benchmarks.md, "History at scale", sixth round). SQLite keeps the ``IN`` list: it has
no arrays, and its statements are prepared from the text anyway.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, any_, bindparam
from sqlalchemy.dialects.postgresql import ARRAY


def among(column: ColumnElement[Any], values: Collection[Any], dialect: str) -> ColumnElement[bool]:
    """``column`` is one of ``values``: ``= ANY(array)`` on PostgreSQL, ``IN (...)``
    elsewhere."""
    if dialect == "postgresql":
        return column == any_(bindparam(None, list(values), type_=ARRAY(column.type)))
    return column.in_(values)
