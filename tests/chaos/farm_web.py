"""The farm's other pricing pages (Scrapy spiders), beyond those in ``farm.py``.

``farm.HtmlAdapter`` serves one ``<table>`` page. The pages here are div grids, cards,
``__NEXT_DATA__`` JSON, tab islands and a two-page site, so they share one more general
base, :class:`TemplatePage`: a page is cut into *units* (one product block each: a row, a
card, a JSON object, an escaped row inside a script) and static text between them; the
price text of a unit becomes a knob slot. ``doc`` is ``{"amounts": {key: Decimal},
"gone": [unit ids]}``: the knobs' amounts and the units withdrawn legitimately.

Knobs are checked against the real spider when the adapter is built: a slot is a knob only
if moving it moves exactly the ``on_demand`` offers of one sku (every region of it) and
nothing else; other slots (a per-GPU price that several multi-GPU skus share, a price the
spider does not read) stay at the fixture's value. Faults work on units: ``drop_90`` keeps
a tenth of them, ``duplicates`` doubles each, ``hostile`` writes hostile strings where the
spider does not look, ``columns_reordered`` moves cells or members the spider finds by name
(only where it does), and ``layout_changed`` is one of three redesigns per page that remove
what the spider keys on. A withdrawal removes the units of one product; it is checked by a
parse (exactly that product's offers go, every price kind of it, and at least half stay).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from crawlers.base import SourceError
from service.core.config import FIXTURES_DIR
from tests.chaos.farm import (
    API_ONLY,
    BIG_FIELD,
    HOSTILE,
    SCRIPT_MOUNT,
    SLOT,
    Adapter,
    HtmlAdapter,
    Knob,
)

_TD = re.compile(r"<td[^>]*>.*?</td>", re.S)
Identity = tuple[str, str, str]
"""(sku, price kind, region) of one parsed offer."""


def _balanced_end(html: str, start: int) -> int:
    """The end of the element (``<tag…>``) or JSON object (``{``) opening at ``start``."""
    if html[start] == "{":
        depth, i, in_string = 0, start, False
        while i < len(html):
            ch = html[i]
            if in_string:
                if ch == "\\":
                    i += 1
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        raise ValueError("unbalanced JSON object")
    found = re.match(r"<([a-zA-Z0-9]+)", html[start:])
    assert found is not None
    tag = found.group(1)
    pattern = re.compile(rf"<(/?){tag}\b[^>]*>")
    depth = 0
    for match in pattern.finditer(html, start):
        depth += -1 if match.group(1) else 1
        if depth == 0:
            return match.end()
    raise ValueError(f"unbalanced <{tag}>")


def _js(value: str) -> str:
    """``value`` as the inside of a JSON string embedded in a ``<script>``."""
    return json.dumps(value)[1:-1].replace("<", "\\u003c").replace(">", "\\u003e")


def _plain(fragment: str) -> str:
    """Tags and React's ``<!-- -->`` splits removed, whitespace collapsed."""
    fragment = re.sub(r"<!--.*?-->|<[^>]+>", "", fragment.replace("&nbsp;", " "))
    return " ".join(fragment.split())


def _swap(block: str, cell: re.Pattern[str], a: int, b: int) -> str:
    """``block`` with its ``a``-th and ``b``-th ``cell`` matches swapped (when it has both)."""
    found = list(cell.finditer(block))
    if len(found) <= max(a, b):
        return block
    first, second = sorted((found[a], found[b]), key=lambda m: m.start())
    return (
        block[: first.start()]
        + second.group(0)
        + block[first.end() : second.start()]
        + first.group(0)
        + block[second.end() :]
    )


class _Group:
    """Adjacent units (rows of one table, objects of one JSON array) and what separates
    them."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.sep = ""


class TemplatePage(HtmlAdapter):
    """A pricing page served from its fixture(s), one page per spider start path."""

    files: tuple[str, ...]
    """The fixture file of each start path, in the spider's order."""
    unit: re.Pattern[str]
    """The opening of one product block (an element or a JSON object, balanced)."""
    decimal_comma = False
    reorders = True
    """The spider finds columns (or members) by name: ``columns_reordered`` is served."""
    min_rows_for_drop = 5

    def __init__(self) -> None:
        from crawlers.registry import all_sources
        from crawlers.scrapy.spider import HtmlSpider

        spider = all_sources()[self.name]
        assert issubclass(spider, HtmlSpider)
        self.spider: type[HtmlSpider] = spider
        folder = FIXTURES_DIR / (self.spider.fixtures or self.name)
        self.prefix = f"/{self.name}"
        self.paths = [self.prefix + p for p in self.spider.start_paths]
        self.path = self.paths[0]
        self.pages = len(self.paths)
        self.fixture = folder / self.files[0]
        self.units: list[str] = []
        self.unit_page: list[int] = []
        self.segments: list[list[str | _Group]] = []
        amounts: dict[str, Decimal] = {}
        for page, name in enumerate(self.files):
            html = (folder / name).read_text()
            self.segments.append(self._cut(page, html, amounts))
        self.doc = {"amounts": amounts, "gone": []}
        self.baseline = self.parse_all(self.doc)
        self.skus = {key: key for key in self._verified(amounts)}

    # ------------------------------------------------------------------ building

    def _cut(self, page: int, html: str, amounts: dict[str, Decimal]) -> list[str | _Group]:
        spans: list[tuple[int, int]] = []
        at = 0
        for match in self.unit.finditer(html):
            if match.start() < at:
                continue  # nested in the previous unit
            end = _balanced_end(html, match.start())
            spans.append((match.start(), end))
            at = end
        segments: list[str | _Group] = []
        at = 0
        group: _Group | None = None
        for start, end in spans:
            gap = html[at:start]
            if group is None or gap.strip(" \n\t,") or (len(group.ids) > 1 and gap != group.sep):
                segments.append(gap)
                group = _Group()
                segments.append(group)
            elif len(group.ids) == 1:
                group.sep = gap
            unit = html[start:end]
            for slot_start, slot_end, key in sorted(
                self.slots(page, html, start, end), reverse=True
            ):
                figure = html[slot_start:slot_end]
                amount = Decimal(figure.replace(",", ".") if self.decimal_comma else figure)
                if amounts.setdefault(key, amount) != amount:
                    raise ValueError(f"{self.name}: {key} is {amount} and {amounts[key]}")
                a, b = slot_start - start, slot_end - start
                unit = unit[:a] + "{{knob:" + key + "}}" + unit[b:]
            group.ids.append(len(self.units))
            self.units.append(unit)
            self.unit_page.append(page)
            at = end
        segments.append(html[at:])
        return segments

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        """The knob slots of the unit ``html[start:end]``: (start, end, key) of each price
        figure (the number only), the key being the sku it should move."""
        raise NotImplementedError

    def label(self, unit: str) -> str | None:
        """Units with one label are one product (a withdrawal removes them together)."""
        keys = sorted(set(SLOT.findall(unit)))
        return "|".join(keys) or None

    def _verified(self, amounts: dict[str, Decimal]) -> list[str]:
        """The slots that move exactly the on-demand offers of the sku they are named
        after (every region), and nothing else."""
        base = dict(self.baseline)
        good = []
        for key, amount in amounts.items():
            moved = amount + Decimal("0.37")
            doc = {"amounts": {**amounts, key: moved}, "gone": []}
            try:
                after = self.parse_all(doc)
            except SourceError:  # a slot that breaks the parse is no knob
                continue
            changed = {i for i in base if after.get(i) != base[i]}
            ours = {i for i in base if i[0] == key and i[1] == "on_demand"}
            if (
                ours
                and changed == ours
                and set(after) == set(base)
                and all(after[i] == moved and base[i] == amount for i in ours)
            ):
                good.append(key)
        return good

    # ------------------------------------------------------------------ parsing

    def parse_page_records(self, body: bytes, page: int) -> list[dict[str, Any]]:
        """The spider's raw records for one served page (its own ``parse``, no network)."""
        from scrapy import Request
        from scrapy.http import HtmlResponse

        spider = self.spider(site="https://farm.invalid" + self.prefix)
        url = spider.start_urls_for_site()[page]
        response = HtmlResponse(url=url, body=body, request=Request(url))
        records = [r for r in spider.parse(response) if isinstance(r, dict)]
        if spider.harvest.failures:
            reason, detail = spider.harvest.failures[0]
            raise SourceError(reason, detail)
        return records

    def parse_all(self, doc: Any) -> dict[Identity, Decimal]:
        """Every offer the whole site parses to: identity -> amount."""
        found: dict[Identity, Decimal] = {}
        for page in range(self.pages):
            for record in self.parse_page_records(self.render_page(doc, page), page):
                if record.get("amount") is None:
                    continue
                identity = (str(record["sku"]), str(record["price_kind"]), str(record["region"]))
                found[identity] = Decimal(str(record["amount"]))
        return found

    # ------------------------------------------------------------------ rendering

    def fmt(self, amount: Decimal) -> str:
        text = str(amount)
        return text.replace(".", ",") if self.decimal_comma else text

    def _assemble(
        self,
        doc: Any,
        page: int,
        pick: Callable[[list[int]], list[int]] | None = None,
        edit: Callable[[str], str] | None = None,
    ) -> str:
        amounts, gone = doc["amounts"], set(doc["gone"])
        out = []
        for segment in self.segments[page]:
            if isinstance(segment, str):
                out.append(segment)
                continue
            ids = [i for i in segment.ids if i not in gone]
            if pick is not None:
                ids = pick(ids)
            units = [SLOT.sub(lambda m: self.fmt(amounts[m.group(1)]), self.units[i]) for i in ids]
            if edit is not None:
                units = [edit(u) for u in units]
            out.append(segment.sep.join(units))
        return SLOT.sub(lambda m: self.fmt(amounts[m.group(1)]), "".join(out))

    def render_page(self, doc: Any, page: int) -> bytes:
        return self._assemble(doc, page).encode()

    def render(self, doc: Any) -> bytes:
        return self.render_page(doc, 0)

    def text(self, doc: Any) -> str:
        return self._assemble(doc, 0)

    def text_page(self, doc: Any, page: int) -> str:
        return self._assemble(doc, page)

    def route(self, method: str, path: str, query: str) -> int | None:
        if method != "GET" or path not in self.paths:
            return None
        return self.paths.index(path)

    def knob_pages(self, key: str) -> set[int]:
        return {p for i, p in enumerate(self.unit_page) if "{{knob:" + key + "}}" in self.units[i]}

    # ------------------------------------------------------------------ knobs, withdrawal

    def knobs(self) -> dict[str, Knob]:
        def setter(key: str) -> Callable[[Any, Decimal], None]:
            def set_amount(doc: Any, amount: Decimal) -> None:
                doc["amounts"][key] = amount

            return set_amount

        return {
            key: Knob(self.name, key, self.skus[key], self.doc["amounts"][key], setter(key))
            for key in self.skus
        }

    def kinds(self, kinds: tuple[str, ...]) -> list[str]:
        small = len(self.baseline) < self.min_rows_for_drop
        return [
            k
            for k in kinds
            if k not in API_ONLY
            and not (small and k == "drop_90")
            and (self.reorders or k != "columns_reordered")
        ]

    def withdraw(self, doc: Any, rng: random.Random) -> list[str]:
        gone = set(doc["gone"])
        products: dict[str, list[int]] = {}
        for index, unit in enumerate(self.units):
            label = self.label(unit)
            if index not in gone and label is not None:
                products.setdefault(label, []).append(index)
        before = self.parse_all(doc)
        for label in rng.sample(sorted(products), len(products)):
            trial = {"amounts": doc["amounts"], "gone": [*doc["gone"], *products[label]]}
            try:
                after = self.parse_all(trial)
            except SourceError:  # not a removal the page survives
                continue
            removed = set(before) - set(after)
            skus = {sku for sku, _, _ in removed}
            if (
                removed
                and set(after) <= set(before)
                and not any(sku in skus for sku, _, _ in after)
                and 2 * len(after) > len(before)
            ):
                doc["gone"] = trial["gone"]
                return sorted(skus)
        return []

    # ------------------------------------------------------------------ faults

    def mangle_page(self, kind: str, doc: Any, page: int, rng: random.Random) -> bytes:
        if kind == "drop_90":
            gone = set(doc["gone"])
            alive = [i for i, p in enumerate(self.unit_page) if p == page and i not in gone]
            keep = set(rng.sample(alive, max(1, len(alive) // 10))) if alive else set()
            html = self._assemble(doc, page, pick=lambda ids: [i for i in ids if i in keep])
        elif kind == "duplicates":
            html = self._assemble(doc, page, pick=lambda ids: [i for i in ids for _ in (0, 1)])
        elif kind == "hostile":
            html = self._assemble(doc, page, edit=self.poison)
            html = html.replace("</title>", f" {HOSTILE}</title>", 1)
            html = html.replace("</body>", f'<div hidden class="x">{BIG_FIELD}</div></body>', 1)
        elif kind == "columns_reordered":
            html = self.reorder(self._assemble(doc, page))
        elif kind == "layout_changed":
            html = self.relayout_page(self._assemble(doc, page), page, rng.randrange(3))
        else:
            html = self._assemble(doc, page)
        return html.encode()

    def mangle(self, kind: str, doc: Any, rng: random.Random) -> bytes:
        return self.mangle_page(kind, doc, 0, rng)

    def poison(self, unit: str) -> str:
        """One unit with hostile strings where the spider does not read."""
        raise NotImplementedError

    def reorder(self, html: str) -> str:
        """The page with columns (members) the spider finds by name moved around."""
        return html

    def relayout(self, html: str, variant: int) -> str:
        return self.relayout_page(html, 0, variant)

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        """Three redesigns that take away what the spider keys on; by default variant 2
        removes every product block (the prices now come from a script)."""
        return self._without_units(html)

    def _without_units(self, html: str) -> str:
        spans = []
        at = 0
        for match in self.unit.finditer(html):
            if match.start() < at:
                continue
            at = _balanced_end(html, match.start())
            spans.append((match.start(), at))
        for start, end in reversed(spans):
            html = html[:start] + html[end:]
        return html.replace("</body>", SCRIPT_MOUNT + "</body>", 1)


def _nth(pattern: re.Pattern[str], html: str, start: int, end: int, n: int) -> re.Match[str] | None:
    found = list(pattern.finditer(html, start, end))
    return found[n] if len(found) > n else None


def _figures(
    pattern: re.Pattern[str], html: str, start: int, end: int, key: str
) -> list[tuple[int, int, str]]:
    """Group 1 of every ``pattern`` match inside ``html[start:end]`` as a slot of ``key``."""
    return [(m.start(1), m.end(1), key) for m in pattern.finditer(html, start, end)]


# ---------------------------------------------------------------------------- CoreWeave

_CW_CELL = re.compile(r'<div class="table-v2-cell"><div>(?:(?!</div>).)*?\$(\d+\.\d+)', re.S)
_CW_ANY_CELL = re.compile(r'<div class="table-v2-cell"><div>')
_CW_MOBILE = re.compile(r'On-Demand Price</span><span class="item-value">\$(\d+\.\d+)<')
_CW_HEAD = re.compile(r'<div class="table-v2-cell header"><div>.*?</div></div>', re.S)
_CW_BODY = re.compile(r'<div class="table-v2-cell"><div>[^<]*(?:<sup>\d+</sup>)?</div></div>')


class CoreWeaveWeb(TemplatePage):
    """A Webflow div grid (``div.table-v2.gpu-pricing``): rows are ``listitem`` divs, the
    SKU is ``h3[data-product]``, on-demand and spot per instance-hour, columns by header
    text. Knobs: each row's on-demand price (the mobile block's copy moves with it); spot
    and the serverless inference column never move."""

    name = "coreweave-web"
    files = ("pricing.html",)
    unit = re.compile(r'<div role="listitem" class="table-row-v2 w-dyn-item kubernetes-gpu')

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        sku = re.search(r'data-product="([^"]+)"', html[start:end])
        cells = list(_CW_ANY_CELL.finditer(html, start, end))
        if sku is None or len(cells) < 7:
            return []
        on_demand = _CW_CELL.match(html, cells[5].start(), cells[6].start())
        if on_demand is None:
            return []
        found = [(on_demand.start(1), on_demand.end(1), sku.group(1))]
        return found + _figures(_CW_MOBILE, html, start, end, sku.group(1))

    def poison(self, unit: str) -> str:
        return unit.replace(
            '<div class="table-meta-label">GPU Count</div>',
            f'<div class="table-meta-label">GPU Count {HOSTILE}</div>',
        )

    def reorder(self, html: str) -> str:
        # vCPUs and System RAM trade places in the header and in every row
        html = re.sub(
            r'<div class="table-v2-header">.*?</div></div></div>',
            lambda m: _swap(m.group(0), _CW_HEAD, 3, 4),
            html,
            count=1,
            flags=re.S,
        )
        return _each_unit(self, html, lambda u: _swap(u, _CW_BODY, 2, 3))

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        if variant == 0:  # the grid's class renamed
            return html.replace("table-v2 gpu-pricing", "pricing-grid gpu-grid")
        if variant == 1:  # the price headers say "rate"
            html = html.replace(">On-Demand Price (Per Hour)<", ">Hourly rate (instance)<")
            return html.replace(">Spot Price (Per Hour)<", ">Preemptible rate (instance)<")
        return self._without_units(html)


def _each_unit(adapter: TemplatePage, html: str, edit: Callable[[str], str]) -> str:
    """``html`` with ``edit`` applied to every unit in it."""
    out, at = [], 0
    for match in adapter.unit.finditer(html):
        if match.start() < at:
            continue
        end = _balanced_end(html, match.start())
        out.append(html[at : match.start()])
        out.append(edit(html[match.start() : end]))
        at = end
    out.append(html[at:])
    return "".join(out)


# ---------------------------------------------------------------------------- DigitalOcean

_DO_PRICE = re.compile(r">\$(\d+\.\d+)</span>")
_DO_SPEC = re.compile(r"<li><span[^>]*>[^<]*</span><span[^>]*>[^<]*</span></li>")


class DigitalOceanWeb(TemplatePage):
    """React cards found from their ``On-Demand Price`` / ``Reserved Price`` label and
    ``h3`` title (the SKU), per GPU-hour. Knobs: the price an on-demand card shows last
    (the promotional one after a struck-through list price, which never moves); reserved
    cards never move."""

    name = "digitalocean-web"
    files = ("gpu-droplets.html",)
    unit = re.compile(r'<div class="GridItemstyles-sc-eu71zi-0 dShDpL"')

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        label = html.find("On-Demand Price</p>", start, end)
        title = re.search(r"<h3[^>]*>(.*?)</h3>", html[start:end], re.S)
        if label < 0 or title is None:
            return []
        prices = list(_DO_PRICE.finditer(html, start, label))
        if not prices:
            return []
        return [(prices[-1].start(1), prices[-1].end(1), _plain(title.group(1)))]

    def poison(self, unit: str) -> str:
        # a spec pair the spider reads into its dict under a key it never asks for
        return unit.replace(
            "</ul>", f"<li><span>Chaos notes</span><span>{HOSTILE}</span></li></ul>", 1
        )

    def reorder(self, html: str) -> str:
        return _each_unit(self, html, lambda u: _swap(u, _DO_SPEC, 0, 1))

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        if variant == 0:  # the price labels reworded
            html = html.replace(">On-Demand Price</p>", ">Pay as you go</p>")
            return html.replace(">Reserved Price</p>", ">With a commitment</p>")
        if variant == 1:  # the labels are no longer paragraphs
            return re.sub(
                r"<p( class=\"[^\"]*\")>((?:On-Demand|Reserved) Price)</p>",
                r"<div\1>\2</div>",
                html,
            )
        return self._without_units(html)


# ---------------------------------------------------------------------------- Gcore

_GC_PRICE = re.compile(r'"price_per_hour":(\d+\.\d+)')


class GcoreWeb(TemplatePage):
    """A Next.js page: the spider reads only ``__NEXT_DATA__``'s ``gpu-pricing`` flavors
    (the cards repeat them and are never read, so they are served as captured). Knobs:
    each flavor's ``price_per_hour``; ``price_per_month`` never moves. Reordered members
    of every flavor object stand for ``columns_reordered``."""

    name = "gcore-web"
    files = ("ai-gpu.html",)
    unit = re.compile(r'\{"flavor_id":')

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        name = re.search(r'"flavor_name":"([^"]+)"', html[start:end])
        return _figures(_GC_PRICE, html, start, end, name.group(1)) if name else []

    def poison(self, unit: str) -> str:
        return '{"description":"' + _js(HOSTILE) + '",' + unit[1:]

    def reorder(self, html: str) -> str:
        # the flavor_id member moves to the end of each flavor object
        def move(unit: str) -> str:
            first, rest = re.match(r'\{("flavor_id":"[^"]*"),(.*)\}$', unit, re.S).groups()  # type: ignore[union-attr]
            return "{" + rest + "," + first + "}"

        return _each_unit(self, html, move)

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        if variant == 0:  # the section is another component now
            return html.replace('"component":"gpu-pricing"', '"component":"gpu-price-grid"')
        if variant == 1:  # the flavors moved under another key
            return html.replace('"flavors":[', '"instances":[')
        start = html.index('<script id="__NEXT_DATA__"')  # client-side rendering only
        end = html.index("</script>", start) + len("</script>")
        return html[:start] + SCRIPT_MOUNT + html[end:]


# ---------------------------------------------------------------------------- Hyperstack

_HS_HEAD = re.compile(r'<div class="page-price_card_head_item\d+">[^<]*</div>')
_HS_COL = re.compile(r'<div class="page-price_card_row_item_col\d+">.*?</div>', re.S)
_HS_PRICE = re.compile(r"\$(\d+\.\d+)")
_HS_NAME = re.compile(r'_col1"><span>([^<]*)</span>')


class HyperstackWeb(TemplatePage):
    """HubSpot div cards, one per price kind (``On-Demand GPU``, ``Reservation``,
    ``Spot VM``), columns by head text, per GPU-hour. Knobs: the on-demand card's prices;
    spot never moves and reservation rows are not read. A product is its rows in every
    card (a withdrawal takes them all)."""

    name = "hyperstack-web"
    files = ("gpu-pricing.html",)
    unit = re.compile(r'<div class="page-price_card_row_item">')

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        title = re.findall(r"<span>([^<]*)</span> Pricing</h3>", html[:start])
        name = _HS_NAME.search(html, start, end)
        if not title or "on-demand" not in title[-1].lower() or name is None:
            return []
        return _figures(_HS_PRICE, html, start, end, name.group(1).strip())

    def label(self, unit: str) -> str | None:
        name = _HS_NAME.search(unit)
        return name.group(1).strip() if name else None

    def poison(self, unit: str) -> str:  # a div that is no column (not ``…_col<N>``)
        return unit.replace("</div>\n", f'</div><div class="page-price_note">{HOSTILE}</div>\n', 1)

    def reorder(self, html: str) -> str:
        # the first two columns trade places, head and rows, in every card
        html = re.sub(
            r'<div class="page-price_card_head">.*?</div>\s*</div>',
            lambda m: _swap(m.group(0), _HS_HEAD, 0, 1),
            html,
            flags=re.S,
        )
        return _each_unit(self, html, lambda u: _swap(u, _HS_COL, 0, 1))

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        if variant == 0:  # the price head reworded
            return html.replace(">Pricing Per Hour<", ">Hourly cost<")
        if variant == 1:  # the cards are another module
            return html.replace('<div class="page-price_card">', '<div class="pricing-module">')
        return self._without_units(html)


# ---------------------------------------------------------------------------- Lambda

_LW_PRICE = re.compile(r'data-label=\\?"PRICE/GPU/HR\*\\?">\$(\d+\.\d+)<')
_LW_VRAM = re.compile(r'data-label=\\?"VRAM/GPU\\?">([^<]*)<')
_LW_CELL = re.compile(r'<td data-label=\\?"(?:vCPUs|RAM)\\?">[^<]*</td>')


class LambdaWeb(TemplatePage):
    """One table per GPU-count tab, only the active tab server-rendered; every tab also
    ships as escaped ``contentHtml`` in the ``newIslands`` script (the active tab's rows
    twice: HTML and JSON). Rows ``tr[data-plan]`` with ``td[data-label]`` cells, per
    GPU-hour. Knobs: each row's price, in both copies; a product is both copies."""

    name = "lambda-web"
    files = ("pricing.html",)
    unit = re.compile(r'<tr class=\\?"_pricingRow')

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        labels = re.findall(r'"label": "(\d+)x"', html[:start])
        active = re.search(r'aria-selected="true"[^>]*>(\d+)x<', html)
        count = labels[-1] if labels else active.group(1) if active else None
        plan = re.search(r'data-plan=\\?"([^"\\]+)', html[start:end])
        vram = _LW_VRAM.search(html, start, end)
        if count is None or plan is None or vram is None:
            return []
        key = f"{count}x {plan.group(1).strip()} {vram.group(1).strip()}"
        return _figures(_LW_PRICE, html, start, end, key)

    def poison(self, unit: str) -> str:
        escaped = '\\"' in unit
        mark = _js(HOSTILE) if escaped else HOSTILE
        return re.sub(r'(data-label=\\?"STORAGE\\?">)', lambda m: m.group(1) + mark + " ", unit)

    def reorder(self, html: str) -> str:
        return _each_unit(self, html, lambda u: _swap(u, _LW_CELL, 0, 1))

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        if variant == 0:  # rows keyed by another attribute
            return html.replace("data-plan=", "data-sku=")
        if variant == 1:  # tables (HTML and islands) turned into div grids
            return re.sub(r"<(/?)(?:table|thead|tbody|tr|th|td)\b", r"<\1div", html)
        return self._without_units(html)


# ---------------------------------------------------------------------------- Nebius

_NB = "pc-highlight-table-block"
_NB_CELL = re.compile(rf'<div class="{_NB}__cell"[^>]*><div><p>.*?</p></div></div>', re.S)
_NB_ROW = re.compile(rf'<div class="{_NB}__row">')


def _nebius_name(unit: str) -> str | None:
    first = _NB_CELL.search(unit)
    return _plain(first.group(0)) if first else None


class NebiusWeb(TemplatePage):
    """Gravity UI highlight tables (div rows of ``__cell`` divs), columns by head text:
    an on-demand table (with a future-dated column that is not read), a spot table and a
    CPU table. Knobs: the on-demand ``GPU-hour`` prices; spot and future-dated prices
    never move. A product is its rows in every table."""

    name = "nebius-web"
    files = ("prices.html",)
    unit = re.compile(rf'(?<!__head">)<div class="{_NB}__row">')

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        head = html.rfind(f'{_NB}__head">', 0, start)
        body = html.find(f'{_NB}__body">', head)
        headers = [_plain(m.group(0)) for m in _NB_CELL.finditer(html, head, body)]
        wanted = [
            i
            for i, h in enumerate(headers)
            if "on-demand" in h.lower() and "gpu-hour" in h.lower() and "effective" not in h.lower()
        ]
        name = _nebius_name(html[start:end])
        if not wanted or name is None:
            return []
        cell = _nth(_NB_CELL, html, start, end, wanted[0])
        if cell is None:
            return []
        return _figures(re.compile(r"\$(\d+\.\d+)"), html, cell.start(), cell.end(), name)

    def label(self, unit: str) -> str | None:
        return _nebius_name(unit)

    def poison(self, unit: str) -> str:  # one cell more than the headers: never read
        extra = f'<div class="{_NB}__cell"><div><p>{HOSTILE}</p></div></div>'
        return unit[: -len("</div>")] + extra + "</div>"

    def reorder(self, html: str) -> str:
        # vCPUs and RAM trade places in every row, head rows included
        out, at = [], 0
        for match in _NB_ROW.finditer(html):
            if match.start() < at:
                continue
            end = _balanced_end(html, match.start())
            out += [html[at : match.start()], _swap(html[match.start() : end], _NB_CELL, 1, 2)]
            at = end
        return "".join(out) + html[at:]

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        if variant == 0:  # "GPU-hour" no longer in the headers
            return html.replace("GPU-hour", "per GPU per hour")
        if variant == 1:  # another table component
            return html.replace(f"{_NB}__table", "pc-price-table-block__grid")
        return self._without_units(html)


# ---------------------------------------------------------------------------- OVHcloud

_OVH_PRICE = re.compile(r'data-price-type="ht">€(\d+,\d+) HT / heure')
_OVH_TH = re.compile(r"<th>[^<]*</th>")
_OVH_LI = re.compile(r"<li>.*?</li>", re.S)


class OvhCloudWeb(TemplatePage):
    """Two pages in one crawl: the Public Cloud price tables (the GPU one by its ``GPU``
    and ``Prix`` headers, columns by exact French header, ``€2,80 HT / heure`` with a
    hidden TTC copy) and the bare-metal GPU server cards (monthly floors). Knobs: the
    GPU instances' HT hourly prices (the hidden TTC copy is never read and never moves);
    the monthly server prices never move. Faults hit one page (``drop_90`` both)."""

    name = "ovhcloud-web"
    files = ("public-cloud-prices.html", "bare-metal-gpu.html")
    unit = re.compile(r'<tr data-planCode="|<div class="server-card" data-server="')
    decimal_comma = True

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        name = re.search(r'<td class="flavor-name">([^<]+)</td>', html[start:end])
        return _figures(_OVH_PRICE, html, start, end, name.group(1)) if name else []

    def poison(self, unit: str) -> str:
        if unit.startswith("<tr"):  # the storage cell is not read
            return re.sub(r"(NVMe)</td>", rf"\1 {HOSTILE}</td>", unit, count=1)
        return unit.replace(
            "</ul>",
            f'<li><span class="server-card__label">Note</span><span>{HOSTILE}</span></li></ul>',
        )

    def reorder(self, html: str) -> str:
        def swap_gpu_head(match: re.Match[str]) -> str:
            head = match.group(0)
            return _swap(head, _OVH_TH, 4, 5) if "<th>GPU</th>" in head else head

        html = re.sub(r"<thead>.*?</thead>", swap_gpu_head, html, flags=re.S)

        def edit(unit: str) -> str:
            if unit.startswith("<tr"):  # vCore and Mémoire of a GPU row
                return _swap(unit, _TD, 4, 5) if "NVIDIA" in unit else unit
            return _swap(unit, _OVH_LI, 1, 2)  # a server's CPU and memory specs

        return _each_unit(self, html, edit)

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        if variant == 0:  # the price header / the GPU spec renamed
            if page == 0:
                return html.replace("<th>Prix</th>", "<th>Tarif</th>")
            return html.replace('label">GPU</span>', 'label">Accélérateur</span>')
        if variant == 1:  # tables turned into div grids / cards keyed otherwise
            if page == 0:
                return re.sub(r"<(/?)(?:table|thead|tbody|tr|th|td)\b", r"<\1div", html)
            return html.replace("data-server=", "data-product=")
        return self._without_units(html)


# ---------------------------------------------------------------------------- Paperspace

_PS_PRICE = re.compile(r'<h1 class="instance-price-2">(\d+\.\d+)</h1>')
_PS_SPECS = re.compile(r'(<p class="instance-specs-2">)([^<]*)<br>([^<]*)<br>')


class PaperspaceWeb(TemplatePage):
    """Webflow cards (``h1.instance-names``, the price in ``h1.instance-price-2``) with
    hidden copies (a template price per card, a legacy grid). A card with multi-GPU pills
    prices every count (``A100x2``…) from one per-GPU figure, and the starred H100 price
    is a commitment whose on-demand price sits in a footnote: those never move (one knob
    cannot move several skus). Knobs: the single-GPU cards' prices."""

    name = "paperspace-web"
    files = ("pricing.html",)
    unit = re.compile(r'<div class="instance-card w-dyn-item" role="listitem">')

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        name = re.search(r'<h1 class="instance-names">([^<]+)</h1>', html[start:end])
        price = _PS_PRICE.search(html, start, end)  # the first: the visible one
        if name is None or price is None:
            return []
        return [(price.start(1), price.end(1), name.group(1))]

    def poison(self, unit: str) -> str:
        return unit.replace(">Get started</a>", f">Get started {HOSTILE}</a>")

    def reorder(self, html: str) -> str:  # spec lines are found by keyword
        return _PS_SPECS.sub(r"\1\3<br>\2<br>", html)

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        if variant == 0:  # the name class renamed
            return html.replace('class="instance-names"', 'class="instance-title"')
        if variant == 1:  # names are no longer headings
            return re.sub(
                r'<h1 class="instance-names">(.*?)</h1>',
                r'<div class="instance-names">\1</div>',
                html,
            )
        return self._without_units(html)


# ---------------------------------------------------------------------------- Scaleway

_SW_JSON = re.compile(r'"hourly":"€(\d+\.\d+)/hour"')
_SW_CELL = re.compile(r'<span class="Price_price__q1vUe">€(\d+\.\d+)/hour</span>')
_SW_TH = re.compile(r"<th[^>]*>[^<]*</th>")


class ScalewayWeb(TemplatePage):
    """A Next.js page: ``__NEXT_DATA__``'s ``ComponentPricingOffer`` objects, read first,
    and the table rendered from them (the spider's fallback); per instance-hour, one offer
    per availability zone. Knobs: each GPU offer's hourly price, in the JSON and the
    table; the monthly cap never moves. A product is its JSON object and its table row."""

    name = "scaleway-web"
    files = ("prices-gpu.html",)
    unit = re.compile(
        r'\{"__typename":"ComponentPricingOffer","id":"\d+"|<tr class="Table_row__Yp1sd">(?=\s*<td)'
    )

    def slots(self, page: int, html: str, start: int, end: int) -> list[tuple[int, int, str]]:
        unit = html[start:end]
        if unit.startswith("{"):
            name = re.search(r'"name":"([^"]+)"', unit)
            return _figures(_SW_JSON, html, start, end, name.group(1)) if name else []
        name = re.search(r"<strong>([^<]+)</strong>", unit)
        return _figures(_SW_CELL, html, start, end, name.group(1)) if name else []

    def poison(self, unit: str) -> str:
        if unit.startswith("{"):
            return '{"description":"' + _js(HOSTILE) + '",' + unit[1:]
        return re.sub(r"(Gbps)</td>", rf"\1 {HOSTILE}</td>", unit, count=1)

    def reorder(self, html: str) -> str:
        def edit(unit: str) -> str:
            if unit.startswith("{"):  # the id member moves to the end
                first, rest = re.match(r'\{("__typename":"[^"]*"),(.*)\}$', unit, re.S).groups()  # type: ignore[union-attr]
                return "{" + rest + "," + first + "}"
            return _swap(unit, _TD, 3, 4)  # vCPUs and RAM

        html = re.sub(
            r"<thead>.*?</thead>",
            lambda m: _swap(m.group(0), _SW_TH, 3, 4),
            html,
            count=1,
            flags=re.S,
        )
        return _each_unit(self, html, edit)

    def relayout_page(self, html: str, page: int, variant: int) -> str:
        if variant == 0:  # the JSON type and the table header renamed
            html = html.replace('"ComponentPricingOffer"', '"ComponentOfferCard"')
            return html.replace(">Instance</th>", ">Instance type</th>")
        if variant == 1:  # no embedded JSON, the table turned into a div grid
            start = html.index('<script id="__NEXT_DATA__"')
            end = html.index("</script>", start) + len("</script>")
            html = html[:start] + html[end:]
            return re.sub(r"<(/?)(?:table|thead|tbody|tr|th|td)\b", r"<\1div", html)
        return self._without_units(html)


ADAPTERS: tuple[type[Adapter], ...] = (
    CoreWeaveWeb,
    DigitalOceanWeb,
    GcoreWeb,
    HyperstackWeb,
    LambdaWeb,
    NebiusWeb,
    OvhCloudWeb,
    PaperspaceWeb,
    ScalewayWeb,
)
