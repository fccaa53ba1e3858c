"""Whether the database's schema is the one this code needs: the revision Alembic stored
(``alembic_version``) against the newest migration under ``migrations/versions``, read
from the files themselves (no Alembic import: every CLI command asks this)."""

from __future__ import annotations

import re
from functools import cache

from sqlalchemy import Engine, inspect, text

from service.core.config import MIGRATIONS_DIR

_REVISION = re.compile(r"^revision\s*(?::[^=]+)?=\s*['\"]([^'\"]+)['\"]", re.M)
_DOWN = re.compile(r"^down_revision\s*(?::[^=]+)?=\s*['\"]([^'\"]+)['\"]", re.M)


@cache
def head_revision() -> str:
    """The one migration no other revises (Alembic's head)."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        found = _REVISION.search(source)
        if found is None:
            continue
        revisions.add(found.group(1))
        down = _DOWN.search(source)
        if down is not None:
            revised.add(down.group(1))
    heads = revisions - revised
    if len(heads) != 1:
        raise RuntimeError(f"migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()


def stored_revision(engine: Engine) -> str | None:
    """The revision the database was migrated to (None: never migrated)."""
    if not inspect(engine).has_table("alembic_version"):
        return None
    with engine.connect() as conn:
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def unmigrated_reason(engine: Engine) -> str | None:
    """Why this code cannot use the database's schema as it is (None: it can)."""
    stored, head = stored_revision(engine), head_revision()
    if stored == head:
        return None
    if stored is None:
        return "the database is not migrated: run `gpuatlas db upgrade`"
    if stored.isdigit() and head.isdigit() and int(stored) > int(head):
        return (
            f"the database is at schema revision {stored}, newer than this gpuatlas "
            f"({head}): run the gpuatlas that migrated it, or `gpuatlas db downgrade` with it"
        )
    return (
        f"the database is at schema revision {stored} and this gpuatlas needs {head}: "
        "run `gpuatlas db upgrade`"
    )
