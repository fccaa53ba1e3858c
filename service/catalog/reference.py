"""Load reviewed reference data (``fixtures/reference/*.yaml``) into the catalog.

Every row carries its ``source`` URL and ``checked`` date. Loading is idempotent: rows
are upserted by their natural key, aliases are rebuilt, and a second load of the same
files changes nothing. A bad row stops the load with an error naming file, row and field;
nothing is written in that case.

This module reads and writes the catalog's part (providers, regions, GPU models and their
aliases); :func:`service.compliance.reference_load.load_reference` loads it together with
the compliance files, in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)
from sqlalchemy import Connection, Table, delete, select, update
from sqlalchemy import insert as sa_insert

from schema.catalog import GpuAlias, GpuModel, Provider, Region
from schema.codes import country_codes
from schema.gpu_names import GpuFacts, GpuNameIndex, parse_gpu_name
from schema.names import gpu_alias_key
from schema.records import SLUG_RE, describe_validation_error
from service.catalog.reresolve import reresolve_offers
from service.catalog.runs import lock_writer
from service.catalog.sort_keys import refresh_pflop_keys
from service.core.reference_error import ReferenceError

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available

PROVIDER = Provider.__table__  # type: ignore[attr-defined]
REGION = Region.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
ALIAS = GpuAlias.__table__  # type: ignore[attr-defined]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    source: str = Field(min_length=4)
    checked: date
    notes: str | None = None


def _country(value: str) -> str:
    code = value.upper()
    if code not in country_codes():
        raise ValueError(f"unknown ISO 3166-1 alpha-2 country {value!r}")
    return code


def _slug(value: str) -> str:
    if not SLUG_RE.match(value):
        raise ValueError(f"{value!r} is not a lowercase slug")
    return value


Slug = Annotated[str, AfterValidator(_slug)]
Country = Annotated[str, AfterValidator(_country)]


class ProviderRow(_Row):
    slug: Slug
    name: str
    hq_country: Country | None
    kind: Literal["hyperscaler", "gpu_cloud", "marketplace"]
    status: Literal["active", "retired"] = "active"
    website: str | None = None
    pricing_url: str | None = None


class RegionRow(_Row):
    provider: str
    code: str = Field(min_length=1, max_length=100)
    name: str | None = None
    country: Country
    city: str | None = None
    province: str | None = None
    """First-level subdivision (a Chinese province or municipality, a US state)."""
    gpus: list[str] | None = None
    """GPU families known in the region (``family`` of gpus.yaml); None: not published."""
    members: list[str] | None = Field(default=None, min_length=1)
    """A group code (a price page's ``north-america``): the regions it stands for."""

    @field_validator("code", mode="before")
    @classmethod
    def _code_text(cls, value: Any) -> str:
        return str(value)


class GpuRow(_Row):
    slug: Slug
    vendor: str
    name: str
    family: str
    memory_gb: Decimal | None = None
    memory_type: str | None = None
    memory_bandwidth_tbps: Decimal | None = None
    tflops: dict[Literal["fp64", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"], Decimal | None] = (
        Field(default_factory=dict)
    )
    die_area_mm2: Decimal | None = None
    interconnect: str | None = None
    form_factor: str | None = None
    data_center: bool = True
    tdp_w: int | None = None
    launch_year: int | None = None
    default: int | None = Field(default=None, ge=1, le=99)
    aliases: list[str] = Field(default_factory=list)

    @field_validator("memory_gb", "memory_bandwidth_tbps", "die_area_mm2", mode="before")
    @classmethod
    def _no_float(cls, value: Any) -> Any:
        return str(value) if isinstance(value, float) else value

    @field_validator("tflops", mode="before")
    @classmethod
    def _tflops_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (str(v) if isinstance(v, float) else v) for k, v in value.items()}
        return value


@dataclass
class LoadReport:
    providers: int = 0
    regions: int = 0
    gpus: int = 0
    aliases: int = 0
    changed: dict[str, int] = field(default_factory=dict)


def _read_rows(path: Path, key: str, model: type[_Row]) -> list[Any]:
    if not path.exists():
        raise ReferenceError(f"{path.name}: file not found at {path}")
    if not path.is_file():  # a FIFO would block the read for ever, /dev/zero never end
        raise ReferenceError(f"{path.name}: not a regular file")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)  # noqa: S506 (a safe loader)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ReferenceError(f"{path.name}: not valid YAML: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise ReferenceError(f"{path.name}: expected a top-level '{key}:' list")
    rows = []
    for index, item in enumerate(data[key], start=1):
        label = item.get("slug") or item.get("code") if isinstance(item, dict) else None
        try:
            rows.append(model.model_validate(item))
        except ValidationError as exc:
            where = f"{path.name} row {index}" + (f" ({label})" if label else "")
            raise ReferenceError(f"{where}: {describe_validation_error(exc)}") from None
    return rows


def read_reference(directory: Path) -> tuple[list[ProviderRow], list[RegionRow], list[GpuRow]]:
    providers = _read_rows(directory / "providers.yaml", "providers", ProviderRow)
    regions = _read_rows(directory / "regions.yaml", "regions", RegionRow)
    gpus = _read_rows(directory / "gpus.yaml", "gpus", GpuRow)
    _check_unique(providers, lambda r: r.slug, "providers.yaml", "slug")
    _check_unique(regions, lambda r: (r.provider, r.code), "regions.yaml", "provider/code")
    _check_unique(gpus, lambda r: r.slug, "gpus.yaml", "slug")
    slugs = {p.slug for p in providers}
    for index, region in enumerate(regions, start=1):
        if region.provider not in slugs:
            raise ReferenceError(
                f"regions.yaml row {index} ({region.code}): unknown provider {region.provider!r}"
            )
    _check_region_facts(regions, {g.family for g in gpus})
    return providers, regions, gpus


def _check_region_facts(regions: list[RegionRow], families: set[str]) -> None:
    """``gpus`` name known families; a group's members are plain regions of its provider
    in the group's country (a group stands for places, it is not one)."""
    rows = {(r.provider, r.code): r for r in regions}
    for index, region in enumerate(regions, start=1):
        where = f"regions.yaml row {index} ({region.provider}/{region.code})"
        unknown = sorted(set(region.gpus or ()) - families)
        if unknown:
            raise ReferenceError(
                f"{where}: gpus: unknown GPU family {unknown[0]!r} (see gpus.yaml family)"
            )
        if region.members is not None and region.gpus is not None:
            raise ReferenceError(f"{where}: a group lists members, not gpus")
        for code in region.members or ():
            member = rows.get((region.provider, code))
            if member is None:
                raise ReferenceError(
                    f"{where}: members: {code!r} is not a region of {region.provider}"
                )
            if member.members is not None:
                raise ReferenceError(f"{where}: members: {code!r} is itself a group")
            if member.country != region.country:
                raise ReferenceError(
                    f"{where}: members: {code!r} is in {member.country}, the group says "
                    f"{region.country}"
                )


def _check_unique(rows: list[Any], key: Any, file: str, what: str) -> None:
    seen: dict[Any, int] = {}
    for index, row in enumerate(rows, start=1):
        value = key(row)
        if value in seen:
            raise ReferenceError(
                f"{file} row {index}: duplicate {what} {value!r} (first at row {seen[value]})"
            )
        seen[value] = index


def name_index(gpus: list[GpuRow], aliases: dict[str, tuple[str, str]]) -> GpuNameIndex:
    """The parser's index over these rows (see :mod:`schema.gpu_names`)."""
    return GpuNameIndex.build(
        (GpuFacts(g.slug, g.name, g.memory_gb, g.form_factor, g.default) for g in gpus),
        {key: slug for key, (slug, _) in aliases.items()},
    )


def check_gpu_names(gpus: list[GpuRow], index: GpuNameIndex) -> None:
    """Every model's name reads as that model and no other, every alias the parser can
    read names its own model (otherwise two models share a spelling), and no two models
    of one designation share a default rank (a default must pick one part)."""
    ranks: dict[tuple[str, frozenset[str], int], str] = {}
    for number, gpu in enumerate(gpus, start=1):
        if gpu.default is not None:
            parsed = parse_gpu_name(gpu.name)
            key = (parsed.designation, parsed.suffixes, gpu.default)
            if key in ranks:
                raise ReferenceError(
                    f"gpus.yaml row {number} ({gpu.slug}): default {gpu.default} is also "
                    f"{ranks[key]}'s: one family default picks one model"
                )
            ranks[key] = gpu.slug
        found = index.resolve(gpu.name)
        if found.slug != gpu.slug or found.inferred:
            raise ReferenceError(
                f"gpus.yaml row {number} ({gpu.slug}): its name {gpu.name!r} reads as "
                f"{found.slug or found.reason}{' (by a default)' if found.inferred else ''}"
            )
        for alias in gpu.aliases:
            read = index.by_parser(alias)
            if read.slug is not None and read.slug != gpu.slug:
                raise ReferenceError(
                    f"gpus.yaml row {number} ({gpu.slug}): alias {alias!r} reads as "
                    f"{read.slug}: remove it or fix the model's name"
                )


def build_aliases(gpus: list[GpuRow]) -> dict[str, tuple[str, str]]:
    """Normalized alias -> (slug, spelling). Two models claiming one alias is an error."""
    aliases: dict[str, tuple[str, str]] = {}
    for gpu in gpus:
        for spelling in [gpu.slug, gpu.name, *gpu.aliases]:
            key = gpu_alias_key(spelling)
            if not key:
                continue
            owner = aliases.get(key)
            if owner is not None and owner[0] != gpu.slug:
                raise ReferenceError(
                    f"gpus.yaml: alias {spelling!r} of {gpu.slug} collides with {owner[0]} "
                    f"(both normalize to {key!r})"
                )
            aliases.setdefault(key, (gpu.slug, spelling))
    return aliases


@dataclass
class CheckedReference:
    """The catalog's reference files, read and checked (see :func:`check_reference`)."""

    providers: list[ProviderRow]
    regions: list[RegionRow]
    gpus: list[GpuRow]
    aliases: dict[str, tuple[str, str]]

    def report(self) -> LoadReport:
        """A load report of these rows, nothing changed yet."""
        return LoadReport(len(self.providers), len(self.regions), len(self.gpus), len(self.aliases))


def check_reference(directory: Path) -> CheckedReference:
    """Read and check the catalog's reference files; writes nothing."""
    providers, regions, gpus = read_reference(directory)
    aliases = build_aliases(gpus)
    check_gpu_names(gpus, name_index(gpus, aliases))
    return CheckedReference(providers, regions, gpus, aliases)


def write_reference(conn: Connection, checked: CheckedReference) -> dict[str, int]:
    """Upsert the checked rows and re-resolve the offers' GPU models, inside the caller's
    transaction (which holds :func:`lock_catalog`); returns the rows changed per kind."""
    providers, regions, gpus = checked.providers, checked.regions, checked.gpus
    changed: dict[str, int] = {}
    changed["providers"] = _upsert(
        conn,
        PROVIDER,
        ["slug"],
        [
            {
                "slug": p.slug,
                "name": p.name,
                "hq_country": p.hq_country,
                "kind": p.kind,
                "status": p.status,
                "website": p.website,
                "pricing_url": p.pricing_url,
                "source_url": p.source,
                "checked": p.checked,
                "notes": p.notes,
            }
            for p in providers
        ],
    )
    changed["gpus"] = _upsert(conn, GPU, ["slug"], [_gpu_row(g) for g in gpus])
    changed["regions"] = _upsert(
        conn,
        REGION,
        ["provider", "code"],
        [
            {
                "provider": r.provider,
                "code": r.code,
                "name": r.name,
                "country": r.country,
                "city": r.city,
                "province": r.province,
                "gpus": r.gpus,
                "members": r.members,
                "source_url": r.source,
                "checked": r.checked,
            }
            for r in regions
        ],
    )
    changed["aliases"] = _sync_aliases(conn, checked.aliases)
    changed.update(reresolve_offers(conn))
    # a TFLOPS figure or an offer's GPU model may have changed: the PFLOPS sort key follows
    changed["offer_pflop_keys"] = refresh_pflop_keys(conn)
    return changed


def lock_catalog(conn: Connection) -> None:
    """One catalog writer at a time (PostgreSQL; SQLite's write transaction already is):
    a load rewrites offers' GPU models and locations, which ingests write too. Taken first,
    before this transaction locks any row an ingest could wait for."""
    lock_writer(conn)


def _gpu_row(g: GpuRow) -> dict[str, Any]:
    row = {
        "slug": g.slug,
        "vendor": g.vendor,
        "name": g.name,
        "family": g.family,
        "memory_gb": g.memory_gb,
        "memory_type": g.memory_type,
        "memory_bandwidth_tbps": g.memory_bandwidth_tbps,
        "die_area_mm2": g.die_area_mm2,
        "interconnect": g.interconnect,
        "form_factor": g.form_factor,
        "default_rank": g.default,
        "data_center": g.data_center,
        "tdp_w": g.tdp_w,
        "launch_year": g.launch_year,
        "source_url": g.source[:1000],
        "checked": g.checked,
        "notes": g.notes,
    }
    for precision in ("fp64", "tf32", "bf16", "fp16", "fp8", "fp4"):
        row[f"tflops_{precision}"] = g.tflops.get(precision)  # type: ignore[call-overload]
    row["tops_int8"] = g.tflops.get("int8")
    return row


def _upsert(conn: Connection, table: Table, keys: list[str], rows: list[dict[str, Any]]) -> int:
    """Insert new rows, update rows whose values differ; returns how many were written."""
    columns = list(rows[0]) if rows else []
    existing = (
        {
            tuple(r[k] for k in keys): dict(r)
            for r in conn.execute(select(*[table.c[c] for c in columns])).mappings()
        }
        if rows
        else {}
    )
    written = 0
    for row in rows:
        key = tuple(row[k] for k in keys)
        old = existing.get(key)
        if old is None:
            conn.execute(sa_insert(table).values(**row))
            written += 1
        elif any(old[c] != row[c] for c in columns):
            condition = [table.c[k] == row[k] for k in keys]
            conn.execute(update(table).where(*condition).values(**row))
            written += 1
    return written


def _sync_aliases(conn: Connection, aliases: dict[str, tuple[str, str]]) -> int:
    existing = {
        a: (s, sp)
        for a, s, sp in conn.execute(select(ALIAS.c.alias, ALIAS.c.gpu_slug, ALIAS.c.spelling))
    }
    if existing == aliases:
        return 0
    conn.execute(delete(ALIAS))
    conn.execute(
        sa_insert(ALIAS),
        [
            {"alias": a, "gpu_slug": slug, "spelling": spelling[:200]}
            for a, (slug, spelling) in aliases.items()
        ],
    )
    return len(aliases)


def replace_table(
    conn: Connection,
    table: Any,
    rows: list[dict[str, Any]],
    key: Callable[[Mapping[str, Any]], tuple[Any, ...]],
    comparable: Callable[[Mapping[str, Any]], dict[str, Any]] = dict,
) -> int:
    """Make a reference table hold exactly ``rows`` (dicts of its columns); returns how many
    rows were added, changed or removed, and writes nothing when that is 0. ``key`` names a
    row; ``comparable`` makes a stored row and a file row equal when they mean the same
    (e.g. ``Decimal('25.0')`` and ``25``)."""
    wanted = {key(r): r for r in rows}
    names = list(rows[0]) if rows else [c.name for c in table.columns]
    read = conn.execute(select(*(table.c[name] for name in names))).mappings()
    stored = {key(r): comparable(r) for r in (dict(m) for m in read)}
    changed = sum(1 for k, row in wanted.items() if stored.get(k) != comparable(row))
    changed += sum(1 for k in stored if k not in wanted)
    if changed:
        conn.execute(delete(table))
        if wanted:
            conn.execute(sa_insert(table), list(wanted.values()))
    return changed
