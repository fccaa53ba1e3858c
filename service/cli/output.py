"""Print rows for people (rich tables) or for programs (json, jsonl, csv)."""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table


class Format(StrEnum):
    table = "table"
    json = "json"
    jsonl = "jsonl"
    csv = "csv"


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_default, option=orjson.OPT_UTC_Z)


def text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%SZ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def emit(
    rows: Sequence[dict[str, Any]],
    fmt: Format,
    columns: Sequence[str] | None = None,
    *,
    title: str | None = None,
    console: Console | None = None,
) -> None:
    columns = list(columns or (rows[0].keys() if rows else []))
    out = sys.stdout
    if fmt is Format.json:
        out.write(dumps([{c: r.get(c) for c in columns} for r in rows]).decode() + "\n")
    elif fmt is Format.jsonl:
        for row in rows:
            out.write(dumps({c: row.get(c) for c in columns}).decode() + "\n")
    elif fmt is Format.csv:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([text(row.get(c)) for c in columns])
    else:
        table = Table(title=title, show_lines=False, header_style="bold")
        cells = [[text(row.get(c)) for c in columns] for row in rows]
        widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
        for column in columns:
            table.add_column(column, no_wrap=True)
        for cells_row in cells:
            table.add_row(*cells_row)
        console = console or Console()
        natural = sum(widths) + 3 * len(columns) + 1
        if natural > console.width:  # never squeeze columns to nothing: let lines be long
            console = Console(width=natural, file=console.file)
        console.print(table)
    out.flush()


def emit_jsonl(items: Iterable[Any]) -> None:
    for item in items:
        sys.stdout.write(dumps(item).decode() + "\n")
    sys.stdout.flush()
