"""CSV cells a spreadsheet must show as text, never run as a formula.

Names written by sources (a pricing page's SKU, a region, a GPU name) reach the catalog's
CSV files: ``/v1/export?format=csv``, ``gpuatlas export`` and the CLI's ``-f csv``. A
spreadsheet opening the file reads a cell starting with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return as a formula (``=HYPERLINK(...)``: OWASP's "CSV Injection"). In CSV,
such a cell of :data:`INERT_COLUMNS` is written with a leading apostrophe, which
spreadsheets show as text. JSON, JSON Lines and Parquet keep every value exactly.
"""

from __future__ import annotations

from typing import Any

INERT_COLUMNS = frozenset({"sku", "region", "gpu_name_raw", "location_region", "locations"})
"""The free text sources write (the other columns hold codes, numbers and times that the
catalog itself writes and checks)."""
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""The first characters that make a spreadsheet read a cell as a formula."""


def inert(value: Any) -> Any:
    """``value`` with an apostrophe before it when it is text a spreadsheet would run."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value
