"""Every compliance dataset with its source URLs and check dates; stale entries flagged.

An entry is stale when it was checked more than ``stale_days`` days before ``today`` or has
no check date at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

from sqlalchemy import Connection, select

from schema.catalog import GpuModel, Provider, Region
from service.compliance.certifications import certifications_on
from service.compliance.countries import membership_rows
from service.compliance.queries import CLASSIFICATION, RULE_SET
from service.compliance.versioning import all_versions, rows_on

PROVIDER = Provider.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]


def _urls(value: str | None) -> list[str]:
    return [u.strip() for u in (value or "").split(" ; ") if u.strip()]


def _entry(
    key: str, urls: list[str], checked: date | None, today: date, days: int
) -> dict[str, Any]:
    stale = checked is None or (today - checked).days > days
    return {"key": key, "source_urls": urls, "checked": checked, "stale": stale}


def _dataset(
    name: str, file: str, description: str, entries: Iterable[dict[str, Any]]
) -> dict[str, Any]:
    items = list(entries)
    checks = [e["checked"] for e in items if e["checked"] is not None]
    return {
        "name": name,
        "file": f"fixtures/reference/{file}",
        "description": description,
        "rows": len(items),
        "stale_rows": sum(1 for e in items if e["stale"]),
        "oldest_check": min(checks) if checks else None,
        "newest_check": max(checks) if checks else None,
        "entries": items,
    }


def compliance_sources(conn: Connection, today: date, stale_days: int) -> dict[str, Any]:
    def entry(key: str, urls: list[str], checked: date | None) -> dict[str, Any]:
        return _entry(key, urls, checked, today, stale_days)

    certs = certifications_on(conn, today)
    memberships = membership_rows(conn, today)
    lists: dict[str, dict[str, Any]] = {}
    for m in memberships:
        key = str(m["list"])
        urls = _urls(str(m["source_url"]))
        current = lists.get(key)
        checked = m["checked"]
        if current is None:
            lists[key] = {"urls": urls, "checked": checked}
        else:
            current["urls"] = sorted(set(current["urls"]) | set(urls))
            if checked is not None and (current["checked"] is None or checked < current["checked"]):
                current["checked"] = checked  # a list is as old as its oldest member
    rule_sets = rows_on(all_versions(conn, RULE_SET), lambda r: r["slug"], today)
    classifications = rows_on(
        all_versions(conn, CLASSIFICATION),
        lambda r: (r["gpu_slug"], r["basis"], r["effective_from"]),
        today,
    )
    providers = conn.execute(
        select(PROVIDER.c.slug, PROVIDER.c.source_url, PROVIDER.c.checked).order_by(PROVIDER.c.slug)
    ).all()
    regions = conn.execute(
        select(REGION.c.provider, REGION.c.code, REGION.c.source_url, REGION.c.checked).order_by(
            REGION.c.provider, REGION.c.code
        )
    ).all()
    gpus = conn.execute(
        select(GPU.c.slug, GPU.c.source_url, GPU.c.checked).order_by(GPU.c.slug)
    ).all()
    datasets = [
        _dataset(
            "certifications",
            "certifications.yaml",
            "provider certifications with status, scope and evidence",
            (entry(f"{c.provider}/{c.scheme}", _urls(c.evidence_url), c.checked) for c in certs),
        ),
        _dataset(
            "country_lists",
            "countries.yaml",
            "EU/EEA membership, EU adequacy decisions, US EAR country groups",
            (entry(k, v["urls"], v["checked"]) for k, v in sorted(lists.items())),
        ),
        _dataset(
            "export_rules",
            "export_rules.yaml",
            "US export-control rule sets with effective dates",
            (
                entry(r["slug"], list(r["source_urls"]), r["checked"])
                for r in sorted(rule_sets, key=lambda r: r["effective_from"])
            ),
        ),
        _dataset(
            "gpu_classifications",
            "gpu_classifications.yaml",
            "published (official or vendor) export classifications of GPU models",
            (
                entry(f"{r['gpu_slug']}/{r['basis']}", _urls(r["source_url"]), r["checked"])
                for r in sorted(classifications, key=lambda r: r["gpu_slug"])
            ),
        ),
        _dataset(
            "providers",
            "providers.yaml",
            "providers and their headquarters country (jurisdiction)",
            (entry(p.slug, _urls(p.source_url), p.checked) for p in providers),
        ),
        _dataset(
            "regions",
            "regions.yaml",
            "region code to ISO 3166 country (residency)",
            (entry(f"{r.provider}/{r.code}", _urls(r.source_url), r.checked) for r in regions),
        ),
        _dataset(
            "gpus",
            "gpus.yaml",
            "GPU specs behind computed TPP and performance density",
            (entry(g.slug, _urls(g.source_url), g.checked) for g in gpus),
        ),
    ]
    return {"as_of": today, "stale_after_days": stale_days, "datasets": datasets}
