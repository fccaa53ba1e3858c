"""Database reads behind the compliance answers: rule sets, classifications, GPU specs.

Every read is "as of" a day: the row versions the catalog held at the end of that day (see
:mod:`service.compliance.versioning`), filtered by the rows' own validity dates.
"""

from __future__ import annotations

from datetime import date

from sqlalchemy import Connection, select

from schema.catalog import GpuModel
from schema.compliance import ExportRuleSet, GpuClassification
from service.catalog.gpu_catalog import gpu_name_index
from service.compliance.countries import country_lists, parse_country
from service.compliance.export_control import (
    ExportAnswer,
    GpuSpecs,
    Published,
    Rules,
    RuleSet,
    evaluate,
    rule_set_on,
)
from service.compliance.versioning import all_versions, rows_on

RULE_SET = ExportRuleSet.__table__  # type: ignore[attr-defined]
CLASSIFICATION = GpuClassification.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]


class ComplianceError(Exception):
    """A compliance question cannot be answered; ``param`` names the input at fault."""

    status = 422

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class UnknownGpu(ComplianceError):
    status = 404


class NoRuleSet(ComplianceError):
    status = 422


class BadCountry(ComplianceError):
    status = 422


def resolve_gpu(conn: Connection, name: str) -> str:
    """Canonical slug for a slug or any spelling the GPU name parser reads
    ('H100 SXM5 80GB', 'NVIDIA GeForce RTX 4090'); an ambiguous name is refused with its
    candidates."""
    found = gpu_name_index(conn).resolve(name.strip())
    if found.slug is None:
        raise UnknownGpu(f"unknown GPU {name[:200]!r}: {found.reason}", "gpu")
    return found.slug


def gpu_specs(conn: Connection, slugs: list[str] | None = None) -> dict[str, GpuSpecs]:
    stmt = select(GPU)
    if slugs is not None:
        stmt = stmt.where(GPU.c.slug.in_(slugs))
    return {r["slug"]: GpuSpecs.from_row(r) for r in conn.execute(stmt).mappings()}


def rule_sets(conn: Connection, on: date) -> list[RuleSet]:
    """The rule sets as held on ``on``, oldest first."""
    held = rows_on(all_versions(conn, RULE_SET), lambda r: r["slug"], on)
    result = [
        RuleSet(
            slug=r["slug"],
            name=r["name"],
            effective_from=r["effective_from"],
            effective_to=r["effective_to"],
            rules=Rules.model_validate(r["rules"]),
            source_urls=tuple(r["source_urls"]),
            checked=r["checked"],
        )
        for r in held
    ]
    return sorted(result, key=lambda r: r.effective_from)


def rule_set_in_force(conn: Connection, on: date) -> RuleSet:
    held = rule_sets(conn, on)
    found = rule_set_on(held, on)
    if found is None:
        first = held[0].effective_from.isoformat() if held else None
        hint = f"; the earliest starts {first}" if first else "; none is loaded"
        raise NoRuleSet(
            f"no export-control rule set is in force on {on.isoformat()}{hint}", "as_of"
        )
    return found


def published_classifications(conn: Connection, on: date) -> dict[str, list[Published]]:
    held = rows_on(
        all_versions(conn, CLASSIFICATION),
        lambda r: (r["gpu_slug"], r["basis"], r["effective_from"]),
        on,
    )
    out: dict[str, list[Published]] = {}
    for r in held:
        if r["basis"] not in ("official", "vendor"):
            continue
        out.setdefault(r["gpu_slug"], []).append(
            Published(r["eccn"], r["basis"], r["effective_from"], r["source_url"], r["notes"])
        )
    return out


def export_control(conn: Connection, gpu: str, destination: str, on: date) -> ExportAnswer:
    """The answer for one GPU (slug or alias), destination country and day."""
    try:
        country = parse_country(destination)
    except ValueError as exc:
        raise BadCountry(f"destination: {exc}", "destination") from None
    slug = resolve_gpu(conn, gpu)
    rule_set = rule_set_in_force(conn, on)
    specs = gpu_specs(conn, [slug])[slug]
    published = published_classifications(conn, on).get(slug, [])
    return evaluate(specs, country, on, rule_set, country_lists(conn, on), published)


def export_answers(conn: Connection, destination: str, on: date) -> dict[str, ExportAnswer]:
    """Answers for every GPU model at once (for listing filters)."""
    rule_set = rule_set_in_force(conn, on)
    lists = country_lists(conn, on)
    published = published_classifications(conn, on)
    return {
        slug: evaluate(specs, destination, on, rule_set, lists, published.get(slug, []))
        for slug, specs in gpu_specs(conn).items()
    }
