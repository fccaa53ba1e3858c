"""``gpuatlas reference load``: the reviewed reference data (providers, regions, GPU models)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import FormatOpt, engine, handle_errors
from service.cli.output import Format, emit
from service.core.config import REFERENCE_DIR

app = typer.Typer(help="Reviewed reference data.", no_args_is_help=True)


@app.command("load")
@handle_errors
def reference_load(
    directory: Annotated[Path, typer.Option("--dir", help="reference folder")] = REFERENCE_DIR,
    fmt: FormatOpt = Format.table,
) -> None:
    """Load providers, regions and GPU models (idempotent)."""
    from service.compliance.reference_load import load_reference

    report = load_reference(engine(), directory)
    rows = [
        {"dataset": name, "rows": getattr(report, name), "written": report.changed.get(name, 0)}
        for name in ("providers", "regions", "gpus", "aliases")
    ] + [
        {"dataset": name, "rows": None, "written": written}
        for name, written in report.changed.items()
        if name not in ("providers", "regions", "gpus", "aliases")
    ]
    emit(rows, fmt, title="reference data")
