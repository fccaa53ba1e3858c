"""Provider certifications valid on a date, optionally for one region.

A certification counts on day D when the version the catalog held on D (see
:mod:`service.compliance.versioning`) has a status the caller accepts, its validity dates
include D, and its scope (``regions``; null = the whole provider) includes the region asked.
Only ``certified`` counts by default; ``cert_status=reported`` widens to ``reported`` too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from sqlalchemy import Connection

from schema.compliance import Certification
from service.compliance.versioning import all_versions, rows_on, within

CERT = Certification.__table__  # type: ignore[attr-defined]

CertStatus = Literal["certified", "reported"]
ACCEPTED: dict[str, tuple[str, ...]] = {
    "certified": ("certified",),
    "reported": ("certified", "reported"),
}


@dataclass(frozen=True)
class CertView:
    provider: str
    scheme: str
    status: str
    regions: tuple[str, ...] | None
    valid_from: date | None
    valid_to: date | None
    evidence_url: str | None
    checked: date | None
    notes: str | None
    recorded_at: datetime

    def valid_on(self, day: date) -> bool:
        return within(day, self.valid_from, self.valid_to)

    def covers(self, region: str | None) -> bool:
        return region is None or self.regions is None or region in self.regions


def certifications_on(conn: Connection, day: date, provider: str | None = None) -> list[CertView]:
    """Every certification row (any status) as the catalog held it on ``day``."""
    where = [CERT.c.provider == provider] if provider else []
    held = rows_on(all_versions(conn, CERT, *where), lambda r: (r["provider"], r["scheme"]), day)
    return sorted(
        (
            CertView(
                provider=r["provider"],
                scheme=r["scheme"],
                status=r["status"],
                regions=tuple(r["regions"]) if r["regions"] is not None else None,
                valid_from=r["valid_from"],
                valid_to=r["valid_to"],
                evidence_url=r["evidence_url"],
                checked=r["checked"],
                notes=r["notes"],
                recorded_at=r["recorded_at"],
            )
            for r in held
        ),
        key=lambda c: (c.provider, c.scheme),
    )


def select_valid(
    certs: Iterable[CertView],
    day: date,
    *,
    region: str | None = None,
    cert_status: CertStatus = "certified",
) -> list[CertView]:
    accepted = ACCEPTED[cert_status]
    return [c for c in certs if c.status in accepted and c.valid_on(day) and c.covers(region)]


def valid_certifications(
    conn: Connection,
    provider: str,
    day: date,
    *,
    region: str | None = None,
    cert_status: CertStatus = "certified",
) -> list[CertView]:
    """The certifications of ``provider`` that count on ``day`` (for ``region`` if given)."""
    return select_valid(
        certifications_on(conn, day, provider), day, region=region, cert_status=cert_status
    )
