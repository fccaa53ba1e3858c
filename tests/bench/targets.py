"""Issue 20's targets judged by the benchmarks that measure them: each a (target, the
figure measured, met) triple, printed last by its benchmark (``make bench``)."""

from __future__ import annotations

Verdict = tuple[str, str, bool]


def print_verdicts(found: list[Verdict]) -> None:
    """``found`` under a count of those met; nothing when nothing could be judged."""
    if not found:
        return
    met = sum(ok for *_, ok in found)
    print(f"\nissue 20's targets: {met} of {len(found)} met")
    for target, figure, ok in found:
        print(f"  {'met    ' if ok else 'NOT MET'}  {target}: {figure}")


def at_most(target: str, value: float, limit: float, unit: str) -> Verdict:
    """``value`` against ``limit`` (met when at most it), its figure in ``unit``."""
    return (f"{target} <= {limit:g}{unit}", f"{value:.2f}{unit}", value <= limit)
