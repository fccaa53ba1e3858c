"""Opaque cursors: base64url JSON that clients pass back unchanged.

Nothing stops a client from editing one, so every field read from a cursor is checked
here before it reaches a statement: a cursor this server did not issue is a 400, never a
500 (a list where a number goes, NaN, an integer no database column holds).
"""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

import orjson

from service.api.problems import Problem

MAX_INTEGER = 2**63 - 1
"""The largest integer a cursor may carry: what SQLite's INTEGER and a bigint hold."""
NOT_ISSUED = "not a cursor this server issued"


def encode(state: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(state)).decode().rstrip("=")


def invalid(reason: str = NOT_ISSUED) -> Problem:
    return Problem(
        400,
        "Invalid cursor",
        reason,
        kind="invalid-cursor",
        invalid_params=[{"name": "cursor", "reason": reason}],
    )


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


def integer(value: Any, high: int = MAX_INTEGER) -> int:
    """``value`` when it is an integer (not a boolean) from 0 to ``high``; a 400 otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise invalid()
    return value


def number(value: Any) -> Decimal:
    """``value`` (a JSON number or a decimal string) as a finite decimal no larger in
    magnitude than :data:`MAX_INTEGER` (every sort key is); a 400 otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise invalid()
    try:
        result = Decimal(str(value))
    except ArithmeticError:
        raise invalid() from None
    if not result.is_finite() or abs(result) > MAX_INTEGER:
        raise invalid()
    return result
