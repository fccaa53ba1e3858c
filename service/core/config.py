"""The one Settings object. Nothing else reads the environment."""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as PydanticSettingsError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = PROJECT_ROOT / "fixtures"
REFERENCE_DIR = FIXTURES_DIR / "reference"
MIGRATIONS_DIR = PROJECT_ROOT / "migrations"

_PLACEHOLDER_SECRETS = {"", "changeme", "change-me", "secret", "development"}


class Settings(BaseSettings):
    """Configuration from ``GPUATLAS_*`` environment variables (or a ``.env`` file)."""

    model_config = SettingsConfigDict(
        env_prefix="GPUATLAS_", env_file=".env", extra="ignore", frozen=True
    )

    environment: Literal["development", "test", "production"] = "development"
    database_url: str = "sqlite:///./gpuatlas.db"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    scheduler_enabled: bool = True
    scheduler_poll_seconds: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="PostgreSQL: how often a waiting scheduler tries to become the leader, "
        "and how often the leader checks its lock's connection",
    )
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="API worker processes; with more than one, /metrics adds up every "
        "worker's counts (prometheus-client's multiprocess mode)",
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="json: one JSON object per log line, each with the request_id of the "
        "request being served",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    schedules: dict[str, str] = Field(
        default_factory=dict,
        description='per-source interval override (JSON), e.g. {"vastai": "10m", "aws": "off"}',
    )
    compact_schedule: str | None = Field(
        default="30 3 * * sun",
        description="when the scheduler compacts the database (crontab, UTC; 'off' never): "
        "SQLite VACUUM, PostgreSQL VACUUM (ANALYZE), as `gpuatlas db compact`",
    )
    secret_key: str = "development"  # noqa: S105 (refused outside development)

    # ingest plausibility guard
    min_offer_ratio: Decimal = Field(
        default=Decimal("0.5"),
        ge=0,
        le=1,
        description="quarantine a crawl with fewer offers than this share of the last good one",
    )
    max_price_factor: Decimal = Field(
        default=Decimal("10"),
        gt=1,
        description="quarantine a crawl where a price moves by more than this factor",
    )
    min_offers_for_ratio_check: int = Field(default=5, ge=0)

    # query service
    response_cache_mb: int = Field(
        default=64,
        ge=0,
        le=65536,
        description="memory for answers of read endpoints kept until the database changes "
        "(per API process; 0 turns the cache off)",
    )

    # crawling
    user_agent: str = "gpuatlas/0.1 (+https://github.com/gpuatlas/gpuatlas; data@gpuatlas.dev)"
    http_timeout_seconds: float = Field(default=30.0, gt=0)
    http_max_retries: int = Field(default=4, ge=0, le=20)
    http_backoff_seconds: float = Field(
        default=0.5, ge=0, le=60, description="first retry's wait, doubled each retry (jittered)"
    )
    http_max_pages: int = Field(default=2000, ge=1)
    http_max_bytes: int = Field(default=2 * 1024**3, ge=1024)
    crawl_timeout_seconds: float = Field(default=1800.0, gt=0)

    source_base_urls: dict[str, str] = Field(
        default_factory=dict,
        description="per-source base URL override (JSON), e.g. a local replay server",
    )

    # credentials of the sources that need one (a missing one skips that source)
    cudo_api_key: str | None = None
    gcp_api_key: str | None = None
    lambda_api_key: str | None = None
    runpod_api_key: str | None = None
    vastai_api_key: str | None = None
    # key pairs: an ID names the key, its secret signs each request
    alibaba_access_key_id: str | None = None
    alibaba_access_key_secret: str | None = None
    tencent_secret_id: str | None = None
    tencent_secret_key: str | None = None
    huawei_access_key_id: str | None = None
    huawei_secret_access_key: str | None = None
    huawei_project_id: str | None = None
    """Any valid project ID of the Huawei Cloud account (the price API requires one)."""

    # compliance
    reference_stale_days: int = Field(default=180, ge=1)

    # alerts
    allow_private_webhooks: bool = False
    webhook_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="whole delivery attempt, connect to last byte"
    )
    webhook_concurrency: int = Field(default=16, ge=1, le=256)
    webhook_retry_base_seconds: float = Field(default=30.0, gt=0)
    webhook_retry_max_seconds: float = Field(default=3600.0, gt=0, description="longest backoff")
    webhook_retry_window_hours: float = Field(
        default=24.0, gt=0, description="after this long undelivered, an event is dead-lettered"
    )
    dispatcher_interval_seconds: int = Field(default=5, ge=1)
    dispatcher_batch_size: int = Field(default=500, ge=1, le=10000)

    @field_validator("compact_schedule")
    @classmethod
    def _crontab(cls, value: str | None) -> str | None:
        from apscheduler.triggers.cron import CronTrigger

        if value is None or value.strip().lower() in ("", "off", "never"):
            return None
        value = " ".join(value.split())
        try:
            CronTrigger.from_crontab(value, timezone="UTC")
        except ValueError as exc:
            raise ValueError(
                f"GPUATLAS_COMPACT_SCHEDULE is not a crontab of five fields "
                f"(minute hour day month weekday), nor 'off': {value!r} ({exc})"
            ) from None
        return value

    @field_validator("database_url")
    @classmethod
    def _url_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("GPUATLAS_DATABASE_URL is empty")
        return value.strip()

    @model_validator(mode="after")
    def _no_placeholder_secrets(self) -> Settings:
        if self.environment == "production" and self.secret_key.lower() in _PLACEHOLDER_SECRETS:
            raise ValueError(
                "GPUATLAS_SECRET_KEY is a development placeholder; set a real secret in production"
            )
        return self

    def credential(self, name: str) -> str | None:
        value = getattr(self, name, None)
        return value or None


class SettingsError(ValueError):
    """A setting in the environment (or ``.env``) that is not valid."""


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings; :class:`SettingsError` names each invalid variable (never
    its value: a URL or a key may hold a secret)."""
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(describe_settings_error(exc)) from None
    except PydanticSettingsError as exc:  # a value pydantic-settings could not decode
        found = re.search(r'field "([^"]+)"', str(exc))
        prefix = Settings.model_config.get("env_prefix", "")
        name = f"{prefix}{found.group(1).upper()}" if found else "a variable"
        raise SettingsError(
            f"invalid settings: {name}: not valid JSON (lists and mappings are written as JSON)"
        ) from None


def describe_settings_error(error: ValidationError) -> str:
    """``invalid settings: GPUATLAS_CRAWL_TIMEOUT_SECONDS: Input should be greater than 0``."""
    prefix = Settings.model_config.get("env_prefix", "")
    parts = []
    for item in error.errors(include_url=False, include_input=False):
        message = str(item["msg"]).removeprefix("Value error, ")
        if not item["loc"]:  # a check of several settings together: it names them
            parts.append(message)
            continue
        field, *inside = item["loc"]
        name = f"{prefix}{str(field).upper()}" + "".join(f"[{p}]" for p in inside)
        parts.append(f"{name}: {message}")
    return "invalid settings: " + "; ".join(parts)
