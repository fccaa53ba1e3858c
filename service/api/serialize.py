"""Query rows -> public API bodies."""

from __future__ import annotations

from typing import Any

from schema.api import Money, ObservationPublic, OfferPublic


def offer_public(row: dict[str, Any]) -> OfferPublic:
    hourly = row.get("hourly_amount")
    return OfferPublic(
        id=row["id"],
        provider=row["provider"],
        source=row["source"],
        sku=row["sku"],
        region=row["region"],
        country=row["country"],
        gpu=row["gpu_slug"],
        gpu_name_raw=row["gpu_name_raw"],
        gpu_count=row["gpu_count"],
        vcpus=row["vcpus"],
        memory_gb=row["memory_gb"],
        bare_metal=row["bare_metal"],
        price_kind=row["price_kind"],
        unit=row["unit"],
        price_per=row["price_per"],
        price=Money(amount=row["amount"], currency=row["currency"]),
        price_is_floor=bool(row["price_floor"]),
        hourly_price=Money(amount=hourly, currency=row["currency"]) if hourly is not None else None,
        price_per_gpu_hour_usd=row["gpu_hour_usd"],
        price_usd=row["amount_usd"],
        fx_rate_usd=row["fx_rate"],
        fx_date=row["fx_date"],
        status=row["status"],
        first_seen=row["first_seen_at"],
        last_changed=row["last_changed_at"],
        source_url=row["source_url"],
        crawl_run_id=row["crawl_run_id"],
        raw_payload_sha256=row["raw_sha256"],
        catalog_version=row["version_from"],
    )


def observation_public(row: dict[str, Any]) -> ObservationPublic:
    return ObservationPublic(
        id=row["id"],
        amount=row["amount"],
        currency=row["currency"],
        price_per_gpu_hour_usd=row["gpu_hour_usd"],
        price_usd=row["amount_usd"],
        fx_rate_usd=row["fx_rate"],
        fx_date=row["fx_date"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        version_from=row["version_from"],
        version_to=row["version_to"],
        crawl_run_id=row["crawl_run_id"],
        raw_payload_sha256=row["raw_sha256"],
    )
