"""API keys, alert subscriptions and the alert outbox."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic import Field as PydField
from sqlalchemy import JSON
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401
from schema.codes import iso_country
from schema.compliance import CERT_SCHEMES, CertScheme
from schema.enums import PriceKind
from schema.text import plain_text
from schema.types import UTCDateTime, within_scale


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_key"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    prefix: str = Field(max_length=16, index=True)
    key_hash: str = Field(max_length=128, unique=True)
    created_at: datetime = Field(sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class Subscription(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    api_key_id: int = Field(foreign_key="api_key.id", index=True)
    name: str | None = Field(default=None, max_length=200)
    filters: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    condition: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    channel: str = Field(max_length=16)
    url: str | None = Field(default=None, max_length=2048)
    secret: str | None = Field(default=None, max_length=128)
    created_at: datetime = Field(sa_type=UTCDateTime)
    deleted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class AlertEvent(SQLModel, table=True):
    __tablename__ = "alert_event"

    id: int | None = Field(default=None, primary_key=True)
    subscription_id: int = Field(foreign_key="subscription.id", index=True)
    catalog_version: int = Field(index=True)
    event_type: str = Field(max_length=32)
    offer_id: int | None = None
    payload: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    idempotency_key: str = Field(max_length=100, unique=True)
    status: str = Field(default="pending", max_length=16, index=True)
    attempts: int = 0
    next_attempt_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_error: str | None = Field(default=None, max_length=2000)
    created_at: datetime = Field(sa_type=UTCDateTime)
    delivered_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    claimed_by: str | None = Field(
        default=None, max_length=200, description="host:pid:start of the dispatcher holding it"
    )


# --------------------------------------------------------------------------- API bodies


class EventType(StrEnum):
    price_drop = "price_drop"
    price_rise = "price_rise"
    below = "below"
    above = "above"
    new_offer = "new_offer"
    withdrawn = "withdrawn"
    cert_gained = "cert_gained"
    cert_lost = "cert_lost"


class EventStatus(StrEnum):
    pending = "pending"
    delivered = "delivered"
    dead = "dead"


class Channel(StrEnum):
    webhook = "webhook"
    atom = "atom"


Slug = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
Country = Annotated[str, StringConstraints(pattern=r"^[A-Za-z]{2}$")]
Count = Annotated[Decimal, PydField(ge=0, le=1024), AfterValidator(within_scale)]
Usd = Annotated[Decimal, PydField(gt=0, le=1_000_000), AfterValidator(within_scale)]
Pct = Annotated[Decimal, PydField(gt=0, le=1000), AfterValidator(within_scale)]

CertWatch = Literal[True] | CertScheme
CERT_CONDITIONS = ("cert_gained", "cert_lost")


class SubscriptionFilters(BaseModel):
    """The subset of the ``/v1/offers`` filters an alert can watch (same names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: Slug | None = PydField(default=None, description="canonical slug or family, e.g. h100")
    provider: Slug | None = None
    source: Slug | None = None
    region: (
        Annotated[str, StringConstraints(min_length=1, max_length=100), AfterValidator(plain_text)]
        | None
    ) = None
    country: Country | None = None
    not_country: Country | None = None
    price_kind: PriceKind | None = None
    min_gpus: Count | None = None
    max_gpus: Count | None = None
    min_gpu_memory_gb: Count | None = None
    bare_metal: bool | None = None
    max_price_per_gpu_hour: Usd | None = PydField(default=None, description="USD")

    @field_validator("country", "not_country")
    @classmethod
    def _country(cls, value: str | None) -> str | None:
        """Upper-cased, and a country's: a code no country has would never match."""
        return iso_country(value) if value else value

    @field_validator("gpu")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return value.lower() if value else value

    @model_validator(mode="after")
    def _ranges(self) -> SubscriptionFilters:
        low, high = self.min_gpus, self.max_gpus
        if low is not None and high is not None and low > high:
            raise ValueError("min_gpus is greater than max_gpus")
        return self


class Condition(BaseModel):
    """Exactly one of these: when an event is raised for a matching offer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    price_drop_pct: Pct | None = PydField(default=None, description="price fell by at least X %")
    price_rise_pct: Pct | None = PydField(default=None, description="price rose by at least X %")
    below_usd_per_gpu_hour: Usd | None = PydField(
        default=None, description="price per GPU-hour (USD) went below X (or a new offer is)"
    )
    above_usd_per_gpu_hour: Usd | None = PydField(
        default=None, description="price per GPU-hour (USD) went above X (or a new offer is)"
    )
    new_offer: Literal[True] | None = PydField(
        default=None, description="a matching offer appeared"
    )
    withdrawn: Literal[True] | None = PydField(default=None, description="a matching offer is gone")
    cert_gained: CertWatch | None = PydField(
        default=None,
        description="the provider now holds this certification (a scheme such as iso27001, "
        "or true for any scheme)",
    )
    cert_lost: CertWatch | None = PydField(
        default=None,
        description="the provider no longer holds this certification (a scheme, or true for any)",
    )

    @field_validator("cert_gained", "cert_lost", mode="before")
    @classmethod
    def _known_scheme(cls, value: Any) -> Any:
        if value is None or value is True:
            return value
        if isinstance(value, str) and value.strip().lower() in CERT_SCHEMES:
            return value.strip().lower()
        raise ValueError(
            f"unknown certification {str(value)[:64]!r}: give true (any) or one of "
            + ", ".join(CERT_SCHEMES)
        )

    @model_validator(mode="after")
    def _exactly_one(self) -> Condition:
        given = [name for name, value in self if value is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of price_drop_pct, price_rise_pct, below_usd_per_gpu_hour, "
                "above_usd_per_gpu_hour, new_offer, withdrawn, cert_gained, cert_lost "
                f"(got {len(given)})"
            )
        return self

    @property
    def kind(self) -> str:
        return next(name for name, value in self if value is not None)

    @property
    def threshold(self) -> Decimal | None:
        value = getattr(self, self.kind)
        return value if isinstance(value, Decimal) else None

    @property
    def scheme(self) -> str | None:
        """The certification scheme a cert condition watches (None: any scheme)."""
        value = getattr(self, self.kind)
        return value if isinstance(value, str) else None


class SubscriptionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(max_length=200), AfterValidator(plain_text)] | None = (
        None
    )
    filters: SubscriptionFilters = PydField(default_factory=SubscriptionFilters)
    condition: Condition
    channel: Channel
    url: Annotated[str, StringConstraints(min_length=1, max_length=2048)] | None = PydField(
        default=None, description="webhook target (http or https); only for the webhook channel"
    )

    @model_validator(mode="after")
    def _url_for_webhooks(self) -> SubscriptionCreate:
        if self.channel == Channel.webhook and not self.url:
            raise ValueError("a webhook subscription needs a url")
        if self.channel == Channel.atom and self.url:
            raise ValueError("an atom subscription takes no url")
        return self


class SubscriptionPublic(BaseModel):
    id: int
    name: str | None
    filters: dict[str, Any]
    condition: dict[str, Any]
    channel: str
    url: str | None
    feed_url: str
    created_at: datetime


class SubscriptionCreated(SubscriptionPublic):
    secret: str = PydField(
        description="shown once: HMAC key of webhook signatures and token of the Atom feed"
    )


class AlertEventPublic(BaseModel):
    id: int
    subscription_id: int
    catalog_version: int
    event_type: str
    offer_id: int | None
    idempotency_key: str
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None
    payload: dict[str, Any]
