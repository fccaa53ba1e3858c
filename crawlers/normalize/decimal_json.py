"""JSON payloads read with exact numbers: a number with a fraction becomes a Decimal.

Price APIs publish amounts as JSON numbers ("price": 2.69). Decoding them as binary
floats would lose the published value, so every API source decodes through :func:`loads`:
fractions become :class:`~decimal.Decimal` built from the number's text, integers stay
``int``, and ``NaN``/``Infinity`` are refused. Decode errors are ``ValueError``s, which
the fetch loop reports as "invalid payload".
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from crawlers.base import Response


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-finite number {name} in JSON")


def loads(body: bytes | str) -> Any:
    """Decode JSON text; fractions as Decimal, ints as int, NaN/Infinity refused."""
    return json.loads(body, parse_float=Decimal, parse_constant=_no_constants)


def response_json(response: Response) -> Any:
    """Decode a response body (in memory or spooled to a file) with :func:`loads`."""
    if response.path is not None:
        return loads(response.path.read_bytes())
    return loads(response.body)


def plain(value: Decimal | int) -> Decimal:
    """The same number without exponent or trailing zeros: 2.80000000 -> 2.8, 1.94E+3 -> 1940."""
    return Decimal(format(Decimal(value).normalize(), "f"))


def scaled(value: int | Decimal, exponent: int) -> Decimal:
    """``value`` × 10^exponent, exactly: scaled(280000000, -8) == Decimal("2.8")."""
    return plain(Decimal(value).scaleb(exponent))
