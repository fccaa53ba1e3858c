"""``HtmlSpider``: the base every pricing-page spider extends.

A spider module declares its provider metadata as class attributes and implements one
method, :meth:`HtmlSpider.parse_page`, which reads page-specific hooks (``data-*``
attributes, header text, embedded JSON) and calls :meth:`HtmlSpider.offer` once per
price cell. Everything else lives here: start requests, the record shape, price-string
parsing, "no public price" counting, duplicate DOM, error mapping (404, robots.txt,
redirect loop, too large, timeout…) and "layout changed" detection.

The spider never validates or writes: records go through the item pipelines
(:mod:`crawlers.scrapy.pipelines`, the same steps API clients use) and, in the parent
process, to ingest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, ClassVar

import scrapy
from parsel import Selector, SelectorList
from scrapy.exceptions import (
    DownloadCancelledError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.http import Response, TextResponse
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from crawlers.base import LayoutChanged, SourceError
from crawlers.normalize.prices import UnparseablePrice, parse_price
from schema.enums import PricePer, Unit

RawRecord = dict[str, Any]
Node = Selector | SelectorList[Selector]

# Elements a browser would not show: Webflow "hide"/"w-condition-invisible", Bootstrap
# "d-none", the hidden attribute, aria-hidden, inline display:none.
_HIDDEN = (
    "ancestor-or-self::*[@hidden or @aria-hidden='true'"
    " or contains(translate(@style, ' ', ''), 'display:none')"
    + "".join(
        f" or contains(concat(' ', normalize-space(@class), ' '), ' {cls} ')"
        for cls in ("hide", "hidden", "d-none", "w-condition-invisible", "sr-only")
    )
    + "]"
)
_TEXT = (
    ".//text()[not(ancestor::sup) and not(ancestor::script) and not(ancestor::style)"
    " and not(ancestor::noscript) and not(ancestor::template)]"
)
_WS = re.compile(r"[\s\u00a0\u202f\u2009\u200b]+")


# ------------------------------------------------------------------ selector helpers


def text(node: Node | None) -> str:
    """Visible text of a node (or of every node in a list, space-joined), whitespace
    collapsed. Footnote markers in ``<sup>`` are dropped ("4<sup>1</sup>" -> "4"), and
    React's ``<!-- -->`` comment splits vanish ("$<!-- -->1.99" -> "$1.99")."""
    if node is None:
        return ""
    nodes = node if isinstance(node, SelectorList) else [node]
    parts = ["".join(n.xpath(_TEXT).getall()) for n in nodes]
    return _WS.sub(" ", " ".join(parts)).strip()


def visible(nodes: Iterable[Selector]) -> list[Selector]:
    """The nodes a browser would show (drops ``.hide`` templates, ``display:none``…)."""
    return [n for n in nodes if not n.xpath(_HIDDEN)]


def column(headers: list[str], *words: str) -> int | None:
    """Index of the first header containing every word (case-insensitive), or None."""
    wanted = [w.lower() for w in words]
    for index, header in enumerate(headers):
        lowered = header.lower()
        if all(w in lowered for w in wanted):
            return index
    return None


def cell(cells: list[Any], index: int | None) -> Any:
    """``cells[index]``, or None when the column is missing or the row is short."""
    return cells[index] if index is not None and index < len(cells) else None


def price_columns(headers: list[str], **kinds: str) -> list[tuple[int | None, str]]:
    """(column index, price kind) for each ``kind=word``: the header holding the word and
    "price" (``on_demand="on-demand"`` finds "On-Demand Price (Per Hour)")."""
    return [(column(headers, word, "price"), kind) for kind, word in kinds.items()]


def has_class(name: str) -> str:
    """XPath predicate: the element's class list holds ``name`` (CSS ``.name``)."""
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


def slug(value: str) -> str:
    """ "REGION: NORTH AMERICA" -> "north-america" (for region labels)."""
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")


# ------------------------------------------------------------------ crawl state


@dataclass
class PagePayload:
    url: str
    status: int
    content_type: str | None
    body: bytes
    fetched_at: datetime


@dataclass
class Harvest:
    """What one crawl produced, gathered by the spider and its item pipelines."""

    records: list[RawRecord] = field(default_factory=list)
    payloads: list[PagePayload] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(reason, detail): the first one decides the crawl's status."""
    no_price: Counter[str] = field(default_factory=Counter)
    """Rows without a public price, by marker ("Contact us", "––", "blank")."""
    rows: int = 0
    """Price cells seen (priced, unpriced or unreadable)."""
    incomplete: list[str] = field(default_factory=list)
    """Structural gaps (a row without its price cell, a cut table): while any is noted,
    ingest withdraws nothing, since offers missing from this crawl may just be cut off."""
    pages: int = 0

    def fail(self, reason: str, detail: str) -> None:
        self.failures.append((reason, detail))


def describe_failure(failure: Failure) -> tuple[str, str]:
    """A Scrapy download/processing failure -> (short reason, detail)."""
    exc = failure.value
    request = getattr(failure, "request", None)
    url = request.url if request is not None else "?"
    message = str(exc)
    if isinstance(exc, HttpError):
        status = exc.response.status
        url = exc.response.url
        if status in (404, 410):
            return "not found", f"HTTP {status} from {url}"
        if status in (401, 403):
            return "blocked", f"HTTP {status} from {url}"
        if status == 429:
            return "rate limited", f"HTTP 429 from {url} (retries exhausted)"
        if status >= 500:
            return "server error", f"HTTP {status} from {url} (retries exhausted)"
        return "http error", f"HTTP {status} from {url}"
    if isinstance(exc, IgnoreRequest):
        if "robots.txt" in message:
            return "robots.txt disallowed", f"{url} is disallowed by the site's robots.txt"
        if "redirect" in message:
            return "redirect loop", f"{url}: {message}"
        return "ignored request", f"{url}: {message}"
    if isinstance(exc, DownloadCancelledError) and "max size" in message:
        return "too large", message
    if isinstance(exc, DownloadTimeoutError):
        return "timeout", message
    if isinstance(exc, ResponseDataLossError):
        return "truncated body", f"{url}: the connection closed before the whole page arrived"
    return "network error", f"{url}: {type(exc).__name__}: {message}"[:500]


# ------------------------------------------------------------------ the base spider


class HtmlSpider(scrapy.Spider):
    """Base of every pricing-page spider. Subclasses set metadata and ``parse_page``."""

    is_gpuatlas_spider: ClassVar[bool] = True
    provider: ClassVar[str]
    kind: ClassVar[str] = "html"
    schedule: ClassVar[str] = "6h"
    parser_version: ClassVar[str] = "1"
    base_url: ClassVar[str]
    currency: ClassVar[str | None] = "USD"
    start_paths: ClassVar[tuple[str, ...]] = ("/",)
    region: ClassVar[str] = "global"
    """Region code for pages that quote one price for every region."""
    decimal_comma: ClassVar[bool | None] = None
    """True for pages printing "1.299,50" (see crawlers.normalize.prices)."""
    credential: ClassVar[str | None] = None
    docs_url: ClassVar[str | None] = None
    terms_url: ClassVar[str | None] = None
    fixtures: ClassVar[str | None] = None
    """Folder under fixtures/ with this source's pages (defaults to name)."""

    def __init__(self, *args: Any, site: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.site = (site or type(self).base_url).rstrip("/")
        self.harvest = Harvest()
        self._seen: dict[str, set[tuple[Any, ...]]] = {}

    # ---------------------------------------------------------------- requests

    def start_urls_for_site(self) -> list[str]:
        return [self.site + path for path in self.start_paths]

    async def start(self) -> AsyncIterator[Any]:
        for url in self.start_urls_for_site():
            yield scrapy.Request(url, callback=self.parse, errback=self.on_error, dont_filter=True)

    def on_error(self, failure: Failure) -> None:
        if isinstance(failure.value, HttpError):
            self._keep_payload(failure.value.response)
        reason, detail = describe_failure(failure)
        self.logger.error("%s: %s", reason, detail)
        self.harvest.fail(reason, detail)

    # ---------------------------------------------------------------- parsing

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        """Run ``parse_page`` on one page, guarding against layout changes."""
        self._keep_payload(response)
        self.harvest.pages += 1
        if not isinstance(response, TextResponse):
            content_type = (response.headers.get("Content-Type") or b"").decode("latin-1")
            self.harvest.fail(
                "layout changed",
                f"{response.url} is not a text page ({content_type or 'no content type'})",
            )
            return
        rows_before = self.harvest.rows
        try:
            for item in self.parse_page(response):
                if isinstance(item, scrapy.Request) and item.errback is None:
                    item = item.replace(errback=self.on_error)
                yield item
        except SourceError as exc:
            self.harvest.fail(exc.reason, f"{response.url}: {exc.detail or exc.reason}")
            return
        except (KeyError, IndexError, AttributeError, TypeError, ValueError) as exc:
            self.harvest.fail(
                "layout changed", f"{response.url}: {type(exc).__name__}: {exc}"[:500]
            )
            return
        if self.harvest.rows == rows_before:
            self.harvest.fail("layout changed", f"{response.url}: no price rows found")

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        """Yield records (via :meth:`offer`) and follow-up requests for one page."""
        raise NotImplementedError

    def once(self, response: Response, *key: Any) -> bool:
        """True the first time ``key`` comes up on this page: pages repeat their rows (mobile
        copies, a tab both in the HTML and in embedded JSON)."""
        seen = self._seen.setdefault(response.url, set())
        if key in seen:
            return False
        seen.add(key)
        return True

    def require(self, nodes: SelectorList[Selector] | list[Any], what: str) -> Any:
        """``nodes`` if non-empty, else a 'layout changed' failure naming ``what``."""
        if not nodes:
            raise LayoutChanged(f"{what} not found")
        return nodes

    def offer(
        self,
        response: TextResponse,
        *,
        sku: str,
        price: str | None,
        gpu_name: str | None,
        gpu_count: Decimal | int | str | None,
        price_kind: str = "on_demand",
        unit: Unit | None = None,
        per_gpu: bool | None = None,
        region: str | None = None,
        floor: bool = False,
        **specs: Any,
    ) -> Iterator[RawRecord]:
        """One price cell -> zero or one raw OfferRecord dict (``yield from self.offer(...)``).

        ``price`` is the cell's text; ``unit``/``per_gpu`` are the column's defaults (the
        text itself wins); ``floor`` marks the price a floor whatever the text says. No
        public price ("Contact sales", "––", empty) yields nothing and is counted. A
        missing cell (``None``) or unreadable text yields the record anyway, so the
        pipeline rejects it with a reason and the row is not lost.
        """
        self.harvest.rows += 1
        record: RawRecord = {
            "sku": sku,
            "gpu_name_raw": gpu_name or None,
            "gpu_count": gpu_count,
            "region": region or self.region,
            "price_kind": price_kind,
            "source_url": response.url,
            **{k: v for k, v in specs.items() if v is not None},
            **({"price_floor": True} if floor else {}),
        }
        if unit is not None:
            record["unit"] = unit.value
        if per_gpu is not None:
            record["price_per"] = (PricePer.gpu if per_gpu else PricePer.instance).value
        if price is None:
            self.logger.warning("no price cell for %s (%s)", sku, price_kind)
            self.harvest.incomplete.append(f"{response.url}: no price cell for {sku}")
            yield record
            return
        try:
            parsed = parse_price(
                price,
                currency=self.currency,
                unit=unit,
                per_gpu=per_gpu,
                decimal_comma=self.decimal_comma,
            )
        except UnparseablePrice as exc:
            self.logger.warning("unreadable price for %s (%s): %s", sku, price_kind, exc)
            yield {**record, "amount": price.strip()[:40]}
            return
        if parsed is None:
            marker = _WS.sub(" ", price).strip() or "blank"
            self.harvest.no_price[marker[:40]] += 1
            self.logger.info("no public price for %s (%s): %r", sku, price_kind, marker)
            return
        record.update(amount=str(parsed.amount), price_floor=parsed.floor or floor)
        if parsed.currency:
            record["currency"] = parsed.currency
        if parsed.unit is not None:
            record["unit"] = parsed.unit.value
        if parsed.per_gpu is not None:
            record["price_per"] = (PricePer.gpu if parsed.per_gpu else PricePer.instance).value
        yield record

    # ---------------------------------------------------------------- provenance

    def _keep_payload(self, response: Response) -> None:
        content_type = response.headers.get("Content-Type")
        self.harvest.payloads.append(
            PagePayload(
                url=response.url,
                status=response.status,
                content_type=content_type.decode("latin-1") if content_type else None,
                body=response.body,
                fetched_at=datetime.now(UTC),
            )
        )
