"""The current version of every provider certification, and whether it is held on a day.

A provider **holds** a scheme on day D for a region when the row's status is
``certified``, its validity dates include D, and its scope covers the region (a row scoped
to the whole provider covers every region). The certification alerts compare these before
and after a reference load (:mod:`service.alerts.certs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import Connection, select

from schema.compliance import Certification
from service.compliance.versioning import within

CERT = Certification.__table__  # type: ignore[attr-defined]
HELD = "certified"

CertKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class CertRow:
    """One version of a certification row."""

    id: int
    provider: str
    scheme: str
    status: str
    regions: tuple[str, ...] | None
    valid_from: date | None
    valid_to: date | None
    evidence_url: str | None
    checked: date | None
    recorded_at: datetime

    def held(self, day: date, region: str | None) -> bool:
        return (
            self.status == HELD
            and within(day, self.valid_from, self.valid_to)
            and (region is None or self.regions is None or region in self.regions)
        )

    def public(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "scheme": self.scheme,
            "status": self.status,
            "regions": list(self.regions) if self.regions is not None else None,
            "valid_from": self.valid_from.isoformat() if self.valid_from else None,
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
            "evidence_url": self.evidence_url,
            "checked": self.checked.isoformat() if self.checked else None,
        }


def cert_row(r: Any) -> CertRow:
    return CertRow(
        id=r.id,
        provider=r.provider,
        scheme=r.scheme,
        status=r.status,
        regions=tuple(r.regions) if r.regions is not None else None,
        valid_from=r.valid_from,
        valid_to=r.valid_to,
        evidence_url=r.evidence_url,
        checked=r.checked,
        recorded_at=r.recorded_at,
    )


def current_certifications(conn: Connection, *where: Any) -> dict[CertKey, CertRow]:
    """The current version of every certification row, by (provider, scheme)."""
    stmt = select(CERT).where(CERT.c.superseded_at.is_(None), *where)
    return {(r.provider, r.scheme): cert_row(r) for r in conn.execute(stmt)}
