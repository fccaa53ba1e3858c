"""dstack gpuhunt's published catalog: one zipped CSV per provider, versioned.

gpuhunt (https://github.com/dstackai/gpuhunt) publishes the providers it can collect
offline, each on its own, under ``https://dstack-gpu-pricing.s3.eu-west-1.amazonaws.com/v3``:

- ``/<provider>/version`` — the latest version, e.g. ``20251128-412``;
- ``/<provider>/<version>/catalog.zip`` — a zip holding ``<provider>.csv``.

A crawl fetches the version first, then that version's immutable zip (both payloads are kept
with the crawl run). Online-only gpuhunt providers (Vast.ai, Vultr, Crusoe...) are queried
live by the library and never published, so they cannot be imported from here.

The CSV (gpuhunt's ``CATALOG_V2_FIELDS``, written by ``csv.DictWriter``: CRLF) has
instance_name, location, price (USD per hour), cpu, memory (GB), gpu_count, gpu_name,
gpu_memory (GB per GPU), spot (``True``/``False``), disk_size, gpu_vendor, flags
(space-separated), cpu_arch, provider_data (JSON). Older catalogs lack the last columns.
Rows are read by header, as in the SkyPilot platform (shared toolkit): CPU-only rows
(gpu_count 0) and unpriced rows are skipped and counted, bad values are left to validation,
rows of one offer collapse into one record (the lowest price, marked as a floor when they
differ). gpuhunt's ``instance_name`` is not unique for every provider (RunPod names a GPU
type, Nebius a platform with several presets): the SKU adds the GPU count or the whole shape
where configured, and the flags (``runpod-cluster``) when present.

The zip is untrusted: at most 64 members, the CSV at most 256 MiB uncompressed and at most
100 times its compressed size, read with a bounded read.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import IO, Any, ClassVar, Literal, cast

from crawlers.base import (
    ApiSource,
    Context,
    LayoutChanged,
    RawRecord,
    Request,
    Response,
    SourceError,
)
from crawlers.normalize.gpu_form import with_sku_form_factor
from crawlers.normalize.reference import reference_index
from crawlers.platforms.skypilot import (
    COUNTRY_RULES,
    Identity,
    amount_text,
    csv_offers,
    iso_time,
    number_text,
    parse_decimal,
    payload_bytes,
    plain,
    plausible_gpu_memory,
)

log = logging.getLogger(__name__)

GPUHUNT_BASE_URL = "https://dstack-gpu-pricing.s3.eu-west-1.amazonaws.com"
CHANNEL = "v3"
VERSION_BYTES = 80
"""A version file is at most this long."""
MAX_ZIP_MEMBERS = 64
MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_COMPRESSION_RATIO = 100
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ZONE_SUFFIX = re.compile(r"^(.+\d)-[a-z]$")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,40}$")

_PRICE_KINDS = {"true": "spot", "false": "on_demand"}
"""The ``spot`` column's values; any other is passed on as published, for validation."""

SkuMode = Literal["name", "gpus", "shape"]


def parse_version(body: bytes) -> str:
    """The version named by a ``version`` file; anything else is ``layout changed``."""
    text = body.decode("utf-8", errors="replace").strip()
    if not _VERSION.match(text):
        raise LayoutChanged(f"version file does not name a version: {text[:60]!r}")
    return text


def looks_like_version(body: bytes) -> bool:
    return len(body) <= VERSION_BYTES and b"," not in body and len(body.strip().splitlines()) == 1


def read_member(archive: bytes, member: str) -> bytes:
    """The bytes of one member of an untrusted zip, within the size caps."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_ZIP_MEMBERS:
                raise SourceError("too large", f"catalog.zip has {len(infos)} members")
            info = next((i for i in infos if i.filename.rsplit("/", 1)[-1] == member), None)
            if info is None:
                names = ", ".join(i.filename for i in infos[:10])
                raise LayoutChanged(f"catalog.zip has no {member} (members: {names})")
            limit = min(MAX_MEMBER_BYTES, max(info.compress_size, 1) * MAX_COMPRESSION_RATIO)
            if info.file_size > limit:
                raise SourceError(
                    "too large", f"{member}: {info.file_size} bytes unpacked (limit {limit})"
                )
            with zf.open(info) as handle:
                data = handle.read(limit + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
        raise SourceError("invalid payload", f"catalog.zip: {exc}"[:300]) from None
    if len(data) > limit:
        raise SourceError("too large", f"{member}: more than {limit} bytes unpacked")
    return data


def gpu_spelling(name: str, memory_gb: str | None) -> str | None:
    """gpuhunt's GPU name, with its memory when that names a known model more precisely.

    gpuhunt writes ``A100`` for both the 40 GB and the 80 GB part and tells them apart by
    ``gpu_memory``; ``A100 80GB`` is used when the reference data knows that spelling.
    """
    if not name:
        return None
    if memory_gb:
        rounded = parse_decimal(memory_gb)
        if rounded is not None:
            candidate = f"{name} {plain(rounded.quantize(Decimal(1)))}GB"
            if reference_index().gpu(candidate):
                return candidate
    return name


class GpuhuntCatalog(ApiSource):
    """One provider of gpuhunt's published catalog. Subclasses come from
    :func:`gpuhunt_source`."""

    kind = "peer"
    schedule = "6h"
    parser_version = "1"
    base_url = GPUHUNT_BASE_URL
    currency: ClassVar[str | None] = "USD"
    """gpuhunt documents ``price`` as "$ per hour" for every provider."""
    docs_url = "https://github.com/dstackai/gpuhunt"
    terms_url = "https://github.com/dstackai/gpuhunt/blob/main/LICENSE"
    fixtures = "gpuhunt"
    reads_path = True

    peer: ClassVar[str]
    """gpuhunt's provider name (the catalog folder and the CSV's name)."""
    sku_mode: ClassVar[SkuMode] = "name"
    zone_locations: ClassVar[bool] = False
    """Locations are zones (``us-central1-a``): the region is the zone without its letter."""
    country_rule: ClassVar[str | None] = None
    seed_fixtures: ClassVar[list[str]] = []
    """This provider's sample in ``fixtures/gpuhunt`` (the folder is shared): ``<peer>.csv``
    unless the source names another."""

    REQUIRED: ClassVar[tuple[str, ...]] = (
        "instance_name",
        "location",
        "price",
        "gpu_count",
        "gpu_name",
        "spot",
    )

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(
            f"{ctx.base_url.rstrip('/')}/{CHANNEL}/{self.peer}/version", meta={"step": "version"}
        )

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        with response.open() as handle:  # a saved catalog is read from its file
            head = handle.read(VERSION_BYTES + 1)
        step = response.meta.get("step")
        if step == "version" or (step is None and looks_like_version(head)):
            version = parse_version(payload_bytes(response))
            yield Request(
                f"{ctx.base_url.rstrip('/')}/{CHANNEL}/{self.peer}/{version}/catalog.zip",
                meta={"step": "catalog", "version": version},
            )
            return
        table: bytes | Callable[[], IO[bytes]] = response.open
        if step == "catalog" or head[:4] == b"PK\x03\x04":
            table = read_member(payload_bytes(response), f"{self.peer}.csv")
        yield from csv_offers(self, table, response)

    def leads_nowhere(self, response: Response) -> bool:
        return response.meta.get("step") == "catalog"

    def offers(
        self,
        row: Mapping[str, str],
        line: int,
        response: Response,
        stats: Counter[str] | None = None,
        quiet: bool = False,
    ) -> list[RawRecord]:
        """The record of one row (none for a non-GPU or unpriced row), what it skips
        counted in ``stats`` (by default the source's)."""
        found = self.identities(row, self.stats if stats is None else stats)
        if not found:
            return []
        ((sku, region, kind, amount),) = found
        count_text = row["gpu_count"]
        memory = plausible_gpu_memory(parse_decimal(row.get("gpu_memory")))
        name = gpu_spelling(row["gpu_name"], memory)
        record: RawRecord = {
            "sku": sku,
            "gpu_name_raw": name and with_sku_form_factor(name, sku),
            "gpu_count": number_text(count_text) or count_text,
            "gpu_memory_gb": memory,
            "vcpus": number_text(row.get("cpu")),
            "memory_gb": number_text(row.get("memory")),
            "region": region,
            "price_kind": kind,
            "unit": "hour",
            "price_per": "instance",
            "amount": amount,
            "currency": self.currency,
            "source_url": response.url,
            "observed_at": iso_time(response.fetched_at),
        }
        rule = COUNTRY_RULES.get(self.country_rule) if self.country_rule else None
        if rule and (country := rule(row["location"], "")):
            record["country"] = country
        return [record]

    def identities(self, row: Mapping[str, str], stats: Counter[str]) -> list[Identity]:
        count_text = row["gpu_count"]
        count = parse_decimal(count_text)
        if (count is not None and count == 0) or (not count_text and not row["gpu_name"]):
            stats["skipped: no accelerator (CPU-only)"] += 1
            return []
        price = row["price"]
        value = parse_decimal(price)
        if not price or (value is not None and value == 0):
            stats["skipped: no price"] += 1
            return []
        kind = _PRICE_KINDS.get(row["spot"].lower(), row["spot"])
        region = location = row["location"]
        if self.zone_locations and (match := _ZONE_SUFFIX.match(location)):
            region = match.group(1)
        return [(self.sku(row, count_text), region, kind, amount_text(price))]

    def sku(self, row: Mapping[str, str], count_text: str) -> str:
        """gpuhunt's instance name, made unique per offer where the provider needs it."""
        name = row["instance_name"]
        gpus = number_text(count_text) or count_text
        if self.sku_mode == "gpus":
            name = f"{gpus}x {name}"
        elif self.sku_mode == "shape":
            cpu = number_text(row.get("cpu")) or "?"
            memory = number_text(row.get("memory")) or "?"
            name = f"{name} {gpus}gpu-{cpu}vcpu-{memory}gb"
        flags = sorted(row.get("flags", "").split())
        return f"{name} [{' '.join(flags)}]" if flags else name


def gpuhunt_source(
    peer: str,
    provider: str,
    *,
    sku_mode: SkuMode = "name",
    zone_locations: bool = False,
    country_rule: str | None = None,
    fixture: str | None = None,
    note: str = "",
    module: str = __name__,
) -> type[GpuhuntCatalog]:
    """A source class ``gpuhunt:<peer>`` for one gpuhunt provider mapped to our ``provider``."""
    if not _SLUG.match(peer) or not _SLUG.match(provider):
        raise ValueError(f"bad peer or provider slug: {peer!r} → {provider!r}")
    if country_rule is not None and country_rule not in COUNTRY_RULES:
        raise ValueError(f"unknown country rule {country_rule!r}")
    class_name = "Gpuhunt" + "".join(part.capitalize() for part in re.split(r"[^a-z0-9]", peer))
    attributes: dict[str, Any] = {
        "name": f"gpuhunt:{peer}",
        "provider": provider,
        "peer": peer,
        "sku_mode": sku_mode,
        "zone_locations": zone_locations,
        "country_rule": country_rule,
        "seed_fixtures": [fixture or f"{peer}.csv"],
        "__module__": module,
        "__doc__": f"gpuhunt's {peer} catalog → provider {provider!r}. {note}".strip(),
    }
    return cast(type[GpuhuntCatalog], type(class_name, (GpuhuntCatalog,), attributes))
