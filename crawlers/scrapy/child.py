"""The child process of one crawl: ``python -m crawlers.scrapy.child JOB.json``.

Twisted's reactor cannot be restarted inside the long-running service, so each crawl
runs here, in a fresh interpreter. The job file (written by :mod:`crawlers.scrapy.runner`)
names the spider class, the site and the Scrapy settings; this process runs the crawl
with the asyncio reactor and writes ``result.json`` plus one file per fetched page into
the job's directory. It never touches the database or the service's Settings.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

RESULT = "result.json"


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)  # exact: OfferRecord reads decimal strings
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


class _WarningLog(logging.Handler):
    """Collects warnings (Scrapy routes them to the ``py.warnings`` logger)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().strip().splitlines()[0][:500])


def run(job: dict[str, Any], out: Path) -> dict[str, Any]:
    from scrapy.crawler import AsyncCrawlerProcess
    from scrapy.utils.misc import load_object

    from crawlers.scrapy.spider import HtmlSpider

    spider_cls = load_object(job["spider"])
    if not (isinstance(spider_cls, type) and issubclass(spider_cls, HtmlSpider)):
        raise TypeError(f"{job['spider']} is not an HtmlSpider")
    process = AsyncCrawlerProcess(job["settings"])
    captured = _WarningLog()
    logging.getLogger("py.warnings").addHandler(captured)
    crawler = process.create_crawler(spider_cls)
    process.crawl(crawler, site=job["base_url"])
    process.start(install_signal_handlers=False)
    spider = crawler.spider
    if not isinstance(spider, HtmlSpider):
        raise RuntimeError("the crawl did not start (see the log)")
    harvest = spider.harvest
    pages = []
    for index, payload in enumerate(harvest.payloads):
        name = f"page-{index:04d}.body"
        (out / name).write_bytes(payload.body)
        pages.append(
            {
                "file": name,
                "url": payload.url,
                "status": payload.status,
                "content_type": payload.content_type,
                "fetched_at": payload.fetched_at.isoformat(),
            }
        )
    stats = crawler.stats.get_stats() if crawler.stats else {}
    return {
        "records": harvest.records,
        "payloads": pages,
        "failures": harvest.failures,
        "no_price": dict(harvest.no_price),
        "rows": harvest.rows,
        "incomplete": harvest.incomplete,
        "pages": harvest.pages,
        "finish_reason": stats.get("finish_reason"),
        "retries": stats.get("retry/count", 0),
        "stats": {k: v for k, v in stats.items() if isinstance(v, int | float | str)},
        "warnings": captured.messages,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m crawlers.scrapy.child JOB.json", file=sys.stderr)
        return 2
    job_path = Path(argv[1])
    job = json.loads(job_path.read_text(encoding="utf-8"))
    out = job_path.parent
    warnings.simplefilter("default")
    result = run(job, out)
    (out / RESULT).write_text(json.dumps(result, default=_json_default), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
