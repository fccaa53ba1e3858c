"""Peer catalog CSVs (gpuhunt, SkyPilot) generated to exercise the collapse of an offer's
rows (zones, hosts, ties, repeats far apart, missing and unreadable prices), and how a
payload was parsed before the collapse streamed: every record in hand, then collapsed
(:func:`collapse_as_before`, the former ``crawlers.platforms.skypilot.collapse``)."""

from __future__ import annotations

import csv
import io
import random
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, cast

from crawlers.base import RawRecord, Response
from crawlers.platforms.gpuhunt import GpuhuntCatalog
from crawlers.platforms.skypilot import SkyPilotCatalog, parse_decimal, read_csv

PRICES = ("1.5", "1.50", "2", "0.9", "", "0", "N/A", "1.4999999999", "3.0", "2.0000001", "7")
"""Ties (``1.5``/``1.50``, ``3``/``3.0``), float noise, missing, zero, unreadable."""

GPUHUNT_HEADER = [
    "instance_name",
    "location",
    "price",
    "cpu",
    "memory",
    "gpu_count",
    "gpu_name",
    "gpu_memory",
    "spot",
    "disk_size",
    "gpu_vendor",
    "flags",
    "cpu_arch",
    "provider_data",
]
SKYPILOT_HEADER = [
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "vCPUs",
    "MemoryGiB",
    "Price",
    "Region",
    "GpuInfo",
    "SpotPrice",
    "AvailabilityZone",
]
GPU_INFO = "{'Gpus': [{'Name': 'A10G', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 24576}}]}"


def collapse_as_before(records: Iterable[RawRecord]) -> list[RawRecord]:
    """One record per offer identity (sku, region, price kind), in first-seen order: the
    first of the lowest price, marked as a floor when the rows differ; records whose
    amount is not a number pass through. The collapse as it was, holding every record."""
    order: list[tuple[Any, ...] | RawRecord] = []
    groups: dict[tuple[Any, ...], list[tuple[Decimal, RawRecord]]] = {}
    for record in records:
        amount = parse_decimal(record.get("amount"))
        if amount is None:
            order.append(record)
            continue
        key = (record.get("sku"), record.get("region"), record.get("price_kind"))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append((amount, record))
    result: list[RawRecord] = []
    for item in order:
        if isinstance(item, dict):
            result.append(item)
            continue
        group = groups[cast(tuple[Any, ...], item)]
        lowest, best = min(group, key=lambda pair: pair[0])
        if any(amount != lowest for amount, _ in group):
            best = {**best, "price_floor": True}
        result.append(best)
    return result


def parsed_as_before(
    source: GpuhuntCatalog | SkyPilotCatalog, table: bytes, response: Response
) -> tuple[list[RawRecord], Counter[str]]:
    """The records and stats of one CSV as its parser gave them before: every row's
    records in hand, then collapsed."""
    stats: Counter[str] = Counter()
    what = f"{source.name} {response.url}"
    records = [
        record
        for line, row in read_csv(table, source.REQUIRED, stats, what=what)
        for record in source.offers(row, line, response, stats)
    ]
    offers = collapse_as_before(records)
    stats["offers"] += len(offers)
    return offers, stats


def peer_csv(source: type, rows: int, seed: int) -> bytes:
    """A CSV in ``source``'s format: ``rows`` rows over a few instance types and places,
    zones of one region, both price kinds, the prices of :data:`PRICES`, CPU-only rows
    and rows without an instance type; repeats of an offer come anywhere in the file."""
    rnd = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    if issubclass(source, GpuhuntCatalog):
        writer.writerow(GPUHUNT_HEADER)
        for _ in range(rows):
            region = rnd.choice(["us-central1", "europe-west4", "asia-east1", "US", "CA"])
            writer.writerow(
                [
                    f"a2-x{rnd.randrange(12)}",
                    f"{region}-{rnd.choice('abc')}",
                    rnd.choice(PRICES),
                    rnd.choice(["12", "24"]),
                    "85.0",
                    rnd.choice(["1", "2", "8", "0", ""]),
                    rnd.choice(["A100", "H100", ""]),
                    rnd.choice(["40", "80", ""]),
                    rnd.choice(["True", "False", "False", "maybe"]),
                    "",
                    "nvidia",
                    rnd.choice(["", "", "runpod-cluster"]),
                    "x86",
                    "{}",
                ]
            )
    else:
        writer.writerow(SKYPILOT_HEADER)
        for _ in range(rows):
            writer.writerow(
                [
                    rnd.choice([f"g5.x{rnd.randrange(10)}"] * 9 + [""]),
                    rnd.choice(["A10G", "H100", "H100", ""]),
                    rnd.choice(["1", "4", "4", "0"]),
                    "8",
                    "32",
                    rnd.choice(PRICES),
                    rnd.choice(["us-east-1", "eu-west-1", "US", "Florida, US, NA"]),
                    rnd.choice(["", GPU_INFO, GPU_INFO, "{bad"]),
                    rnd.choice(PRICES),
                    rnd.choice(["us-east-1a", "us-east-1b", "CA-1", ""]),
                ]
            )
    return out.getvalue().encode()
