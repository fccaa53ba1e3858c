"""SkyPilot's public catalog CSVs, and the peer-CSV toolkit shared with gpuhunt.

SkyPilot publishes one ``vms.csv`` per cloud in https://github.com/skypilot-org/skypilot-catalog
(``catalogs/<schema version>/<cloud>/vms.csv``), refreshed by that project's CI. Each cloud
becomes one source named ``skypilot:<cloud>`` (see ``crawlers/providers/skypilot.py``).

How a file is read (every quirk of the peer format lives here):

- **By header**, never by position: column order differs between clouds. A BOM, CRLF line
  ends and quoted fields are accepted. A header without InstanceType, AcceleratorName,
  AcceleratorCount, Region or Price is ``layout changed``.
- **GPU offers only.** A row without an accelerator (CPU-only) is skipped and counted; so is
  an accelerator-only row without an instance type (GCP's attachable GPUs) and a row without
  a price. An empty or zero ``Price`` means no on-demand offer, an empty or zero ``SpotPrice``
  no spot offer. Skips are counted in ``source.stats`` and logged, they are not errors.
- **Bad values are left to validation**: a non-numeric price or count is passed through as
  published, so the pipeline rejects that one record with its reason and the rest proceeds.
  A row whose field count differs from the header is malformed: skipped and counted. A quoted
  field running over line ends (an unbalanced quote swallows the rows after it) fails the
  payload as ``invalid payload``.
- **GpuInfo** is a Python-literal dict with single quotes (some clouds write JSON, one writes
  lower-case keys) or a bare GPU name. It is never evaluated: ``ast.literal_eval`` only builds
  literals, input is capped at 4 KiB, anything else is refused (counted) and the row keeps
  the AcceleratorName. Its name is used when it refines AcceleratorName (``H100`` →
  ``NVIDIA H100 PCIe``). Its memory figure is per GPU, the total, host RAM or GB mislabelled
  as MiB depending on the cloud: it is read as configured per cloud and kept only within
  1–512 GiB per GPU.
- **One record per offer**: clouds list an offer once per zone (or per host); rows of one
  (instance type, region, price kind) collapse into one record; when their prices differ the
  lowest is kept and marked ``price_floor`` ("from").
- **No place** is written ``default`` by clouds that publish none (Hyperbolic): such an
  offer's region is ``global``, placed like any globally quoted offer (docs/locations.md).
- **Currency is unstated** in the files: each cloud's currency is configured with its source
  and recorded on every record. Amounts are decimal strings; float noise beyond 6 decimal
  places (``0.36979999999999996``) is rounded off.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import logging
import re
from array import array
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import IO, Any, ClassVar, Literal, Protocol, cast

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
from crawlers.size import announce
from schema.memo import per_text
from schema.names import gpu_alias_key

log = logging.getLogger(__name__)

SKYPILOT_BASE_URL = "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master"

UNPLACED_REGIONS = frozenset({"default"})
"""Region names a cloud writes when it publishes no place (Hyperbolic: ``default``): the
offer is quoted for wherever the provider runs it, our region ``global``."""
AMOUNT_PLACES = 6
"""Peers write Python floats; digits past this many decimal places are float noise."""
MAX_GPU_INFO_CHARS = 4096
MIN_GPU_MEMORY_GIB = Decimal(1)
MAX_GPU_MEMORY_GIB = Decimal(512)
_MIB_PER_GIB = Decimal(1024)
_GIB_PLACES = Decimal("0.01")
_BARE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+/()-]{0,79}$")
_ISO_CODE = re.compile(r"^[A-Z]{2}$")
_VAST_LOCATION = re.compile(r",\s*([A-Z]{2})\s*,\s*[A-Z]{2}\s*$")
_PEER_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,40}$")

RegionMode = Literal["region", "zone"]
GpuMemoryMode = Literal["per_gpu", "total"] | None


# --------------------------------------------------------------------------- peer-CSV toolkit


def payload_bytes(response: Response) -> bytes:
    """The whole payload, whether it was kept in memory or spooled to a file."""
    if response.path is not None:
        return response.path.read_bytes()
    return response.body


def read_csv(
    payload: bytes | Callable[[], IO[bytes]],
    required: Iterable[str],
    stats: Counter[str],
    *,
    what: str,
    quiet: bool = False,
) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of a CSV payload (its bytes, or a function opening it) as ``(line number,
    {column: stripped value})``, read by header.

    A missing required column is ``layout changed``; a row whose field count differs from
    the header is skipped and counted (logged unless ``quiet``: a payload read again); a
    field spanning line ends is ``invalid payload``.
    """
    # decoded as it is read (a decode error becomes 'invalid payload' upstream): a whole
    # decoded copy in a StringIO took 4 bytes a character (78 MB for a 16 MB catalog)
    handle = io.BytesIO(payload) if isinstance(payload, bytes) else payload()
    with io.TextIOWrapper(handle, encoding="utf-8-sig", newline="") as text:
        yield from _rows(text, required, stats, what, quiet)


def _rows(
    text: IO[str], required: Iterable[str], stats: Counter[str], what: str, quiet: bool
) -> Iterator[tuple[int, dict[str, str]]]:
    reader = csv.reader(text)
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise LayoutChanged(f"{what}: empty file, no header") from None
    except csv.Error as exc:
        raise LayoutChanged(f"{what}: unreadable header ({exc})") from None
    missing = [name for name in required if name not in header]
    if missing:
        shown = ", ".join(header[:12])[:200]
        raise LayoutChanged(f"{what}: missing column(s) {', '.join(missing)} (header: {shown})")
    duplicated = sorted({name for name in header if name and header.count(name) > 1})
    if duplicated:
        raise LayoutChanged(f"{what}: duplicated column(s) {', '.join(duplicated)}")
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # e.g. a field over the csv module's size limit
            stats["skipped: unreadable row"] += 1
            if not quiet:
                log.warning("%s line %d: unreadable row (%s)", what, reader.line_num, exc)
            continue
        joined = "".join(fields)  # one string to look at: a third of the time of field by field
        if not joined.strip():
            continue
        if "\n" in joined or "\r" in joined:
            raise SourceError("invalid payload", f"{what} line {reader.line_num}: unbalanced quote")
        if len(fields) != len(header):
            stats["skipped: malformed row"] += 1
            if not quiet:
                log.warning(
                    "%s line %d: %d fields, header has %d",
                    what,
                    reader.line_num,
                    len(fields),
                    len(header),
                )
            continue
        stats["rows"] += 1
        yield reader.line_num, dict(zip(header, map(str.strip, fields), strict=True))


@per_text
def parse_decimal(text: object) -> Decimal | None:
    """A finite decimal from its text, or None (never through a binary float)."""
    if text is None or isinstance(text, bool):
        return None
    value = str(text).strip()
    if not value or len(value) > 40:
        return None
    try:
        number = Decimal(value)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def plain(number: Decimal) -> str:
    """``8.0`` → ``8``, ``1E+2`` → ``100``: a decimal without exponent or trailing zeros."""
    text = format(number.normalize(), "f")
    return "0" if text in ("-0", "") else text


@per_text
def amount_text(text: str) -> str:
    """A price as published, float noise past 6 decimal places rounded off.

    Text that is not a number is returned unchanged, so validation rejects the record with
    its reason instead of this module guessing.
    """
    number = parse_decimal(text)
    if number is None:
        return text.strip()
    exponent = number.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -AMOUNT_PLACES:
        return plain(number.quantize(Decimal(1).scaleb(-AMOUNT_PLACES), ROUND_HALF_EVEN))
    return text.strip()


@per_text
def number_text(text: str | None) -> str | None:
    """A count or size (``8.0`` → ``8``); empty → None; non-numeric text unchanged."""
    if text is None or not text.strip():
        return None
    number = parse_decimal(text)
    if number is None:
        return text.strip()
    exponent = number.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -AMOUNT_PLACES:
        number = number.quantize(Decimal(1).scaleb(-AMOUNT_PLACES), ROUND_HALF_EVEN)
    return plain(number)


_LAST_TIME: list[tuple[object, str]] = [(object(), "")]


def iso_time(moment: datetime) -> str:
    """``moment.isoformat()``, worked out once per payload (its rows share one
    ``fetched_at`` object) rather than once per row. Told apart by identity, not equality:
    equal instants in two time zones are written differently."""
    last, text = _LAST_TIME[0]
    if last is not moment:
        text = moment.isoformat()
        _LAST_TIME[0] = (moment, text)
    return text


def plausible_gpu_memory(gib: Decimal | None) -> str | None:
    """Per-GPU memory in GiB as text, or None when missing or outside 1–512 GiB."""
    if gib is None or not (MIN_GPU_MEMORY_GIB <= gib <= MAX_GPU_MEMORY_GIB):
        return None
    return plain(gib.quantize(_GIB_PLACES, ROUND_HALF_EVEN))


def refine_gpu_name(accelerator: str, detail: str | None) -> str:
    """The more specific of two spellings of one GPU.

    ``detail`` is used when it names everything ``accelerator`` names (``H100`` →
    ``NVIDIA H100 PCIe``), never when it drops something (``A100-80GB`` → ``A100``).
    """
    if not detail:
        return accelerator
    wanted = set(gpu_alias_key(accelerator).split())
    offered = set(gpu_alias_key(detail).split())
    return detail if wanted <= offered else accelerator


def iso_code_country(region: str, zone: str) -> str | None:
    """The region column is an ISO 3166 alpha-2 code (RunPod, Prime Intellect)."""
    return region if _ISO_CODE.match(region) else None


def vast_location_country(region: str, zone: str) -> str | None:
    """Vast.ai locations read ``State, CC, continent`` (``Florida, US, NA``)."""
    match = _VAST_LOCATION.search(region)
    return match.group(1) if match else None


COUNTRY_RULES: dict[str, Callable[[str, str], str | None]] = {
    "iso-code": iso_code_country,
    "vast-location": vast_location_country,
}


Identity = tuple[Any, Any, Any, Any]
"""What the collapse reads of a record: ``(sku, region, price kind, amount text)``."""

_NO_AMOUNT = Decimal(0)
HOLD = 5_000
"""Winners held at most while the collapse waits for an earlier offer's (an offer whose
lowest price comes after the next offer's first row); past that many the payload is read
once more for the rest (:func:`collapsed`)."""


def identity(record: RawRecord) -> Identity:
    """What :func:`collapsed` reads of a raw record."""
    return (record.get("sku"), record.get("region"), record.get("price_kind"), record.get("amount"))


@dataclass
class Winners:
    """A collapse's first pass, a few bytes a record: for each record, in order, the offer
    it stands for in the output (its position there) or -1 (a row outbid or tied by an
    earlier one); and per offer whether its rows disagree on the price (a floor)."""

    slots: array[int]
    floors: bytearray

    @classmethod
    def of(cls, identities: Iterable[Identity]) -> Winners:
        slots: array[int] = array("q")
        floors = bytearray()
        winner: array[int] = array("q")  # per offer: the position of its record so far
        lowest: list[Decimal] = []
        offers: dict[int, int] = {}  # (sku, region, kind) numbered, packed in one int
        numbers: tuple[dict[Any, int], ...] = ({}, {}, {})
        for position, (sku, region, kind, text) in enumerate(identities):
            amount = parse_decimal(text)
            if amount is not None:
                key = 0
                for part, table in zip((sku, region, kind), numbers, strict=True):
                    number = table.get(part)
                    if number is None:
                        number = table[part] = len(table)
                    key = (key << 32) | number
                offer = offers.get(key)
                if offer is not None:
                    slots.append(-1)
                    if amount != lowest[offer]:
                        floors[offer] = 1
                        if amount < lowest[offer]:
                            lowest[offer] = amount
                            slots[winner[offer]] = -1
                            slots[position] = offer
                            winner[offer] = position
                    continue
                offers[key] = len(floors)
            # a new offer, or a record whose amount is not a number (it passes through, for
            # validation to reject)
            slots.append(len(floors))
            floors.append(0)
            winner.append(position)
            lowest.append(_NO_AMOUNT if amount is None else amount)
        return cls(slots, floors)


def collapsed(
    identities: Iterable[Identity],
    reading: Callable[[bool], Iterable[RawRecord]],
    *,
    hold: int = HOLD,
) -> Generator[RawRecord, None, int]:
    """One record per offer identity (sku, region, price kind), in first-seen order,
    without holding the records: returns the number of offers.

    Peers list an offer once per zone or per host. When the rows agree on the price one
    record stands for them (the first); when they differ the first of the lowest is kept
    and marked as a floor. Records whose amount is not a number pass through untouched, for
    validation to reject. ``identities`` gives what the collapse reads of each record
    (:func:`identity`), in order; ``reading(first)`` the records themselves, as often as
    asked (each reading parses the payload again; ``first`` is true once). Between the two
    only :class:`Winners` is held; a reading hands on each offer's record as it comes,
    holding (at most ``hold``) those that come before an earlier offer's."""
    winners = Winners.of(identities)
    slots, floors = winners.slots, winners.floors
    total = len(floors)
    announce(total)  # a size hint: the crawl's ingest may plan for these many offers
    done = 0  # offers handed on
    first = True
    while first or done < total:
        held: dict[int, RawRecord] = {}
        count = 0
        for position, record in enumerate(reading(first)):
            if position >= len(slots):
                raise RuntimeError(
                    f"a reading gave more records than the first pass's {len(slots)}"
                )
            count = position + 1
            offer = slots[position]
            if offer < done or offer >= done + hold:
                continue  # outbid, handed on already, or left for the next reading
            if floors[offer]:
                record = {**record, "price_floor": True}
            if offer > done:
                held[offer] = record
                continue
            yield record
            done += 1
            while done in held:
                yield held.pop(done)
                done += 1
        if count != len(slots):
            raise RuntimeError(f"a reading gave {count} records, the first pass {len(slots)}")
        first = False
    return total


def collapse(records: Iterable[RawRecord]) -> list[RawRecord]:
    """:func:`collapsed` of records in hand."""
    kept = list(records)
    return list(collapsed(map(identity, kept), lambda first: kept))


class PeerCsv(Protocol):
    """What :func:`csv_offers` asks of a peer-CSV source."""

    name: ClassVar[str]
    REQUIRED: ClassVar[tuple[str, ...]]
    stats: Counter[str]

    def identities(self, row: Mapping[str, str], stats: Counter[str]) -> list[Identity]:
        """What the collapse reads of each record :meth:`offers` makes of ``row``, counting
        what it skips as :meth:`offers` does."""
        ...

    def offers(
        self,
        row: Mapping[str, str],
        line: int,
        response: Response,
        stats: Counter[str] | None = None,
        quiet: bool = False,
    ) -> list[RawRecord]: ...


def csv_offers(
    source: PeerCsv, body: bytes | Callable[[], IO[bytes]], response: Response
) -> Iterator[RawRecord]:
    """The collapsed records of one peer CSV (its bytes, or a function opening it), handed
    on one by one (:func:`collapsed`).

    The CSV is read twice or more: once for its identities (``source.identities``, which
    builds no record), then for its records (``source.offers``). The first reading of the
    records counts the source's ``stats`` and logs what it skips, so they are what one
    reading gives."""
    what = f"{source.name} {response.url}"

    def identities() -> Iterator[Identity]:
        counts: Counter[str] = Counter()
        for _, row in read_csv(body, source.REQUIRED, counts, what=what, quiet=True):
            yield from source.identities(row, counts)

    def reading(first: bool) -> Iterator[RawRecord]:
        counts = source.stats if first else Counter()
        for line, row in read_csv(body, source.REQUIRED, counts, what=what, quiet=not first):
            yield from source.offers(row, line, response, counts, not first)

    offers = yield from collapsed(identities(), reading)
    source.stats["offers"] += offers
    log.info("%s: %s", what, dict(sorted(source.stats.items())))


# --------------------------------------------------------------------------- GpuInfo


class GpuInfoRefused(ValueError):
    """A GpuInfo value that is not a literal description of GPUs; it is not used."""


@dataclass(frozen=True)
class GpuInfo:
    name: str | None = None
    count: Decimal | None = None
    memory_mib: Decimal | None = None


def _lower_keys(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {}
    return {str(key).lower(): item for key, item in value.items()}


def parse_gpu_info(text: str) -> GpuInfo:
    """Read a GpuInfo cell without evaluating it. Raises :class:`GpuInfoRefused`."""
    text = text.strip()
    if not text:
        return GpuInfo()
    if len(text) > MAX_GPU_INFO_CHARS:
        raise GpuInfoRefused(f"{len(text)} characters (limit {MAX_GPU_INFO_CHARS})")
    if text[0] not in "{[":
        if _BARE_NAME.match(text):
            return GpuInfo(name=text)
        raise GpuInfoRefused("neither a literal dict nor a GPU name")
    try:
        value: Any = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise GpuInfoRefused("not a literal") from None
    gpus = _lower_keys(value).get("gpus")
    if not isinstance(gpus, list) or not gpus or not isinstance(gpus[0], dict):
        raise GpuInfoRefused("no Gpus list")
    first = _lower_keys(gpus[0])
    name = first.get("name")
    clean_name = name.strip() if isinstance(name, str) and _BARE_NAME.match(name.strip()) else None
    memory = _lower_keys(first.get("memoryinfo")).get("sizeinmib")
    return GpuInfo(
        name=clean_name,
        count=parse_decimal(first.get("count")),
        memory_mib=parse_decimal(memory),
    )


def per_gpu_memory(info: GpuInfo, mode: GpuMemoryMode, gpu_count: Decimal | None) -> str | None:
    """Per-GPU memory (GiB) from GpuInfo, read as the cloud writes it, if plausible."""
    if mode is None or info.memory_mib is None:
        return None
    mib = info.memory_mib
    if mode == "total":
        if not gpu_count or gpu_count <= 0:
            return None
        mib = mib / gpu_count
    return plausible_gpu_memory(mib / _MIB_PER_GIB)


# --------------------------------------------------------------------------- the platform


class SkyPilotCatalog(ApiSource):
    """One SkyPilot cloud's ``vms.csv``. Subclasses (made by :func:`skypilot_source`) set the
    cloud, our provider slug, the assumed currency and how the cloud writes regions."""

    kind = "peer"
    schedule = "6h"
    parser_version = "1"
    base_url = SKYPILOT_BASE_URL
    currency: ClassVar[str | None] = "USD"
    docs_url = "https://github.com/skypilot-org/skypilot-catalog"
    terms_url = "https://github.com/skypilot-org/skypilot-catalog/blob/master/LICENSE"
    fixtures = "skypilot"
    reads_path = True

    peer: ClassVar[str]
    """SkyPilot's name of the cloud (the catalog folder)."""
    catalog_version: ClassVar[str] = "v8"
    region_mode: ClassVar[RegionMode] = "region"
    """``zone``: the AvailabilityZone column is the provider's own location code."""
    gpu_memory: ClassVar[GpuMemoryMode] = "per_gpu"
    """How this cloud's GpuInfo SizeInMiB reads (None: not GPU memory, ignore it)."""
    country_rule: ClassVar[str | None] = None
    seed_fixtures: ClassVar[list[str]] = []
    """This cloud's sample in ``fixtures/skypilot`` (the folder is shared by every cloud):
    ``<cloud>.csv`` unless the source names another."""

    REQUIRED: ClassVar[tuple[str, ...]] = (
        "InstanceType",
        "AcceleratorName",
        "AcceleratorCount",
        "Region",
        "Price",
    )

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()

    @classmethod
    def catalog_path(cls) -> str:
        return f"/catalogs/{cls.catalog_version}/{cls.peer}/vms.csv"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(ctx.base_url.rstrip("/") + self.catalog_path())

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        yield from csv_offers(self, response.open, response)

    def leads_nowhere(self, response: Response) -> bool:
        return True

    def offers(
        self,
        row: Mapping[str, str],
        line: int,
        response: Response,
        stats: Counter[str] | None = None,
        quiet: bool = False,
    ) -> list[RawRecord]:
        """The on-demand and spot records of one row (none for a non-GPU or unpriced row),
        what it skips counted in ``stats`` (by default the source's) and logged unless
        ``quiet``."""
        stats = self.stats if stats is None else stats
        if not self.offered(row, stats):
            return []
        count_text = row["AcceleratorCount"]
        count = parse_decimal(count_text)
        sku = row["InstanceType"]
        try:
            info = parse_gpu_info(row.get("GpuInfo", ""))
        except GpuInfoRefused as exc:
            stats["gpu info refused"] += 1
            if not quiet:
                log.warning("%s line %d: GpuInfo refused (%s)", self.name, line, exc)
            info = GpuInfo()
        region, country = self.location(row)
        accelerator = row["AcceleratorName"]
        base: RawRecord = {
            "sku": sku,
            "gpu_name_raw": with_sku_form_factor(refine_gpu_name(accelerator, info.name), sku),
            "gpu_count": number_text(count_text) or count_text,
            "gpu_memory_gb": per_gpu_memory(info, self.gpu_memory, count),
            "vcpus": number_text(row.get("vCPUs")),
            "memory_gb": number_text(row.get("MemoryGiB")),
            "region": region,
            "price_kind": "on_demand",
            "unit": "hour",
            "price_per": "instance",
            "currency": self.currency,
            "source_url": response.url,
            "observed_at": iso_time(response.fetched_at),
        }
        if country:
            base["country"] = country
        return [
            {**base, "price_kind": kind, "amount": amount}
            for kind, amount in self.prices(row, stats)
        ]

    def identities(self, row: Mapping[str, str], stats: Counter[str]) -> list[Identity]:
        if not self.offered(row, stats):
            return []
        sku, (region, _) = row["InstanceType"], self.location(row)
        return [(sku, region, kind, amount) for kind, amount in self.prices(row, stats)]

    def offered(self, row: Mapping[str, str], stats: Counter[str]) -> bool:
        """Whether a row is a GPU instance (counted in ``stats`` when it is not)."""
        count = parse_decimal(row["AcceleratorCount"])
        if not row["AcceleratorName"] or (count is not None and count == 0):
            stats["skipped: no accelerator (CPU-only)"] += 1
            return False
        if not row["InstanceType"]:
            stats["skipped: accelerator-only row (no instance type)"] += 1
            return False
        return True

    def prices(self, row: Mapping[str, str], stats: Counter[str]) -> list[tuple[str, str]]:
        """``(price kind, amount)`` of each price a row gives (counted when it gives none)."""
        found = []
        for kind, column in (("on_demand", "Price"), ("spot", "SpotPrice")):
            text = row.get(column, "")
            if not text:
                continue
            value = parse_decimal(text)
            if value is not None and value == 0:
                stats[f"skipped: zero {kind} price"] += 1
                continue
            found.append((kind, amount_text(text)))
        if not found:
            stats["skipped: no price"] += 1
        return found

    def location(self, row: Mapping[str, str]) -> tuple[str, str | None]:
        """(our region code, country if the cloud's location says it)."""
        region = row.get("Region", "")
        zone = row.get("AvailabilityZone", "")
        code = zone if self.region_mode == "zone" and zone else region
        if code in UNPLACED_REGIONS:
            code = "global"
        rule = COUNTRY_RULES.get(self.country_rule) if self.country_rule else None
        return code, rule(region, zone) if rule else None


def skypilot_source(
    peer: str,
    provider: str | None = None,
    *,
    currency: str = "USD",
    version: str = "v8",
    region_mode: RegionMode = "region",
    gpu_memory: GpuMemoryMode = "per_gpu",
    country_rule: str | None = None,
    fixture: str | None = None,
    note: str = "",
    module: str = __name__,
) -> type[SkyPilotCatalog]:
    """A source class ``skypilot:<peer>`` for one SkyPilot cloud mapped to our ``provider``
    (by default the cloud's own name).

    Each row of the table in ``crawlers/providers/skypilot.py`` says what the file does not:
    its ``currency`` (assumed; recorded on every record), which catalog schema ``version``
    carries the cloud, whether the AvailabilityZone column is the provider's own location
    code (``region_mode="zone"``), how to read GpuInfo's memory figure (``gpu_memory``),
    how a region names its country (``country_rule``), and the ``fixture`` it seeds from
    (``<peer>.csv`` by default).
    """
    provider = provider or peer
    if not _PEER_NAME.match(peer) or not _PEER_NAME.match(provider):
        raise ValueError(f"bad peer or provider slug: {peer!r} → {provider!r}")
    if not re.fullmatch(r"[A-Z]{3}", currency):
        raise ValueError(f"bad currency {currency!r} for skypilot:{peer}")
    if country_rule is not None and country_rule not in COUNTRY_RULES:
        raise ValueError(f"unknown country rule {country_rule!r}")
    class_name = "SkyPilot" + "".join(part.capitalize() for part in re.split(r"[^a-z0-9]", peer))
    attributes: dict[str, Any] = {
        "name": f"skypilot:{peer}",
        "provider": provider,
        "peer": peer,
        "currency": currency,
        "catalog_version": version,
        "region_mode": region_mode,
        "gpu_memory": gpu_memory,
        "country_rule": country_rule,
        "seed_fixtures": [fixture or f"{peer}.csv"],
        "__module__": module,
        "__doc__": f"SkyPilot's {peer} catalog → {provider!r} ({currency}). {note}".strip(),
    }
    return cast(type[SkyPilotCatalog], type(class_name, (SkyPilotCatalog,), attributes))
