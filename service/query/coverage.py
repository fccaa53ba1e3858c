"""The coverage matrix: per provider, how the catalog knows it and how well.

One document, printed by ``gpuatlas coverage`` (table, JSON, Markdown) and served by
``GET /v1/coverage``. Per provider (every provider of the reference data, and any provider a
source or an offer names that reference data does not know):

* ``sources`` — each source of the provider with its kind (``api``, ``page`` or ``peer``) and
  the end of its last good (``ok``) crawl, null when it never had one;
* ``offers`` — its active offers, in total and by price kind;
* ``gpu_known_share`` and ``location_known_share`` — the share of those offers with a GPU
  model, and with a place (a country of their own or a location with one: the definition of
  ``GET /v1/quality``); null without offers;
* ``certifications`` — the schemes reference data records today, by status
  (``certified``, ``reported``, ``not_certified``, ``unknown``), and ``certifications_known``:
  whether any scheme has a status other than ``unknown``;
* ``prices`` — ``first_party`` when a first-party source (the provider's own API or pricing
  page) has active offers, ``peer_only`` when only peer catalogs do, ``none`` without offers.

:func:`coverage_markdown` renders the same document as the README's table.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import date, datetime
from typing import Any

from sqlalchemy import Connection, case, func, select

from schema.crawl import SourceInfo
from schema.enums import OfferStatus
from schema.types import utcnow
from service.compliance.certifications import certifications_on
from service.query.precedence import is_first_party, source_key
from service.query.quality import without_country
from service.query.runs import last_good_crawls
from service.query.sql import OFFER, PROVIDER, NotFound
from service.query.versions import current_version

SOURCE = SourceInfo.__table__  # type: ignore[attr-defined]

SOURCE_KINDS = {"html": "page", "peer": "peer"}
"""A source's kind in the matrix; every other kind of source (``api``, ``marketplace``) is an
API. FX feeds are no provider's source and are left out."""
NOT_PROVIDER_KINDS = {"fx"}
PRICES_ORDER = {"first_party": 0, "peer_only": 1, "none": 2}
CERT_STATUSES = ("certified", "reported", "not_certified", "unknown")


def source_kind(kind: str) -> str:
    return SOURCE_KINDS.get(kind, "api")


def _sources(conn: Connection) -> dict[str, list[dict[str, Any]]]:
    good = last_good_crawls(conn)
    stmt = select(SOURCE.c.name, SOURCE.c.provider, SOURCE.c.kind).where(
        SOURCE.c.kind.not_in(NOT_PROVIDER_KINDS)
    )
    by_provider: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name, provider, kind in conn.execute(stmt):
        by_provider[provider].append(
            {"name": name, "kind": source_kind(kind), "last_good_crawl": good.get(name)}
        )
    for sources in by_provider.values():
        sources.sort(key=lambda s: source_key(s["name"]))
    return by_provider


def _offers(conn: Connection) -> dict[str, dict[str, Any]]:
    """Per provider: offer counts by price kind and by source, GPU-known and placed counts."""
    located = func.sum(case((without_country(), 0), else_=1))
    stmt = (
        select(
            OFFER.c.provider,
            OFFER.c.source,
            OFFER.c.price_kind,
            func.count().label("offers"),
            func.count(OFFER.c.gpu_slug).label("with_gpu"),
            located.label("located"),
        )
        .where(OFFER.c.status == OfferStatus.active.value)
        .group_by(OFFER.c.provider, OFFER.c.source, OFFER.c.price_kind)
    )
    out: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"kinds": Counter(), "sources": Counter(), "with_gpu": 0, "located": 0}
    )
    for row in conn.execute(stmt).mappings():
        entry = out[row["provider"]]
        offers = int(row["offers"])
        entry["kinds"][row["price_kind"]] += offers
        entry["sources"][row["source"]] += offers
        entry["with_gpu"] += int(row["with_gpu"])
        entry["located"] += int(row["located"] or 0)
    return out


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def coverage_matrix(
    conn: Connection, provider: str | None = None, today: date | None = None
) -> dict[str, Any]:
    """The coverage document (every provider, or only ``provider``: :class:`NotFound` when
    neither reference data, a source nor an offer names it)."""
    known = {
        r["slug"]: r
        for r in conn.execute(select(PROVIDER.c.slug, PROVIDER.c.name, PROVIDER.c.kind)).mappings()
    }
    sources = _sources(conn)
    offers = _offers(conn)
    certs: dict[str, dict[str, list[str]]] = defaultdict(lambda: {s: [] for s in CERT_STATUSES})
    for cert in certifications_on(conn, today or utcnow().date()):
        certs[cert.provider].setdefault(cert.status, []).append(cert.scheme)
    slugs = set(known) | set(sources) | set(offers)
    if provider is not None:
        if provider not in slugs:
            raise NotFound(f"provider {provider!r} is not known to the catalog")
        slugs = {provider}
    rows: list[dict[str, Any]] = []
    for slug in slugs:
        counts = offers.get(slug)
        total = sum(counts["kinds"].values()) if counts else 0
        offer_sources = counts["sources"] if counts else Counter()
        if any(is_first_party(s) for s in offer_sources):
            prices = "first_party"
        elif offer_sources:
            prices = "peer_only"
        else:
            prices = "none"
        held = certs.get(slug) or {s: [] for s in CERT_STATUSES}
        rows.append(
            {
                "provider": slug,
                "name": known[slug]["name"] if slug in known else None,
                "kind": known[slug]["kind"] if slug in known else None,
                "prices": prices,
                "sources": [
                    {**s, "active_offers": offer_sources.get(s["name"], 0)}
                    for s in sources.get(slug, [])
                ],
                "offers": {
                    "total": total,
                    "by_price_kind": dict(sorted(counts["kinds"].items())) if counts else {},
                },
                "gpu_known_share": _share(counts["with_gpu"], total) if counts else None,
                "location_known_share": _share(counts["located"], total) if counts else None,
                "certifications": {s: sorted(held.get(s, [])) for s in CERT_STATUSES},
                "certifications_known": any(held.get(s) for s in CERT_STATUSES[:3]),
            }
        )
    rows.sort(key=lambda r: (PRICES_ORDER[r["prices"]], r["provider"]))
    with_offers = [r for r in rows if r["offers"]["total"]]
    return {
        "catalog_version": current_version(conn),
        "totals": {
            "providers": len(rows),
            "with_offers": len(with_offers),
            "first_party": sum(r["prices"] == "first_party" for r in rows),
            "peer_only": sum(r["prices"] == "peer_only" for r in rows),
            "active_offers": sum(r["offers"]["total"] for r in rows),
        },
        "providers": rows,
    }


# --------------------------------------------------------------------------- rendering


def _percent(share: float | None) -> str:
    return "–" if share is None else f"{share:.0%}"


def source_cell(source: dict[str, Any]) -> str:
    """``skypilot:cudo`` (peer, 2026-12-04): a source, its kind and its last good crawl's day."""
    when = source["last_good_crawl"]
    day = when.date().isoformat() if isinstance(when, datetime) else "never crawled"
    return f"{source['name']} ({source['kind']}, {day})"


def price_kinds_cell(row: dict[str, Any]) -> str:
    kinds = row["offers"]["by_price_kind"]
    return ", ".join(f"{kind} {n}" for kind, n in kinds.items()) or "–"


def certifications_cell(row: dict[str, Any]) -> str:
    certs = row["certifications"]
    if not row["certifications_known"]:
        return "unknown"
    parts = [", ".join(certs["certified"]) or "none certified"]
    if certs["reported"]:
        parts.append("reported: " + ", ".join(certs["reported"]))
    if certs["not_certified"]:
        parts.append("not certified: " + ", ".join(certs["not_certified"]))
    return "; ".join(parts)


MARKDOWN_COLUMNS = (
    "provider",
    "prices",
    "sources (kind, last good crawl)",
    "active offers by price kind",
    "GPU known",
    "location known",
    "certifications",
)


def coverage_rows(document: dict[str, Any], joiner: str = "; ") -> list[dict[str, str]]:
    """The matrix as rows of text cells (the table and the Markdown share them); a provider's
    sources are joined by ``joiner``."""
    return [
        {
            "provider": row["provider"],
            "prices": row["prices"].replace("_", "-"),
            "sources (kind, last good crawl)": joiner.join(source_cell(s) for s in row["sources"])
            or "no source",
            "active offers by price kind": price_kinds_cell(row),
            "GPU known": _percent(row["gpu_known_share"]),
            "location known": _percent(row["location_known_share"]),
            "certifications": certifications_cell(row),
        }
        for row in document["providers"]
    ]


def coverage_markdown(document: dict[str, Any]) -> str:
    """The matrix as a Markdown table, with its totals line."""
    totals = document["totals"]
    lines = [
        f"{totals['with_offers']} of {totals['providers']} providers have offers "
        f"({totals['first_party']} with first-party prices, {totals['peer_only']} through peer "
        f"catalogs only); {totals['active_offers']} active offers at catalog version "
        f"{document['catalog_version']}.",
        "",
        "| " + " | ".join(MARKDOWN_COLUMNS) + " |",
        "| " + " | ".join("---" for _ in MARKDOWN_COLUMNS) + " |",
    ]
    for row in coverage_rows(document):
        cells = [row[c].replace("|", "\\|") for c in MARKDOWN_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
