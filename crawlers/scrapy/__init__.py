"""Scrapy crawling of pricing pages: the spider base, settings, pipelines, child runner.

Spider modules live in ``crawlers/providers/`` and subclass :class:`HtmlSpider`;
``crawlers.scrapy.runner.run_spider`` runs one in a child process.
"""

from crawlers.scrapy.spider import (
    HtmlSpider,
    cell,
    column,
    has_class,
    price_columns,
    slug,
    text,
    visible,
)

__all__ = [
    "HtmlSpider",
    "cell",
    "column",
    "has_class",
    "price_columns",
    "slug",
    "text",
    "visible",
]
