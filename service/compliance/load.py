"""Load the compliance reference files into the catalog, versioned.

Files (in ``fixtures/reference/``; each optional, a missing file leaves its dataset as is):
``countries.yaml``, ``certifications.yaml``, ``export_rules.yaml``,
``gpu_classifications.yaml``. Every row has ``source`` and ``checked``.

A bad or conflicting row stops the load with a :class:`ReferenceError` naming the file, the
row and the problem; the caller's transaction then writes nothing. Changed rows supersede
their old versions (see :mod:`service.compliance.versioning`); unchanged rows write nothing.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from sqlalchemy import Connection, select

from schema.catalog import GpuModel, Provider, Region
from schema.compliance import (
    CERT_SCHEMES,
    Certification,
    CertScheme,
    CountryMembership,
    ExportRuleSet,
    GpuClassification,
)
from schema.records import describe_validation_error
from schema.types import utcnow
from service.compliance import listener
from service.compliance.countries import InvalidCountry, parse_country
from service.compliance.export_control import Rules
from service.compliance.held import current_certifications
from service.compliance.versioning import sync_versions
from service.core.reference_error import ReferenceError

CERT = Certification.__table__  # type: ignore[attr-defined]
MEMBERSHIP = CountryMembership.__table__  # type: ignore[attr-defined]
RULE_SET = ExportRuleSet.__table__  # type: ignore[attr-defined]
CLASSIFICATION = GpuClassification.__table__  # type: ignore[attr-defined]
PROVIDER = Provider.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]

SCHEMES = CERT_SCHEMES
STATUSES = ("certified", "reported", "not_certified", "unknown")
FILES = {
    "countries": "countries.yaml",
    "certifications": "certifications.yaml",
    "export_rules": "export_rules.yaml",
    "gpu_classifications": "gpu_classifications.yaml",
}


class LoadError(ReferenceError):
    """A compliance reference file or row is invalid; the message names where."""


def _country(value: str) -> str:
    try:
        return parse_country(value)
    except InvalidCountry as exc:
        raise ValueError(str(exc)) from None


def _url(value: str) -> str:
    parts = [p.strip() for p in value.split(" ; ")]
    if not all(p.startswith(("http://", "https://")) and " " not in p for p in parts):
        raise ValueError(f"{value!r} is not a URL (or URLs separated by ' ; ')")
    return value


Country = Annotated[str, AfterValidator(_country)]
Url = Annotated[str, AfterValidator(_url)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class _Sourced(_Model):
    source: Url
    checked: date
    notes: str | None = Field(default=None, max_length=2000)


def _dates_in_order(start: date | None, end: date | None, what: str) -> None:
    if start is not None and end is not None and end < start:
        raise ValueError(f"{what} ends ({end}) before it starts ({start})")


class CertificationRow(_Sourced):
    provider: str
    scheme: CertScheme
    status: Literal[STATUSES]  # type: ignore[valid-type]
    regions: list[str] | None = None
    valid_from: date | None = None
    valid_to: date | None = None

    @model_validator(mode="after")
    def _order(self) -> CertificationRow:
        _dates_in_order(self.valid_from, self.valid_to, "validity")
        if self.regions is not None and not self.regions:
            raise ValueError("regions: use null for the whole provider, not an empty list")
        return self


class Member(_Model):
    country: Country
    from_: date | None = Field(default=None, alias="from")
    to: date | None = None
    source: Url | None = None
    checked: date | None = None
    notes: str | None = Field(default=None, max_length=2000)

    @model_validator(mode="after")
    def _order(self) -> Member:
        _dates_in_order(self.from_, self.to, "membership")
        return self


class CountryList(_Sourced):
    list_name: str = Field(alias="list", pattern=r"^[a-z][a-z0-9_]{1,31}$")
    name: str
    members: list[Member]


class RuleSetRow(_Sourced):
    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{1,63}$")
    name: str = Field(max_length=300)
    effective_from: date
    effective_to: date | None = None
    rules: Rules

    @model_validator(mode="after")
    def _order(self) -> RuleSetRow:
        _dates_in_order(self.effective_from, self.effective_to, "the rule set")
        return self


class ClassificationRow(_Sourced):
    gpu: str
    eccn: str = Field(pattern=r"^([0-9][A-E][0-9]{3}(\.[a-z0-9.]+)?|EAR99)$")
    basis: Literal["official", "vendor"]
    effective_from: date | None = None


def _read(path: Path, key: str) -> list[Any] | None:
    if not path.exists():
        return None
    if not path.is_file():  # a FIFO would block the read for ever, /dev/zero never end
        raise LoadError(f"{path.name}: not a regular file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise LoadError(f"{path.name}: not valid YAML: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise LoadError(f"{path.name}: expected a top-level '{key}:' list")
    return list(data[key])


def _validate(file: str, items: list[Any], model: type[_Model], label: Any) -> list[Any]:
    rows = []
    for index, item in enumerate(items, start=1):
        try:
            rows.append(model.model_validate(item))
        except ValidationError as exc:
            name = label(item) if isinstance(item, dict) else None
            where = f"{file} row {index}" + (f" ({name})" if name else "")
            raise LoadError(f"{where}: {describe_validation_error(exc)}") from None
    return rows


def _fail(file: str, index: int, name: str, message: str) -> LoadError:
    return LoadError(f"{file} row {index} ({name}): {message}")


def _overlap(a: tuple[date | None, date | None], b: tuple[date | None, date | None]) -> bool:
    return (a[0] is None or b[1] is None or a[0] <= b[1]) and (
        b[0] is None or a[1] is None or b[0] <= a[1]
    )


def read_countries(directory: Path) -> tuple[list[dict[str, Any]], set[str]] | None:
    """Membership rows, and every list name (a list may have no members)."""
    file = FILES["countries"]
    items = _read(directory / file, "lists")
    if items is None:
        return None
    lists = _validate(file, items, CountryList, lambda i: i.get("list"))
    rows: list[dict[str, Any]] = []
    spans: dict[tuple[str, str], list[tuple[date | None, date | None]]] = {}
    seen_lists: set[str] = set()
    for index, group in enumerate(lists, start=1):
        if group.list_name in seen_lists:
            raise _fail(file, index, group.list_name, "duplicate list name")
        seen_lists.add(group.list_name)
        for m_index, m in enumerate(group.members, start=1):
            span = (m.from_, m.to)
            others = spans.setdefault((group.list_name, m.country), [])
            if any(_overlap(span, other) for other in others):
                raise _fail(
                    file,
                    index,
                    group.list_name,
                    f"member {m_index} ({m.country}) overlaps another membership of the list",
                )
            others.append(span)
            rows.append(
                {
                    "country": m.country,
                    "list": group.list_name,
                    "valid_from": m.from_,
                    "valid_to": m.to,
                    "source_url": (m.source or group.source)[:1000],
                    "checked": m.checked or group.checked,
                    "notes": m.notes or group.notes,
                }
            )
    return rows, seen_lists


def read_certifications(conn: Connection, directory: Path) -> list[dict[str, Any]] | None:
    file = FILES["certifications"]
    items = _read(directory / file, "certifications")
    if items is None:
        return None
    certs = _validate(
        file, items, CertificationRow, lambda i: f"{i.get('provider')}/{i.get('scheme')}"
    )
    providers = set(conn.execute(select(PROVIDER.c.slug)).scalars())
    regions: dict[str, set[str]] = {}
    for provider, code in conn.execute(select(REGION.c.provider, REGION.c.code)):
        regions.setdefault(provider, set()).add(code)
    seen: dict[tuple[str, str], int] = {}
    rows = []
    for index, c in enumerate(certs, start=1):
        name = f"{c.provider}/{c.scheme}"
        if c.provider not in providers:
            raise _fail(file, index, name, f"unknown provider {c.provider!r}")
        if (c.provider, c.scheme) in seen:
            raise _fail(
                file,
                index,
                name,
                f"conflicts with row {seen[(c.provider, c.scheme)]}: one row per provider "
                "and scheme (edit that row; history is kept on load)",
            )
        seen[(c.provider, c.scheme)] = index
        unknown = sorted(set(c.regions or []) - regions.get(c.provider, set()))
        if unknown:
            raise _fail(file, index, name, f"unknown region(s) of {c.provider}: {unknown}")
        rows.append(
            {
                "provider": c.provider,
                "scheme": c.scheme,
                "status": c.status,
                "regions": c.regions,
                "valid_from": c.valid_from,
                "valid_to": c.valid_to,
                "evidence_url": c.source[:1000],
                "checked": c.checked,
                "notes": c.notes,
            }
        )
    return rows


def read_rule_sets(directory: Path, list_names: set[str] | None) -> list[dict[str, Any]] | None:
    file = FILES["export_rules"]
    items = _read(directory / file, "rule_sets")
    if items is None:
        return None
    rule_sets = _validate(file, items, RuleSetRow, lambda i: i.get("slug"))
    rows = []
    for index, r in enumerate(rule_sets, start=1):
        for other_index, other in enumerate(rule_sets[: index - 1], start=1):
            if other.slug == r.slug:
                raise _fail(file, index, r.slug, f"duplicate slug (first at row {other_index})")
            span = (r.effective_from, r.effective_to)
            if _overlap(span, (other.effective_from, other.effective_to)):
                raise _fail(
                    file,
                    index,
                    r.slug,
                    f"effective dates overlap rule set {other.slug!r} (row {other_index}): "
                    "exactly one rule set may be in force on a day",
                )
        for scope in r.rules.scopes():
            for code in scope.countries:
                try:
                    parse_country(code)
                except InvalidCountry as exc:
                    raise _fail(file, index, r.slug, str(exc)) from None
            missing = sorted(set(scope.list_names()) - (list_names or set()))
            if list_names is not None and missing:
                raise _fail(file, index, r.slug, f"unknown country list(s) {missing}")
        rows.append(
            {
                "slug": r.slug,
                "name": r.name,
                "effective_from": r.effective_from,
                "effective_to": r.effective_to,
                "rules": r.rules.as_json(),
                "source_urls": [u.strip() for u in r.source.split(" ; ")],
                "checked": r.checked,
                "notes": r.notes,
            }
        )
    return rows


def read_classifications(conn: Connection, directory: Path) -> list[dict[str, Any]] | None:
    file = FILES["gpu_classifications"]
    items = _read(directory / file, "classifications")
    if items is None:
        return None
    rows_in = _validate(file, items, ClassificationRow, lambda i: i.get("gpu"))
    gpus = set(conn.execute(select(GPU.c.slug)).scalars())
    seen: dict[tuple[str, str, date | None], int] = {}
    rows = []
    for index, c in enumerate(rows_in, start=1):
        if c.gpu not in gpus:
            raise _fail(file, index, c.gpu, f"unknown GPU model {c.gpu!r} (not in gpus.yaml)")
        key = (c.gpu, c.basis, c.effective_from)
        if key in seen:
            raise _fail(
                file, index, c.gpu, f"conflicts with row {seen[key]} (same GPU, basis and date)"
            )
        seen[key] = index
        rows.append(
            {
                "gpu_slug": c.gpu,
                "eccn": c.eccn,
                "basis": c.basis,
                "effective_from": c.effective_from,
                "source_url": c.source[:1000],
                "checked": c.checked,
                "notes": c.notes,
            }
        )
    return rows


def _named_item_gpus(rule_rows: list[dict[str, Any]], gpus: set[str]) -> None:
    for index, row in enumerate(rule_rows, start=1):
        for item in row["rules"].get("named_items", []):
            unknown = sorted(set(item["gpus"]) - gpus)
            if unknown:
                raise _fail(
                    FILES["export_rules"], index, row["slug"], f"unknown GPU model(s) {unknown}"
                )


def load_compliance(
    conn: Connection, directory: Path, now: datetime | None = None
) -> dict[str, int]:
    """Validate every compliance file, then write new versions; returns versions written.

    Runs inside the caller's transaction (after providers, regions and GPUs are written).
    """
    now = now or utcnow()
    country_file = read_countries(directory)
    countries = country_file[0] if country_file else None
    if country_file is not None:
        list_names: set[str] | None = country_file[1]
    else:
        list_names = set(conn.execute(select(MEMBERSHIP.c.list).distinct()).scalars()) or None
    certifications = read_certifications(conn, directory)
    rule_sets = read_rule_sets(directory, list_names)
    classifications = read_classifications(conn, directory)
    if rule_sets is not None:
        _named_item_gpus(rule_sets, set(conn.execute(select(GPU.c.slug)).scalars()))
    changed: dict[str, int] = {}
    if countries is not None:
        changed["country_lists"] = sync_versions(
            conn, MEMBERSHIP, ["country", "list", "valid_from"], countries, now
        )
    if certifications is not None:
        notify = listener.required()
        held = current_certifications(conn)
        changed["certifications"] = sync_versions(
            conn, CERT, ["provider", "scheme"], certifications, now
        )
        if changed["certifications"]:  # alert events commit with the new versions
            notify(conn, held, now)
    if rule_sets is not None:
        changed["export_rules"] = sync_versions(conn, RULE_SET, ["slug"], rule_sets, now)
    if classifications is not None:
        changed["gpu_classifications"] = sync_versions(
            conn, CLASSIFICATION, ["gpu_slug", "basis", "effective_from"], classifications, now
        )
    return changed
