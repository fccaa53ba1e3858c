"""GPU name resolution throughput: 100,000 raw names through the parser's index.

The names are drawn at random (seeded, the seed printed) from every spelling the
project's sources produce (the models' names and slugs, their aliases, and generated
variants: vendor prefixes, case, separators, memory units, count prefixes) plus names no
model has. Three figures, side by side in one run:

* cold: a fresh index, every distinct name parsed once (the first crawl of a process);
* warm: the same 100,000 names again (the per-name cache ingest relies on);
* the floor: one dict lookup per name (what a plain alias table costs).
"""

from __future__ import annotations

import os
import random
import time
from decimal import Decimal

from crawlers.normalize.reference import reference_index
from schema.gpu_names import GpuNameIndex

NAMES = 100_000
PREFIXES = ["", "NVIDIA ", "nvidia-", "Tesla ", "AMD ", "8x ", "2 x "]
SUFFIXES = ["", " 80GB", " (48 GB)", " 81920 MiB", " SXM5", " PCIe", "-16G"]
UNKNOWN = ["RTX 9999", "Contact sales", "8x", "", "Н100", "X" * 250, "Graphcore IPU-POD4"]


def corpus(rng: random.Random) -> list[str]:
    ref = reference_index()
    base = [g.name for g in ref.gpus] + [g.slug for g in ref.gpus] + list(ref.aliases)
    spellings = [p + b + s for b in base for p in PREFIXES for s in SUFFIXES]
    spellings += UNKNOWN
    pool = [s.upper() if rng.random() < 0.2 else s for s in spellings]
    return [rng.choice(pool) for _ in range(NAMES)]


def main() -> None:
    seed = int(os.environ.get("GPUATLAS_BENCH_SEED", "19"))
    rng = random.Random(seed)
    names = corpus(rng)
    ref = reference_index()
    hint = Decimal(80)
    distinct = len(set(names))

    index = GpuNameIndex.build(ref.gpus, ref.aliases)
    started = time.perf_counter()
    resolved = sum(1 for n in names if index.resolve(n, hint).slug)
    cold = time.perf_counter() - started

    started = time.perf_counter()
    for n in names:
        index.resolve(n, hint)
    warm = time.perf_counter() - started

    table = {n: n for n in names}
    started = time.perf_counter()
    for n in names:
        table.get(n)
    floor = time.perf_counter() - started

    print(f"seed {seed}: {NAMES:,} names, {distinct:,} distinct, {resolved:,} resolved")
    print(f"{'pass':<8} {'seconds':>8} {'names/s':>12} {'x floor':>8}")
    for label, seconds in (("cold", cold), ("warm", warm), ("floor", floor)):
        print(f"{label:<8} {seconds:>8.4f} {NAMES / seconds:>12,.0f} {seconds / floor:>8.1f}")


if __name__ == "__main__":
    main()
