"""RunPod Serverless: per-second GPU worker prices, from RunPod's pricing documentation.

``GET https://docs.runpod.io/serverless/pricing.md`` (public; the Markdown source of
https://docs.runpod.io/serverless/pricing, which the docs site serves for tools) holds a
table ``| GPU type(s) | Memory | Flex cost per second | Active cost per second |
Description |`` whose rows are worker tiers: ``| L40, L40S, 6000 Ada PRO | 48 GB | \\$0.00053 |
\\$0.00037 | … |``. The page also has a "Worker types" table; the price table is the one
whose header names the GPU types and the flex cost. Columns are found by their header
text, not their position.

A tier is a pool: an endpoint asks for the tier and RunPod starts a worker on any GPU in
it, at the tier's price. Each GPU of a tier is one offer per worker kind (sku
``serverless/<GPU>``, one GPU, ``price_per`` gpu, ``unit`` second), so GPU filters find it:

- ``serverless``: flex workers, which scale to zero and bill each second a worker runs;
- ``serverless_active``: active (always-on) workers, billed every second, at the discount
  the table shows.

``PRO`` after a tier's names marks RunPod's faster pool of those GPUs; it names no GPU and
is dropped. RunPod's short names (``4090``, ``6000 Ada``, ``A4000``) become the names
people use (``GeForce RTX 4090``, ``RTX 6000 Ada``, ``RTX A4000``) through :data:`NAMES`;
a name not in it passes on as written (resolved if the catalog knows it, else shown as
unmapped). The tier's memory is the pool's smallest (the 16 GB tier holds the 20 GB A4500),
so it is a hint only for a one-GPU tier. RunPod serves Serverless from its Secure Cloud data
centres and quotes one price for all of them: region ``global``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation

from markdown_it import MarkdownIt

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import plain

PRICING_URL = "https://docs.runpod.io/serverless/pricing"
GLOBAL_REGION = "global"
GPUS_HEADER = "gpu type"
KINDS = (("flex", "serverless"), ("active", "serverless_active"))
NAMES = {
    "A4000": "RTX A4000",
    "A4500": "RTX A4500",
    "A5000": "RTX A5000",
    "A6000": "RTX A6000",
    "RTX 4000": "RTX 4000 Ada",
    "3090": "GeForce RTX 3090",
    "4090": "GeForce RTX 4090",
    "5090": "GeForce RTX 5090",
    "6000 Ada": "RTX 6000 Ada",
}
"""RunPod's short names in the tier column -> the names the GPU catalog reads (docs:
https://docs.runpod.io/references/gpu-types lists each tier's GPUs by full name)."""
MAX_BYTES = 1_000_000
_MONEY = re.compile(r"^\\?\$\s*([0-9]+(?:\.[0-9]+)?)$")
_MEMORY = re.compile(r"^([0-9]+)\s*GB$", re.IGNORECASE)


def tables(markdown: str) -> list[list[list[str]]]:
    """Every table of a Markdown document: rows of cell texts (header row first), read by
    markdown-it-py (bold markers and escapes resolved to text)."""
    parser = MarkdownIt("commonmark").enable("table")
    found: list[list[list[str]]] = []
    row: list[str] | None = None
    for token in parser.parse(markdown):
        if token.type == "table_open":
            found.append([])
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close" and row is not None:
            found[-1].append(row)
            row = None
        elif token.type == "inline" and row is not None:
            text = "".join(c.content for c in token.children or () if c.type == "text")
            row.append(text.strip())
    return found


def price_table(markdown: str) -> tuple[dict[str, int], list[list[str]]]:
    """The tier table: column index by meaning (``gpus``, ``memory``, ``flex``, ``active``)
    and its rows."""
    for table in tables(markdown):
        header = [cell.lower() for cell in table[0]] if table else []
        columns: dict[str, int] = {}
        for index, name in enumerate(header):
            if GPUS_HEADER in name:
                columns["gpus"] = index
            elif name.startswith("memory"):
                columns["memory"] = index
            elif name.startswith("flex"):
                columns["flex"] = index
            elif name.startswith("active"):
                columns["active"] = index
        if {"gpus", "flex"} <= columns.keys():
            return columns, table[1:]
    raise LayoutChanged("no table with 'GPU type(s)' and 'Flex cost per second' columns")


def _money(cell: str) -> Decimal | None:
    match = _MONEY.match(cell.strip())
    if match is None:
        return None
    try:
        return plain(Decimal(match.group(1)))
    except InvalidOperation:
        return None


def gpu_names(cell: str) -> list[str]:
    """``L40, L40S, 6000 Ada PRO`` -> ``["L40", "L40S", "RTX 6000 Ada"]``."""
    names = [n.strip() for n in cell.split(",") if n.strip()]
    if names and names[-1].upper().endswith(" PRO"):
        names[-1] = names[-1][: -len(" PRO")].strip()
    names = [n[: -len(" PRO")] if n.upper().endswith(" PRO") else n for n in names]
    return [NAMES.get(n, n) for n in names if n and n.upper() != "PRO"]


class RunPodServerless(ApiSource):
    name = "runpod-serverless"
    provider = "runpod"
    kind = "html"  # a documentation page (its Markdown source), not an API
    schedule = "1d"
    parser_version = "1"
    base_url = "https://docs.runpod.io"
    currency = "USD"
    docs_url = PRICING_URL
    terms_url = "https://www.runpod.io/legal/terms-of-service"
    seed_fixtures = ("pricing.md",)  # the folder's README.md is no page

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(f"{ctx.base_url}/serverless/pricing.md")

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        body = response.path.read_bytes() if response.path is not None else response.body
        if len(body) > MAX_BYTES:
            raise LayoutChanged(f"a pricing page of {len(body):,} bytes (at most {MAX_BYTES:,})")
        columns, rows = price_table(body.decode("utf-8", errors="replace"))
        for row in rows:
            if len(row) <= max(columns.values()):
                raise LayoutChanged(f"a tier row with {len(row)} cells: {row!r}")
            names = gpu_names(row[columns["gpus"]])
            memory = None
            if "memory" in columns and len(names) == 1:
                match = _MEMORY.match(row[columns["memory"]])
                memory = match.group(1) if match else None
            for column, price_kind in KINDS:
                if column not in columns:
                    continue
                cell = row[columns[column]]
                amount = _money(cell)
                for gpu in names:
                    yield {
                        "sku": f"serverless/{gpu}",
                        "gpu_name_raw": gpu,
                        "gpu_count": 1,
                        "gpu_memory_gb": memory,
                        "region": GLOBAL_REGION,
                        "price_kind": price_kind,
                        "unit": "second",
                        "price_per": "gpu",
                        # None when the cell is no price ("Contact sales"): a rejection
                        # with its reason, never a silent drop
                        "amount": amount,
                        "source_url": PRICING_URL,
                    }
