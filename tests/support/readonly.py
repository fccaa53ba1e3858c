"""Proof that tests sharing one database (a module-scoped fixture) only read it: a
fingerprint of every table's rows before and after them must match."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, inspect, text


def fingerprint(engine: Engine) -> dict[str, str]:
    """Each table's hash of its rows (sorted, so row order does not matter)."""
    names = sorted(inspect(engine).get_table_names())  # tables only: no index reflection
    hashes = {}
    with engine.connect() as conn:
        for name in names:
            rows = sorted(repr(tuple(row)) for row in conn.execute(text(f'SELECT * FROM "{name}"')))
            digest = hashlib.sha256(f"{len(rows)}\n".encode())
            for row in rows:
                digest.update(row.encode())
            hashes[name] = digest.hexdigest()
    return hashes


@contextmanager
def unchanged(engine: Engine) -> Iterator[None]:
    """The body (the module's tests) must leave the database as it found it."""
    before = fingerprint(engine)
    yield
    after = fingerprint(engine)
    changed = sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )
    assert not changed, f"a test of this module wrote to its shared database: {changed}"
