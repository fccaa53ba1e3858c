"""Item pipelines: the SAME validation steps API clients use, then hand-off to ingest.

1. :class:`ValidateOffers` runs :class:`crawlers.pipeline.Pipeline` (stamp, GPU and region
   mapping, ``OfferRecord`` validation) on each item: rejections are logged with their
   reason and counted in the crawl stats, so the child's log shows them as they happen.
   Nothing is dropped: a rejected row still travels to ingest, which stores it with its
   reason and keeps its offer from being withdrawn (invariant 5).
2. :class:`CollectOffers` hands every raw item to the crawl's :class:`Harvest`, which the
   child process writes out for the parent to ingest.

Modern Scrapy style (2.13+): ``process_item(self, item)`` and ``open_spider(self)`` take no
spider argument; the crawler comes from ``from_crawler``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crawlers.normalize.reference import ReferenceIndex, gpu_facts
from crawlers.pipeline import Pipeline, Rejected, SourceMeta

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawlers.scrapy.spider import HtmlSpider


REFERENCE_SETTING = "GPUATLAS_REFERENCE"
"""The parent's reference index, passed as plain data so the child need not re-read the
YAML files (the parent has them loaded; parsing them again costs a second per crawl)."""


def reference_data(index: ReferenceIndex) -> dict[str, Any]:
    return {
        "aliases": index.aliases,
        "gpus": [
            {
                "slug": g.slug,
                "name": g.name,
                "memory_gb": None if g.memory_gb is None else str(g.memory_gb),
                "form_factor": g.form_factor,
                "default": g.default,
            }
            for g in index.gpus
        ],
        "regions": [
            [provider, code, country] for (provider, code), country in index.regions.items()
        ],
    }


def reference_from_data(data: dict[str, Any]) -> ReferenceIndex:
    return ReferenceIndex(
        aliases=dict(data["aliases"]),
        gpus=tuple(gpu_facts(row) for row in data["gpus"]),
        regions={(provider, code): country for provider, code, country in data["regions"]},
    )


def _spider(crawler: Crawler) -> HtmlSpider:
    spider = crawler.spider
    if spider is None or not getattr(spider, "is_gpuatlas_spider", False):
        raise TypeError("gpuatlas pipelines run only with an HtmlSpider")
    return spider  # type: ignore[return-value]


class ValidateOffers:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.pipeline: Pipeline | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ValidateOffers:
        return cls(crawler)

    def open_spider(self) -> None:
        spider = _spider(self.crawler)
        data = self.crawler.settings.get(REFERENCE_SETTING)
        self.pipeline = Pipeline(
            SourceMeta(
                name=spider.name,
                provider=spider.provider,
                currency=spider.currency,
                tax_included=getattr(spider, "tax_included", None),
            ),
            reference_from_data(data) if data else None,
        )

    def process_item(self, item: Any) -> Any:
        assert self.pipeline is not None
        stats = self.crawler.stats
        result = self.pipeline.process(dict(item))
        if isinstance(result, Rejected):
            _spider(self.crawler).logger.warning(
                "rejected %s: %s", item.get("sku", "?"), result.reason
            )
            if stats is not None:
                stats.inc_value("gpuatlas/rejected")
        elif stats is not None:
            stats.inc_value("gpuatlas/valid")
        return item

    def close_spider(self) -> None:
        if self.pipeline is None:
            return
        unmapped = self.pipeline.stats.unmapped
        if unmapped:
            _spider(self.crawler).logger.info(
                "unmapped names (add aliases): %s",
                ", ".join(f"{name} ×{count}" for name, count in sorted(unmapped.items())),
            )


class CollectOffers:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CollectOffers:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        _spider(self.crawler).harvest.records.append(dict(item))
        return item
