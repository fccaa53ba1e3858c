"""OfferRecord: the one interchange record every source yields and other tools may feed in.

Its file form is JSON Lines (one object a line). Amounts are decimal strings; a JSON
number is accepted only through its shortest text form, never as a binary float.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from schema.codes import country_codes, currency_codes
from schema.enums import HOURS, Interconnect, Network, PriceKind, PricePer, Unit
from schema.memo import per_text
from schema.text import plain_text
from schema.types import NUMERIC_SCALE

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
SOURCE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,40}(:[a-z0-9][a-z0-9._-]{0,40})?$")
MAX_AMOUNT = Decimal("100000000")
_SHORT_UNITS = frozenset({Unit.second, Unit.minute})
"""Billing units shorter than an hour."""
MAX_DECIMAL_PLACES = NUMERIC_SCALE
"""A number's decimal places: what the database keeps (an amount read back is the amount
written, which an unchanged re-crawl relies on)."""
_PLAIN_DECIMAL = re.compile(r"[+-]?[0-9]*\.?[0-9]*")
"""A decimal in plain notation (no exponent, no underscores): its places are the digits
after its point."""


@per_text
def _clean_text(value: str) -> str:
    return plain_text(value)


@per_text
def _to_decimal(value: Any) -> Any:
    """A finite decimal of at most :data:`MAX_DECIMAL_PLACES` places, from a decimal string,
    an int, a Decimal, or a float through its shortest text form (never a boolean); any
    other type is left to pydantic's own error.

    One function, not a before- and an after-validator: it runs for every number of every
    record (four or five a record), and the places of a plain decimal string are counted
    from its text instead of from ``Decimal.as_tuple()``."""
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > 40:
            raise ValueError("not a decimal number")
        try:
            parsed = Decimal(text)
        except InvalidOperation:
            raise ValueError(f"unparseable amount {text[:40]!r}") from None
        if not parsed.is_finite():
            raise ValueError("amount must be finite")
        if _PLAIN_DECIMAL.fullmatch(text):  # digits and a point: places read off the text
            point = text.find(".")
            if point >= 0 and len(text) - point - 1 > MAX_DECIMAL_PLACES:
                raise ValueError(f"more than {MAX_DECIMAL_PLACES} decimal places")
            return parsed
        return _bounded_places(parsed)
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, int):
        return _to_decimal(str(value))
    if isinstance(value, float):
        return _to_decimal(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError("amount must be finite")
        return _bounded_places(value)
    return value


def _bounded_places(value: Decimal) -> Decimal:
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -MAX_DECIMAL_PLACES:
        raise ValueError(f"more than {MAX_DECIMAL_PLACES} decimal places")
    return value


Dec = Annotated[Decimal, BeforeValidator(_to_decimal)]
Text = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_clean_text)]


@per_text
def _slug(value: str) -> str:
    if not SLUG_RE.match(value):
        raise ValueError("must be a lowercase slug (a-z, 0-9, '.', '_', '-')")
    return value


@per_text
def _source(value: str) -> str:
    if not SOURCE_RE.match(value):
        raise ValueError("must be a lowercase source name, optionally 'peer:provider'")
    return value


@per_text
def _country_code(value: str) -> str:
    code = value.upper()
    if code not in country_codes():
        raise ValueError(f"unknown ISO 3166-1 alpha-2 country {value[:8]!r}")
    return code


@per_text
def _currency_code(value: str) -> str:
    code = value.upper()
    if code not in currency_codes():
        raise ValueError(f"unknown ISO 4217 currency {value[:8]!r}")
    return code


class OfferRecord(BaseModel):
    """One price of one SKU in one region, as a source reports it."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    provider: str = Field(description="provider slug, e.g. 'aws'")
    source: str = Field(description="source name, e.g. 'azure' or 'skypilot:lambda'")
    sku: Text = Field(description="the provider's instance type / plan name")
    gpu_model: str | None = Field(default=None, description="canonical GPU slug, if known")
    gpu_name_raw: Text | None = Field(default=None, description="the GPU name as published")
    gpu_count: Dec = Field(gt=0, le=1024, description="GPUs per SKU; fractions allowed")
    gpu_memory_gb: Dec | None = Field(default=None, ge=0, le=100000)
    vcpus: Dec | None = Field(default=None, ge=0, le=100000)
    memory_gb: Dec | None = Field(default=None, ge=0, le=10000000)
    region: Text = Field(description="the provider's region or zone code")
    country: str | None = Field(default=None, description="ISO 3166-1 alpha-2")
    price_kind: PriceKind
    unit: Unit
    price_per: PricePer = PricePer.instance
    amount: Dec = Field(description="decimal string, in `currency` per `unit`")
    currency: str = Field(description="ISO 4217")
    source_url: str | None = Field(default=None, max_length=2048)
    bare_metal: bool | None = None
    price_floor: bool = Field(default=False, description="the page says 'from' this price")
    tax_included: bool | None = Field(
        default=None,
        description="the amount includes sales tax/VAT (true), excludes it (false), or the "
        "source does not say (null)",
    )
    interconnect: Interconnect | None = Field(
        default=None, description="what connects the GPUs inside the node, where the source says"
    )
    interconnect_gbps: Dec | None = Field(
        default=None, gt=0, le=100000, description="GB/s per GPU of that interconnect"
    )
    network: Network | None = Field(
        default=None, description="what connects the node to others, where the source says"
    )
    network_gbps: Dec | None = Field(
        default=None, gt=0, le=1000000, description="Gb/s per node of that network"
    )
    observed_at: datetime | None = None
    locations: tuple[Text, ...] | None = Field(
        default=None,
        max_length=200,
        description="region codes where the source says this SKU can be launched now (for a "
        "price quoted once for several regions); never part of the identity or the price",
    )

    @field_validator("provider")
    @classmethod
    def _provider_slug(cls, value: str) -> str:
        return _slug(value)  # type: ignore[no-any-return]

    @field_validator("source")
    @classmethod
    def _source_name(cls, value: str) -> str:
        return _source(value)  # type: ignore[no-any-return]

    @field_validator("gpu_model")
    @classmethod
    def _gpu_slug(cls, value: str | None) -> str | None:
        if value is not None and not SLUG_RE.match(value):
            raise ValueError("must be a canonical GPU slug")
        return value

    @field_validator("country")
    @classmethod
    def _country(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        return _country_code(value)  # type: ignore[no-any-return]

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        return _currency_code(value)  # type: ignore[no-any-return]

    @field_validator("amount")
    @classmethod
    def _amount(cls, value: Decimal) -> Decimal:
        if value <= 0:
            raise ValueError("price must be positive")
        if value > MAX_AMOUNT:
            raise ValueError("price is implausibly large")
        return value

    @field_validator("source_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://", "file:")):
            raise ValueError("must be an http(s) or file URL")
        return _clean_text(value)

    @field_validator("observed_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("must carry a time zone (UTC)")
        return value

    @model_validator(mode="after")
    def _whole(self) -> OfferRecord:
        if self.gpu_model is None and not self.gpu_name_raw:
            raise ValueError("either gpu_model or gpu_name_raw is required")
        # a GPU-hour can cost more than the amount only by the second or minute, or for an
        # instance of less than one GPU: the few records that need the arithmetic
        by_instance = self.price_per is PricePer.instance
        if self.unit in _SHORT_UNITS or (by_instance and self.gpu_count < 1):
            per_gpu_hour = self.amount / HOURS[self.unit]
            if by_instance:
                per_gpu_hour /= self.gpu_count
            if per_gpu_hour > MAX_AMOUNT:
                raise ValueError(
                    f"price per GPU-hour is implausibly large (over {MAX_AMOUNT:,}: "
                    "amount, unit and gpu_count together)"
                )
        return self

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """The identity of the price within its source."""
        return (self.provider, self.sku, self.region, self.price_kind, self.unit)


OFFER_RECORDS: TypeAdapter[list[OfferRecord]] = TypeAdapter(list[OfferRecord])
"""Many raw records validated in one call of pydantic-core: the same answer, record for
record, as :meth:`OfferRecord.model_validate`, without a Python call per record."""


def describe_validation_error(error: ValidationError) -> str:
    """One line naming each failing field, e.g. ``amount: price must be positive``."""
    parts = []
    for item in error.errors(include_url=False, include_input=False)[:5]:
        where = ".".join(str(p) for p in item["loc"]) or "record"
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts)
