"""Benchmark: the AWS offer-file parse against ``json.loads`` of the same bytes.

    .venv/bin/python -m tests.bench.aws_parse [size_mb]

Writes a synthetic AmazonEC2 offer file (real layout: products, then OnDemand and Reserved
terms; mostly non-GPU SKUs, as in real region files), then measures, each in a fresh
child process so peaks don't mix: the streaming parse (records/s, peak RSS) and
``json.loads`` of the same bytes (the floor a whole-file parser can't beat, and the
memory it needs). The synthetic file is also what the memory test in test_aws.py uses.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
GPU_TYPES = ("p5.48xlarge", "g6e.12xlarge", "g5.xlarge", "p4d.24xlarge", "inf2.48xlarge")
RESERVED_TERMS = {  # term code -> (lease, class, purchase option)
    "4NA7Y494T4": ("1yr", "standard", "No Upfront"),
    "6QCMYABX3D": ("1yr", "standard", "All Upfront"),
    "HU7G6KETJZ": ("1yr", "standard", "Partial Upfront"),
    "BPH4J8HBKS": ("3yr", "standard", "No Upfront"),
    "NQ3QZPMQV9": ("3yr", "standard", "All Upfront"),
    "7NE97W5U4E": ("1yr", "convertible", "No Upfront"),
}
RECORDS_PER_GPU_SKU = 5  # on-demand + No Upfront 1y/3y + All Upfront 1y/3y


def _product(sku: str, instance_type: str) -> dict[str, Any]:
    return {
        "sku": sku,
        "productFamily": "Compute Instance",
        "attributes": {
            "servicecode": "AmazonEC2", "location": "US East (N. Virginia)",
            "locationType": "AWS Region", "instanceType": instance_type,
            "currentGeneration": "Yes", "instanceFamily": "General purpose", "vcpu": "8",
            "physicalProcessor": "Intel Xeon Platinum 8259CL", "clockSpeed": "2.5 GHz",
            "memory": "32 GiB", "storage": "EBS only", "networkPerformance": "Up to 10 Gigabit",
            "processorArchitecture": "64-bit", "tenancy": "Shared", "operatingSystem": "Linux",
            "licenseModel": "No License required", "usagetype": f"BoxUsage:{instance_type}",
            "operation": "RunInstances", "availabilityzone": "NA", "capacitystatus": "Used",
            "classicnetworkingsupport": "false", "dedicatedEbsThroughput": "Up to 4750 Mbps",
            "ecu": "NA", "enhancedNetworkingSupported": "Yes", "instancesku": sku[::-1],
            "intelAvx2Available": "Yes", "intelAvxAvailable": "Yes", "intelTurboAvailable": "Yes",
            "marketoption": "OnDemand", "normalizationSizeFactor": "16", "preInstalledSw": "NA",
            "processorFeatures": "Intel AVX; Intel AVX2; Intel AVX512; Intel Turbo",
            "regionCode": "us-east-1", "servicename": "Amazon Elastic Compute Cloud",
            "vpcnetworkingsupport": "true",
        },
    }  # fmt: skip


def _dimension(code: str, unit: str, price: str, description: str) -> dict[str, Any]:
    return {
        "rateCode": code, "description": description, "beginRange": "0", "endRange": "Inf",
        "unit": unit, "pricePerUnit": {"USD": price}, "appliesTo": [],
    }  # fmt: skip


def _on_demand(sku: str, price: str) -> dict[str, Any]:
    code = f"{sku}.JRTCKXETXF"
    return {code: {
        "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2025-11-01T00:00:00Z",
        "priceDimensions": {f"{code}.6YS6EN2CT7": _dimension(
            f"{code}.6YS6EN2CT7", "Hrs", price, f"${price} per On Demand Linux Instance Hour")},
        "termAttributes": {},
    }}  # fmt: skip


def _reserved(sku: str, price: str) -> dict[str, Any]:
    terms = {}
    for term, (lease, offering, option) in RESERVED_TERMS.items():
        code = f"{sku}.{term}"
        dimensions = {f"{code}.6YS6EN2CT7": _dimension(
            f"{code}.6YS6EN2CT7", "Hrs", "0.0000000000" if option == "All Upfront" else price,
            "Linux/UNIX (Amazon VPC), reserved instance applied")}  # fmt: skip
        if option != "No Upfront":
            dimensions[f"{code}.2TG2D8R56U"] = _dimension(
                f"{code}.2TG2D8R56U", "Quantity", "5123", "Upfront Fee"
            )
        terms[code] = {
            "offerTermCode": term, "sku": sku, "effectiveDate": "2025-11-01T00:00:00Z",
            "priceDimensions": dimensions,
            "termAttributes": {"LeaseContractLength": lease, "OfferingClass": offering,
                               "PurchaseOption": option},
        }  # fmt: skip
    return terms


def _template(build: Any, *args: str) -> str:
    """One SKU's JSON text with placeholders, so millions of SKUs are cheap to write."""
    return json.dumps(build("@SKU@", *args))


def _section(out: IO[str], name: str, key_text: Any, first: bool = False) -> None:
    out.write(("" if first else ",") + f'\n  "{name}" : {{')
    for index, (key, text) in enumerate(key_text):
        out.write(("," if index else "") + f'\n    "{key}" : {text}')
    out.write("\n  }")


def write_synthetic_offer(path: Path, size_mb: int = 100, gpu_every: int = 250) -> int:
    """Write an offer file of about ``size_mb``; returns the records a parse must yield.

    Written one SKU at a time, so the generator itself stays small in memory.
    """
    per_sku = 5600  # bytes of product + on-demand + reserved terms, measured
    count = size_mb * 1024 * 1024 // per_sku + 1
    skus = [f"SYN{index:013d}" for index in range(count)]
    product = _template(_product, "@TYPE@")
    on_demand = [_template(_on_demand, f"{1 + n}.1230000000") for n in range(97)]
    reserved = [_template(_reserved, f"{1 + n}.0450000000") for n in range(89)]

    def instance_type(index: int) -> str:
        if index % gpu_every == 0:
            return GPU_TYPES[(index // gpu_every) % len(GPU_TYPES)]
        return f"m5.synthetic{index}xlarge"

    with path.open("w", encoding="utf-8") as out:
        out.write('{\n  "formatVersion" : "v1.0",\n  "disclaimer" : "synthetic benchmark data",')
        out.write('\n  "offerCode" : "AmazonEC2",\n  "version" : "20251101000000"')
        _section(out, "products", ((s, product.replace("@SKU@", s).replace("@TYPE@",
                 instance_type(i))) for i, s in enumerate(skus)))  # fmt: skip
        out.write(',\n  "terms" : {')
        _section(out, "OnDemand", ((s, on_demand[i % 97].replace("@SKU@", s))
                                   for i, s in enumerate(skus)), first=True)  # fmt: skip
        _section(out, "Reserved", ((s, reserved[i % 89].replace("@SKU@", s))
                                   for i, s in enumerate(skus)))  # fmt: skip
        out.write("\n  }\n}\n")
    gpu_skus = len(range(0, count, gpu_every))
    return gpu_skus * RECORDS_PER_GPU_SKU


_CHILD_PARSE = """
import json, resource, sys, time
from pathlib import Path
def hwm():
    # VmHWM belongs to this exec'd image; ru_maxrss is inherited from the parent on Linux
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from crawlers.base import Context, Request, Response
from crawlers.providers.aws import AwsPriceList
path = Path(sys.argv[1])
baseline = hwm()
started = time.perf_counter()
request = Request("file://" + str(path), stream_to_file=True, meta={"kind": "offer"})
response = Response(request.url, 200, b"", {}, request, path=path)
records = sum(1 for _ in AwsPriceList().parse(response, Context(base_url="http://x")))
seconds = time.perf_counter() - started
peak = hwm()
print(json.dumps({"records": records, "seconds": seconds, "peak_mb": peak / 1024,
                  "baseline_mb": baseline / 1024}))
"""
_CHILD_JSON = """
import json, resource, sys, time
from pathlib import Path
def hwm():
    # VmHWM belongs to this exec'd image; ru_maxrss is inherited from the parent on Linux
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
data = Path(sys.argv[1]).read_bytes()
baseline = hwm()
started = time.perf_counter()
parsed = json.loads(data)
seconds = time.perf_counter() - started
peak = hwm()
print(json.dumps({"records": len(parsed["products"]), "seconds": seconds,
                  "peak_mb": peak / 1024, "baseline_mb": baseline / 1024}))
"""


def _child(code: str, path: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def measure_parse(path: Path) -> dict[str, Any]:
    """Parse ``path`` in a fresh process: records, seconds, peak RSS (MB) and baseline."""
    return _child(_CHILD_PARSE, path)


def measure_json_loads(path: Path) -> dict[str, Any]:
    """``json.loads`` of the same bytes in a fresh process (the speed floor)."""
    return _child(_CHILD_JSON, path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = sys.argv[1:] if argv is None else argv
    size_mb = int(args[0]) if args else 100
    with tempfile.TemporaryDirectory(prefix="gpuatlas-bench-") as tmp:
        path = Path(tmp) / "offer.json"
        expected = write_synthetic_offer(path, size_mb)
        size = path.stat().st_size / 1024**2
        ours = measure_parse(path)
        floor = measure_json_loads(path)
    assert ours["records"] == expected, (ours, expected)
    result = {
        "file_mb": round(size, 1),
        "records": ours["records"],
        "records_per_s": round(ours["records"] / ours["seconds"]),
        "mb_per_s": round(size / ours["seconds"], 1),
        "parse_s": round(ours["seconds"], 2),
        "parse_peak_mb": round(ours["peak_mb"], 1),
        "json_loads_s": round(floor["seconds"], 2),
        "json_loads_peak_mb": round(floor["peak_mb"], 1),
        "time_ratio_vs_json_loads": round(ours["seconds"] / floor["seconds"], 2),
    }
    print(f"aws offer-file parse, {result['file_mb']} MB synthetic offer file")
    print(
        f"  streaming parse: {result['records']} records in {result['parse_s']} s "
        f"({result['records_per_s']} records/s, {result['mb_per_s']} MB/s), "
        f"peak RSS {result['parse_peak_mb']} MB"
    )
    print(
        f"  json.loads floor: {result['json_loads_s']} s, peak RSS {result['json_loads_peak_mb']} MB"
    )
    print(f"  time ratio (parse / json.loads): {result['time_ratio_vs_json_loads']}")
    return result


if __name__ == "__main__":
    main()
