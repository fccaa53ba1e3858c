"""The Jinja2 environment (autoescape always on) and the filters the templates use."""

from __future__ import annotations

from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from service.web.words import price_kind_label

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


def _number(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def gpu_hour_text(value: Any) -> str:
    """A price per GPU-hour for people: 4 significant digits (0.03265, 2.500, 12.35)."""
    if value is None:
        return DASH
    number = _number(value)
    if not number:
        return "0.00"
    exponent = number.adjusted() - 3
    rounded = number.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_EVEN)
    if rounded.adjusted() > number.adjusted():  # 99.995 -> 100.0, not 100.00
        rounded = rounded.quantize(Decimal(1).scaleb(exponent + 1), rounding=ROUND_HALF_EVEN)
    return format(rounded, ",f")


def instance_hour_text(value: Any) -> str:
    """A price per instance-hour (or a quoted amount) for people: 2 decimals."""
    if value is None:
        return DASH
    return format(_number(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN), ",f")


def quoted_text(value: Any) -> str:
    """A quoted amount: 2 decimals from 1 up, else 4 significant digits (0.0002 USD/s)."""
    if value is None:
        return DASH
    number = _number(value)
    return instance_hour_text(number) if abs(number) >= 1 else gpu_hour_text(number)


def exact_text(value: Any) -> str:
    """The exact decimal (for a title attribute): every stored digit, no exponent."""
    if value is None:
        return ""
    return format(_number(value).normalize(), "f")


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
        dec=decimal_text,
        money=money_text,
        gpuh=gpu_hour_text,
        insth=instance_hour_text,
        quoted=quoted_text,
        exact=exact_text,
        kind=price_kind_label,
        when=time_text,
        web_url=web_url,
        seg=path_part,
    )
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
