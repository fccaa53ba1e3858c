"""Query rows -> public API bodies.

Most endpoints build pydantic models and let FastAPI validate and serialize them. The
offer listing (up to 1,000 offers of ~45 fields each) is the hot path: :func:`offer_json`
builds the same body as plain dicts, in the models' field order, and :func:`dumps` writes
it as pydantic's JSON mode would (decimals as ``str(value)``, aware UTC times ending in
``Z``), several times faster. The route keeps ``response_model`` for the OpenAPI schema;
tests check the plain body validates against the models and serializes identically.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from schema.api import (
    ExportControlSummary,
    ObservationPublic,
)
from service.core.units import q
from service.query.cluster import cluster_json
from service.query.facts import OfferContext


def _money(amount: Decimal | None, currency: str) -> dict[str, Any] | None:
    return None if amount is None else {"amount": amount, "currency": currency}


def _offer_json(row: dict[str, Any], gpu_names: dict[str, str]) -> dict[str, Any]:
    """``OfferPublic`` as a plain dict (same keys, same order, same values as its dump)."""
    currency = row["currency"]
    gpu = row["gpu_slug"]
    return {
        "id": row["id"],
        "provider": row["provider"],
        "source": row["source"],
        "sku": row["sku"],
        "region": row["region"],
        "country": row["country"],
        "gpu": gpu,
        "gpu_name": gpu_names.get(gpu) if gpu else None,
        "gpu_name_raw": row["gpu_name_raw"],
        "gpu_inferred": bool(row["gpu_inferred"]),
        "gpu_count": row["gpu_count"],
        "vcpus": row["vcpus"],
        "memory_gb": row["memory_gb"],
        "bare_metal": row["bare_metal"],
        "price_kind": row["price_kind"],
        "unit": row["unit"],
        "price_per": row["price_per"],
        "price": {"amount": row["amount"], "currency": currency},
        "price_is_floor": bool(row["price_floor"]),
        "price_includes_tax": row.get("tax_included"),
        "hourly_price": _money(row.get("hourly_amount"), currency),
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
        "raw_payload_url": row["raw_url"],
        "catalog_version": row["version_from"],
        "location_region": row.get("location_region"),
        "locations": [
            {"region": loc["region"], "country": loc["country"], "basis": loc["basis"]}
            for loc in row.get("locations", ())
        ],
        **cluster_json(row),
    }


EXPORT_NOTE = ExportControlSummary.model_fields["note"].default


def offer_json(
    row: dict[str, Any],
    ctx: OfferContext,
    display: tuple[str, Decimal] | None = None,
    also: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``OfferDetail`` as a plain dict, for :func:`dumps` (see the module docstring)."""
    out = _offer_json(row, ctx.gpu_names)
    gpu = row["gpu_slug"]
    region = ctx.regions.get((row["provider"], row["region"]))
    export = ctx.export_control.get(gpu) if gpu else None
    out["price_per_pflop_hour_usd"] = per_pflop_hour(row, ctx.tflops_bf16.get(gpu) if gpu else None)
    out["region_info"] = (
        {k: region[k] for k in ("code", "name", "city", "province", "country")} if region else None
    )
    out["certifications"] = [
        {"scheme": c["scheme"], "valid_to": c["valid_to"], "regions": c["regions"]}
        for c in ctx.certifications.get(row["provider"], ())
    ]
    out["export_control"] = (
        {"eccn": export["eccn"], "basis": export["basis"], "note": EXPORT_NOTE} if export else None
    )
    out["last_confirmed"] = ctx.last_confirmed.get(row["source"])
    out["display_price"] = out["display_price_per_gpu_hour"] = None
    if display is not None:
        currency, per_usd = display
        if row["amount_usd"] is not None:
            out["display_price"] = _money(q(row["amount_usd"] * per_usd), currency)
        if row["gpu_hour_usd"] is not None:
            out["display_price_per_gpu_hour"] = _money(q(row["gpu_hour_usd"] * per_usd), currency)
    out["also_from"] = also or []
    return out


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)  # what pydantic writes for a Decimal in JSON mode
    raise TypeError(f"cannot serialize {type(value).__name__}")


def dumps(value: Any) -> bytes:
    """JSON as FastAPI/pydantic would write it for the same (validated) values."""
    return orjson.dumps(value, default=_json_default, option=orjson.OPT_UTC_Z)


def eligible_json(
    rows: list[dict[str, Any]],
    gpu_names: dict[str, str],
    version: int,
    reasons: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """``EligibleProviders`` as plain values: one row per provider with its cheapest offer,
    and (``reasons`` given: ``explain``) why every other provider is out. The API route and
    ``gpuatlas eligible --format json|jsonl|csv`` both write this."""
    return {
        "catalog_version": version,
        "data": [
            {
                "provider": r["provider"],
                "offer_count": r["offer_count"],
                "cheapest": _offer_json(r, gpu_names),
            }
            for r in rows
        ],
        "excluded": None
        if reasons is None
        else [{"provider": p, "reasons": why} for p, why in sorted(reasons.items())],
    }


def per_pflop_hour(row: dict[str, Any], tflops: Decimal | None) -> Decimal | None:
    per_gpu = row.get("gpu_hour_usd")
    if per_gpu is None or not tflops:
        return None
    return q(per_gpu * 1000 / tflops)


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
        raw_payload_url=row["raw_url"],
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
