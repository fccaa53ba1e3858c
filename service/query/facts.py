"""What a page of offers needs besides the offers: the small catalog tables, read whole.

Regions, certifications, GPU facts and last good crawls, cached per database snapshot
(:func:`catalog_facts`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TypeVar

from sqlalchemy import Connection, Executable, exists, func, or_, select, text

from schema.enums import OfferStatus
from schema.prices import ACTIVE_FILTERS_INDEX, ACTIVE_SCAN
from service.query.runs import last_good_crawls
from service.query.sql import CERT, CLASSIFICATION, GPU, OFFER, REGION


@dataclass
class OfferContext:
    """What a page of offers needs besides the offers (read-only: may be shared, see below)."""

    regions: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    certifications: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    export_control: dict[str, dict[str, Any]] = field(default_factory=dict)
    tflops_bf16: dict[str, Decimal] = field(default_factory=dict)
    last_confirmed: dict[str, datetime] = field(default_factory=dict)
    families: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """GPU family -> its slugs."""
    live_gpus: frozenset[str] = frozenset()
    """GPU slugs with at least one active offer."""
    gpu_memory: dict[str, Decimal] = field(default_factory=dict)
    """GPU slug -> its memory in GB (the models that have a figure)."""
    gpu_names: dict[str, str] = field(default_factory=dict)
    """GPU slug -> its human name ("H100 SXM 80GB"): read with the facts, not joined per row
    (a per-row lookup in the listing's statement cost 10-40 %, docs/benchmarks.md)."""

    def gpu_label(self, row: dict[str, Any]) -> str | None:
        """What people read for an offer's GPU: the model's name; an unmapped raw name marked
        ``(unrecognized)``; None when the source named no GPU."""
        slug = row.get("gpu_slug")
        if slug:
            return self.gpu_names.get(slug, slug)
        raw = row.get("gpu_name_raw")
        return f"{raw} (unrecognized)" if raw else None


FACTS_KEY = "gpuatlas.catalog_facts"


def snapshot_token(conn: Connection) -> tuple[Any, ...] | None:
    """A value equal for two reads only if they see the same committed data (None: unknown).

    SQLite: ``PRAGMA data_version`` (changes when another connection commits; inside a read
    transaction it stays at the transaction's snapshot) and the connection's own
    ``total_changes``. PostgreSQL: the transaction's snapshot (``pg_current_snapshot()``,
    which under REPEATABLE READ fixes what every statement sees); None once the transaction
    has written itself (its own writes are not in the snapshot's text).
    """
    if conn.dialect.name == "sqlite":
        version = conn.exec_driver_sql("PRAGMA data_version").scalar()
        return (version, getattr(conn.connection.dbapi_connection, "total_changes", None))
    if conn.dialect.name == "postgresql":
        snapshot, own = conn.exec_driver_sql(
            "SELECT pg_current_snapshot()::text, pg_current_xact_id_if_assigned()::text"
        ).one()
        return None if own is not None else (snapshot,)
    return None


def catalog_facts(conn: Connection, on: date) -> OfferContext:
    """Regions, certifications valid ``on``, GPU facts and last good crawls: all of them.

    Small tables read whole, cached on the database connection and reused while
    :func:`snapshot_token` says nothing was committed since (so never stale); the result
    is shared between requests and must not be modified.
    """
    facts: OfferContext = per_snapshot(conn, FACTS_KEY, lambda: _load_facts(conn, on), on)
    return facts


T = TypeVar("T")


def per_snapshot(conn: Connection, name: str, compute: Callable[[], T], *extra: Any) -> T:
    """``compute()``, cached on ``conn``'s database connection under ``name`` while
    :func:`snapshot_token` (and ``extra``) say nothing was committed since: never stale.
    Computed afresh, not cached, when the snapshot is unknown."""
    token = snapshot_token(conn)
    if token is None:
        return compute()
    info = conn.connection.info
    cached = info.get(name)
    if cached is not None and cached[0] == (token, *extra):
        return cached[1]  # type: ignore[no-any-return]
    value = compute()
    info[name] = ((token, *extra), value)
    return value


OFFERED_KEY = "gpuatlas.offered"


def bare_metal_offered(conn: Connection, value: bool) -> bool:
    """Whether some active offer says its ``bare_metal`` is ``value``.

    One probe per value and snapshot (:func:`snapshot_token`), cached on the connection
    like :func:`catalog_facts`. The probe stops at the first such offer; a value no offer
    has costs it one read of every offer, after which a listing filtered on it answers
    at once instead of reading every offer to find none (40-55 ms at 210,000 offers, the
    slowest tenth of the listing mix's `bare_metal` pages: docs/benchmarks.md)."""
    answers: dict[bool, bool] = per_snapshot(conn, OFFERED_KEY, dict)
    if value not in answers:
        probe: Executable
        if conn.dialect.name == "sqlite":  # the covering index: 15 ms to find none, not 45
            probe = text(BARE_METAL_SQLITE).bindparams(value=int(value))
        else:
            probe = select(OFFER.c.id).where(
                OFFER.c.status == OfferStatus.active.value, OFFER.c.bare_metal.is_(value)
            )
            probe = probe.limit(1)
        answers[value] = conn.execute(probe).first() is not None
    return answers[value]


BARE_METAL_SQLITE = (
    f"SELECT 1 FROM offer INDEXED BY {ACTIVE_FILTERS_INDEX} WHERE {ACTIVE_SCAN.text} "
    "AND bare_metal IS :value LIMIT 1"
)
"""The bare-metal probe on SQLite, along the covering index (SQLite's planner read every
active offer's row through ``ix_offer_status_provider``)."""


STATED_MEMORY_KEY = "gpuatlas.stated_memory"
STATED_MEMORY_SQLITE = (
    "SELECT gpu_slug, max(CAST(gpu_memory_gb AS REAL)) FROM offer "
    f"INDEXED BY {ACTIVE_FILTERS_INDEX} WHERE {ACTIVE_SCAN.text} "
    "AND gpu_memory_gb IS NOT NULL GROUP BY gpu_slug"
)
"""The largest GPU memory active offers state, per model, on SQLite, along
``ix_offer_active_filters`` (see :data:`schema.prices.ACTIVE_SCAN`)."""

COVERING_READS = (BARE_METAL_SQLITE, STATED_MEMORY_SQLITE)
"""The statements besides a listing's filters-first read and a pinned full sort that read
``ix_offer_active_filters``: both name it."""


def stated_gpu_memory(conn: Connection) -> dict[str | None, float]:
    """GPU slug (None: offers without one) -> the largest GPU memory an active offer of it
    states itself (``offer.gpu_memory_gb``; offers that state none take their model's), as
    a float (how SQLite's filter compares it; a superset is all its callers need).

    What the ``min_gpu_memory_gb`` filter can keep of a model besides its own figure: one
    read of every active offer per snapshot (:func:`snapshot_token`), cached on the
    connection like :func:`catalog_facts`; on SQLite along the covering
    ``ix_offer_active_filters`` (20 ms at 210,000 offers; its planner otherwise walked
    another index and read every row, 370 ms)."""
    largest: Executable
    if conn.dialect.name == "sqlite":  # the covering index's entries, not the table's rows
        largest = text(STATED_MEMORY_SQLITE)
    else:
        largest = (
            select(OFFER.c.gpu_slug, func.max(OFFER.c.gpu_memory_gb))
            .where(OFFER.c.status == OfferStatus.active.value, OFFER.c.gpu_memory_gb.is_not(None))
            .group_by(OFFER.c.gpu_slug)
        )

    def read() -> dict[str | None, float]:
        return {slug: float(most) for slug, most in conn.execute(largest)}

    answer: dict[str | None, float] = per_snapshot(conn, STATED_MEMORY_KEY, read)
    return answer


def _load_facts(conn: Connection, on: date) -> OfferContext:
    ctx = OfferContext()
    for r in conn.execute(
        select(
            REGION.c.provider,
            REGION.c.code,
            REGION.c.name,
            REGION.c.city,
            REGION.c.province,
            REGION.c.country,
        )
    ).mappings():
        ctx.regions[(r["provider"], r["code"])] = dict(r)
    certs = conn.execute(
        select(CERT.c.provider, CERT.c.scheme, CERT.c.valid_to, CERT.c.regions)
        .where(
            CERT.c.status == "certified",
            CERT.c.superseded_at.is_(None),
            or_(CERT.c.valid_from.is_(None), CERT.c.valid_from <= on),
            or_(CERT.c.valid_to.is_(None), CERT.c.valid_to >= on),
        )
        .order_by(CERT.c.provider, CERT.c.scheme)
    ).mappings()
    for c in certs:
        ctx.certifications.setdefault(c["provider"], []).append(
            {"scheme": c["scheme"], "valid_to": c["valid_to"], "regions": c["regions"]}
        )
    families: dict[str, list[str]] = {}
    for g in conn.execute(
        select(GPU.c.slug, GPU.c.family, GPU.c.name, GPU.c.tflops_bf16, GPU.c.memory_gb)
    ).mappings():
        ctx.gpu_names[g["slug"]] = g["name"]
        if g["memory_gb"] is not None:
            ctx.gpu_memory[g["slug"]] = g["memory_gb"]
        if g["tflops_bf16"] is not None:
            ctx.tflops_bf16[g["slug"]] = g["tflops_bf16"]
        families.setdefault(g["family"], []).append(g["slug"])
    ctx.families = {f: tuple(sorted(slugs)) for f, slugs in families.items()}
    classes = conn.execute(
        select(CLASSIFICATION.c.gpu_slug, CLASSIFICATION.c.eccn, CLASSIFICATION.c.basis)
        .where(
            or_(
                CLASSIFICATION.c.effective_from.is_(None),
                CLASSIFICATION.c.effective_from <= on,
            ),
        )
        .order_by(CLASSIFICATION.c.gpu_slug, CLASSIFICATION.c.effective_from)
    ).mappings()
    for k in classes:
        ctx.export_control[k["gpu_slug"]] = {"eccn": k["eccn"], "basis": k["basis"]}
    ctx.last_confirmed = last_good_crawls(conn)
    live = select(GPU.c.slug).where(
        exists().where(OFFER.c.gpu_slug == GPU.c.slug, OFFER.c.status == OfferStatus.active.value)
    )
    ctx.live_gpus = frozenset(r[0] for r in conn.execute(live))
    return ctx


def offer_context(conn: Connection, rows: Sequence[dict[str, Any]], on: date) -> OfferContext:
    """Regions, valid certifications, GPU facts and last good crawls for offers (shared)."""
    del rows  # the facts cover every offer; kept for callers that name their page
    return catalog_facts(conn, on)
