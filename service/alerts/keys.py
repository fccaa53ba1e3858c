"""API keys: random, shown once, stored as a SHA-256 hash; looked up by a short prefix."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, insert, select, update

from schema.alerts import ApiKey
from schema.types import utcnow
from service.core.db import writer

API_KEY = ApiKey.__table__  # type: ignore[attr-defined]
KEY_MARK = "gpa"
PREFIX_LENGTH = 12


@dataclass(frozen=True)
class NewKey:
    id: int
    name: str
    prefix: str
    key: str
    """The only time the full key exists outside the client."""
    created_at: datetime


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_api_key(engine: Engine, name: str) -> NewKey:
    name = name.strip()
    if not name or len(name) > 200:
        raise ValueError("an API key needs a name of 1 to 200 characters")
    prefix = f"{KEY_MARK}_{secrets.token_hex(4)}"
    key = f"{prefix}_{secrets.token_urlsafe(32)}"
    now = utcnow()
    with writer(engine).begin() as conn:
        result = conn.execute(
            insert(API_KEY).values(name=name, prefix=prefix, key_hash=hash_key(key), created_at=now)
        )
        key_id = int(result.inserted_primary_key[0])  # type: ignore[index]
    return NewKey(key_id, name, prefix, key, now)


def revoke_api_key(engine: Engine, prefix: str) -> bool:
    with writer(engine).begin() as conn:
        result = conn.execute(
            update(API_KEY)
            .where(API_KEY.c.prefix == prefix, API_KEY.c.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
        return bool(result.rowcount)


def verify_api_key(conn: Connection, key: str) -> int | None:
    """The id of the live key ``key``, or None (constant-time hash comparison)."""
    if not key.startswith(f"{KEY_MARK}_") or len(key) > 200:
        return None
    prefix = key[:PREFIX_LENGTH]
    digest = hash_key(key)
    rows = conn.execute(
        select(API_KEY.c.id, API_KEY.c.key_hash).where(
            API_KEY.c.prefix == prefix, API_KEY.c.revoked_at.is_(None)
        )
    ).all()
    for key_id, stored in rows:
        if hmac.compare_digest(stored, digest):
            return int(key_id)
    return None


def list_api_keys(conn: Connection) -> list[dict[str, object]]:
    stmt = select(
        API_KEY.c.id, API_KEY.c.name, API_KEY.c.prefix, API_KEY.c.created_at, API_KEY.c.revoked_at
    ).order_by(API_KEY.c.id)
    return [dict(row) for row in conn.execute(stmt).mappings()]
