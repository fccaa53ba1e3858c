"""API keys on write endpoints: ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from service.alerts.keys import verify_api_key
from service.api.deps import get_engine
from service.api.problems import Problem


def presented_key(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header:
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return request.headers.get("x-api-key") or None


def require_api_key(request: Request, engine: Annotated[Engine, Depends(get_engine)]) -> int:
    """The id of the caller's API key; 401 problem when missing, unknown or revoked."""
    key = presented_key(request)
    if not key:
        raise Problem(
            401,
            "Unauthorized",
            "this endpoint needs an API key: Authorization: Bearer <key> or X-API-Key",
            kind="unauthorized",
        )
    with engine.connect() as conn:
        key_id = verify_api_key(conn, key)
    if key_id is None:
        raise Problem(401, "Unauthorized", "unknown or revoked API key", kind="unauthorized")
    return key_id


ApiKeyDep = Annotated[int, Depends(require_api_key)]
