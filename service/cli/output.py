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
        safe = _spreadsheet_safe(columns)
        for row in rows:
            writer.writerow([safe[i](text(row.get(c))) for i, c in enumerate(columns)])
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


def columns_of(model: Any, prefix: str = "") -> list[str]:
    """A document model's CSV columns, from its schema (not from the rows, so a null nested
    object still has its columns): nested models become dotted columns (``price.amount``),
    everything else (lists included) one column."""
    from types import NoneType, UnionType
    from typing import Union, get_args, get_origin

    from pydantic import BaseModel

    names: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if get_origin(annotation) in (Union, UnionType):
            options = [a for a in get_args(annotation) if a is not NoneType]
            annotation = options[0] if len(options) == 1 else annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names += columns_of(annotation, f"{prefix}{name}.")
        else:
            names.append(f"{prefix}{name}")
    return names


def cell_of(document: dict[str, Any], column: str) -> Any:
    """The value a dotted column names in a document (None through a null object)."""
    value: Any = document
    for part in column.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def emit_documents(documents: Any, fmt: Format, model: Any = None) -> None:
    """API documents, written as the API writes them (``service.api.serialize.dumps``):
    ``json`` the whole value, ``jsonl`` one document per line, ``csv`` one row per document
    with ``model``'s columns (:func:`columns_of`; lists as one cell of compact JSON)."""
    from service.api.serialize import dumps as api_dumps

    out = sys.stdout
    if fmt is Format.json:
        out.write(api_dumps(documents).decode() + "\n")
    elif fmt is Format.jsonl:
        for document in documents:
            out.write(api_dumps(document).decode() + "\n")
    else:
        columns = columns_of(model)
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        safe = _spreadsheet_safe(columns)
        for document in documents:
            writer.writerow(
                [safe[i](_cell(cell_of(document, c), api_dumps)) for i, c in enumerate(columns)]
            )
    out.flush()


def _spreadsheet_safe(columns: Sequence[str]) -> list[Any]:
    """For each CSV column, what its cells go through: a source's free text (``sku``,
    ``offer.region``...) is made inert for spreadsheets (service.core.spreadsheet)."""
    from service.core.spreadsheet import INERT_COLUMNS, inert

    return [inert if c.rsplit(".", 1)[-1] in INERT_COLUMNS else _same for c in columns]


def _same(value: Any) -> Any:
    return value


def _cell(value: Any, api_dumps: Any) -> str:
    """A CSV cell with the JSON document's value text (``2026-12-04T08:00:00Z``, ``true``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return str(api_dumps(value).decode()).strip('"')
