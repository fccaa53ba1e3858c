"""Opaque cursors: base64url JSON that clients pass back unchanged."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from service.api.problems import Problem


def encode(state: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(state)).decode().rstrip("=")


def decode(cursor: str) -> dict[str, Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        state = orjson.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeEncodeError):
        state = None
    if not isinstance(state, dict):
        raise Problem(
            400,
            "Invalid cursor",
            "the cursor is not one this server issued",
            kind="invalid-cursor",
            invalid_params=[{"name": "cursor", "reason": "malformed"}],
        )
    return state
