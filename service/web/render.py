"""The Jinja2 environment (autoescape always on) and the filters the templates use."""

from __future__ import annotations

from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from jinja2 import Environment, FileSystemLoader, StrictUndefined

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
DASH = "—"


def decimal_text(value: Any, places: int | None = None) -> str:
    """An exact decimal as text: at most ``places`` decimals (rounded half-even), no floats."""
    if value is None:
        return DASH
    number = value if isinstance(value, Decimal) else Decimal(str(value))
    if places is not None:
        number = number.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)
    text = format(number.normalize() if places is None else number, "f")
    if "." in text and places is None:
        text = text.rstrip("0").rstrip(".")
    return text


def money_text(value: Any) -> str:
    """A price: at least two decimals, at most the ten every stored figure keeps."""
    if value is None:
        return DASH
    number = value if isinstance(value, Decimal) else Decimal(str(value))
    text = format(number.normalize(), "f")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(2, '0')}"


def time_text(value: datetime | date | None) -> str:
    if value is None:
        return DASH
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M UTC")
    return value.isoformat()


def web_url(value: str | None) -> str | None:
    """``value`` when it is an http(s) URL, else None (never a javascript: link)."""
    if not value:
        return None
    try:
        scheme = urlsplit(value).scheme.lower()
    except ValueError:
        return None
    return value if scheme in ("http", "https") else None


def path_part(value: Any) -> str:
    """A path segment, percent-encoded (slashes too)."""
    return quote(str(value), safe="")


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        dec=decimal_text, money=money_text, when=time_text, web_url=web_url, seg=path_part
    )
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
