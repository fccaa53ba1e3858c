"""Query rows -> public API bodies."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from schema.api import (
    CertificationSummary,
    ExportControlSummary,
    Money,
    ObservationPublic,
    OfferDetail,
    OfferPublic,
    RegionInfo,
)
from service.queries import OfferContext
from service.units import q


def _offer_fields(row: dict[str, Any]) -> dict[str, Any]:
    hourly = row.get("hourly_amount")
    return {
        "id": row["id"],
        "provider": row["provider"],
        "source": row["source"],
        "sku": row["sku"],
        "region": row["region"],
        "country": row["country"],
        "gpu": row["gpu_slug"],
        "gpu_name_raw": row["gpu_name_raw"],
        "gpu_count": row["gpu_count"],
        "vcpus": row["vcpus"],
        "memory_gb": row["memory_gb"],
        "bare_metal": row["bare_metal"],
        "price_kind": row["price_kind"],
        "unit": row["unit"],
        "price_per": row["price_per"],
        "price": Money(amount=row["amount"], currency=row["currency"]),
        "price_is_floor": bool(row["price_floor"]),
        "hourly_price": Money(amount=hourly, currency=row["currency"])
        if hourly is not None
        else None,
        "price_per_gpu_hour_usd": row["gpu_hour_usd"],
        "price_usd": row["amount_usd"],
        "fx_rate_usd": row["fx_rate"],
        "fx_date": row["fx_date"],
        "status": row["status"],
        "first_seen": row["first_seen_at"],
        "last_changed": row["last_changed_at"],
        "source_url": row["source_url"],
        "crawl_run_id": row["crawl_run_id"],
        "raw_payload_sha256": row["raw_sha256"],
        "catalog_version": row["version_from"],
    }


def offer_public(row: dict[str, Any]) -> OfferPublic:
    return OfferPublic(**_offer_fields(row))


def per_pflop_hour(row: dict[str, Any], tflops: Decimal | None) -> Decimal | None:
    per_gpu = row.get("gpu_hour_usd")
    if per_gpu is None or not tflops:
        return None
    return q(per_gpu * 1000 / tflops)


def offer_detail(
    row: dict[str, Any],
    ctx: OfferContext,
    display: tuple[str, Decimal] | None = None,
) -> OfferDetail:
    """``display``: (currency, units of it per USD) for converted prices."""
    gpu = row["gpu_slug"]
    region = ctx.regions.get((row["provider"], row["region"]))
    export = ctx.export_control.get(gpu) if gpu else None
    detail = OfferDetail(
        **_offer_fields(row),
        price_per_pflop_hour_usd=per_pflop_hour(row, ctx.tflops_bf16.get(gpu) if gpu else None),
        region_info=RegionInfo(**{k: region[k] for k in ("code", "name", "city", "country")})
        if region
        else None,
        certifications=[
            CertificationSummary(**c) for c in ctx.certifications.get(row["provider"], [])
        ],
        export_control=ExportControlSummary(**export) if export else None,
        last_confirmed=ctx.last_confirmed.get(row["source"]),
    )
    if display is not None:
        currency, per_usd = display
        if row["amount_usd"] is not None:
            detail.display_price = Money(amount=q(row["amount_usd"] * per_usd), currency=currency)
        if row["gpu_hour_usd"] is not None:
            detail.display_price_per_gpu_hour = Money(
                amount=q(row["gpu_hour_usd"] * per_usd), currency=currency
            )
    return detail


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


def change_public(change: dict[str, Any]) -> dict[str, Any]:
    offer = change["offer"]
    return {
        **change,
        "offer": {
            "id": offer["id"],
            "source": offer["source"],
            "provider": offer["provider"],
            "sku": offer["sku"],
            "region": offer["region"],
            "price_kind": offer["price_kind"],
            "unit": offer["unit"],
            "gpu": offer["gpu_slug"],
            "gpu_count": offer["gpu_count"],
        },
    }
