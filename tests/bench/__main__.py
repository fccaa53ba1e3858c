"""`make bench`: run every benchmark module (tests/bench/*.py) in one go, side by side.

Benchmarks print figures and ratios measured in the same run; they assert nothing about
time (the machine is shared and noisy). Pick some with GPUATLAS_BENCH=ingest,aws_parse.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import time

import tests.bench


def main() -> None:
    wanted = {w.strip() for w in os.environ.get("GPUATLAS_BENCH", "").split(",") if w.strip()}
    modules = sorted(
        m.name
        for m in pkgutil.iter_modules(tests.bench.__path__)
        if not m.name.startswith(("_", "test_"))
    )
    for short in modules:
        if wanted and short not in wanted:
            continue
        module = importlib.import_module(f"tests.bench.{short}")
        if not hasattr(module, "main"):
            continue
        print(f"\n=== {short} " + "=" * (60 - len(short)), flush=True)
        started = time.perf_counter()
        module.main()
        print(f"({short}: {time.perf_counter() - started:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
