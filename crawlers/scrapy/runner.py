"""Run one spider: in a child process (network), or in-process over saved files.

``run_spider`` is what :func:`service.crawl.run.fetch_source` calls for every HTML source.
A crawl runs in a fresh interpreter (``python -m crawlers.scrapy.child``) because the
Twisted reactor cannot restart inside the long-running service; the child is killed
when it exceeds its time budget. Its result comes back as a :class:`SpiderOutput`
(records, every fetched page for provenance, source URLs, the log tail); any failure
comes back as a :class:`~crawlers.base.SourceError` with a short reason:

``not found``, ``blocked``, ``rate limited``, ``server error``, ``http error``,
``robots.txt disallowed``, ``redirect loop``, ``too large``, ``timeout``,
``truncated body``, ``network error``, ``layout changed``, ``crawler crashed``.

``from_files`` parses saved pages offline with the same ``parse`` code and no reactor.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crawlers.base import Context, SourceError
from crawlers.http import CrawlOutput, FetchedPayload, FetchPolicy
from crawlers.normalize.reference import reference_index
from crawlers.scrapy.child import RESULT
from crawlers.scrapy.pipelines import reference_data
from crawlers.scrapy.settings import crawl_settings
from crawlers.scrapy.spider import Harvest, HtmlSpider

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOG_TAIL_CHARS = 20_000
ERROR_TAIL_CHARS = 1_500


class CrawlerWarning(UserWarning):
    """A warning raised inside the crawl's child process, re-emitted in the parent."""


@dataclass
class SpiderOutput(CrawlOutput):
    log: str = ""
    """The tail of the child's Scrapy log (or a note for offline parses)."""
    no_price: dict[str, int] = field(default_factory=dict)
    """Rows without a public price, by marker: counted, never emitted as offers."""
    stats: dict[str, Any] = field(default_factory=dict)


def run_spider(
    source_cls: type,
    ctx: Context,
    policy: FetchPolicy,
    *,
    from_files: list[Path] | None = None,
    timeout: float = 1800.0,
    http_cache_dir: Path | None = None,
    log_level: str = "INFO",
    overrides: dict[str, Any] | None = None,
) -> SpiderOutput:
    """Crawl ``source_cls`` (an HtmlSpider) at ``ctx.base_url``; raise SourceError on failure."""
    if not (isinstance(source_cls, type) and issubclass(source_cls, HtmlSpider)):
        raise TypeError(f"{source_cls!r} is not an HtmlSpider")
    if from_files:
        return parse_files(source_cls, ctx, from_files)
    with tempfile.TemporaryDirectory(prefix="gpuatlas-crawl-") as tmp:
        work = Path(tmp)
        settings = crawl_settings(
            user_agent=policy.user_agent,
            base_url=ctx.base_url,
            timeout=policy.timeout,
            max_retries=policy.max_retries,
            max_bytes=policy.max_bytes,
            max_pages=policy.max_pages,
            log_file=work / "crawl.log",
            log_level=log_level,
            http_cache_dir=http_cache_dir,
            overrides=overrides,
        )
        settings["GPUATLAS_REFERENCE"] = reference_data(reference_index())
        job = {
            "spider": f"{source_cls.__module__}.{source_cls.__qualname__}",
            "base_url": ctx.base_url,
            "settings": settings,
        }
        job_path = work / "job.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        returncode = _run_child(job_path, work / "stderr.log", timeout, source_cls.name)
        log = _log_tail(work)
        result_path = work / RESULT
        if returncode != 0 or not result_path.exists():
            raise _with_log(
                SourceError(
                    "crawler crashed", f"the crawl process exited with status {returncode}"
                ),
                log,
            )
        result = json.loads(result_path.read_text(encoding="utf-8"))
        for message in result.get("warnings", []):
            warnings.warn(f"{source_cls.name}: {message}", CrawlerWarning, stacklevel=2)
        output = _output(result, work, log)
    _raise_for(result["failures"], result["finish_reason"], log, output)
    return output


def _run_child(job_path: Path, stderr_path: Path, timeout: float, name: str) -> int:
    command = [sys.executable, "-m", "crawlers.scrapy.child", str(job_path)]
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(  # noqa: S603 (our own interpreter and module)
            command,
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            cwd=PROJECT_ROOT,
            start_new_session=True,
        )
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(process)
            raise _with_log(
                SourceError("timeout", f"crawl of {name} exceeded {timeout:g} s; child killed"),
                _log_tail(job_path.parent),
            ) from None
        except BaseException:
            _kill(process)
            raise


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the child and anything it started (it leads its own process group)."""
    if process.poll() is None:
        try:
            if hasattr(os, "killpg"):
                os.killpg(process.pid, signal.SIGKILL)
            else:  # pragma: no cover - Windows
                process.kill()
        except ProcessLookupError:  # pragma: no cover - exited meanwhile
            pass
    process.wait()


def _log_tail(work: Path) -> str:
    parts = []
    for name in ("crawl.log", "stderr.log"):
        path = work / name
        if path.exists() and path.stat().st_size:
            raw = path.read_bytes()[-LOG_TAIL_CHARS:]
            parts.append(raw.decode("utf-8", "replace"))
    return "\n".join(parts)[-LOG_TAIL_CHARS:]


def _with_log(error: SourceError, log: str, output: SpiderOutput | None = None) -> SourceError:
    """Attach what a failed crawl still has: the log tail (short in the error text, whole
    on ``error.log``) and the pages fetched before the failure (``error.output``), so the
    crawl run keeps them for review and re-parsing."""
    tail = log[-ERROR_TAIL_CHARS:].strip()
    if tail:
        detail = f"{error.detail or ''}\n--- crawler log (tail) ---\n{tail}"
        error = SourceError(error.reason, detail)
    error.log = log  # type: ignore[attr-defined]
    error.output = output  # type: ignore[attr-defined]
    return error


def _output(result: dict[str, Any], work: Path, log: str) -> SpiderOutput:
    output = SpiderOutput(
        log=log, no_price=result.get("no_price", {}), stats=result.get("stats", {})
    )
    output.records = result["records"]
    for page in result["payloads"]:
        output.payloads.append(
            FetchedPayload(
                url=page["url"],
                fetched_at=datetime.fromisoformat(page["fetched_at"]),
                status_code=page["status"],
                content_type=page["content_type"],
                body=(work / page["file"]).read_bytes(),
            )
        )
        if 200 <= page["status"] < 300:
            output.source_urls.append(page["url"])
    output.pages = result["pages"]
    output.retries = int(result.get("retries") or 0)
    output.complete = not result["failures"] and not result.get("incomplete")
    return output


def _raise_for(
    failures: Iterable[Any], finish_reason: str | None, log: str, output: SpiderOutput
) -> None:
    failures = list(failures)
    if failures:
        reason, detail = failures[0]
        more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
        raise _with_log(SourceError(reason, f"{detail}{more}"), log, output)
    if finish_reason == "closespider_pagecount":
        error = SourceError("too many pages", "the page budget was exhausted")
        raise _with_log(error, log, output)
    if finish_reason not in (None, "finished"):
        error = SourceError("crawl interrupted", f"finish reason {finish_reason}")
        raise _with_log(error, log, output)


def parse_files(spider_cls: type[HtmlSpider], ctx: Context, paths: list[Path]) -> SpiderOutput:
    """Parse saved pages offline (no network, no reactor), with the spider's own ``parse``.

    File *i* is read as the response for the spider's *i*-th start URL (the page it was
    saved from); extra files get their own ``file:`` URL. Follow-up requests are ignored.
    """
    from scrapy import Request
    from scrapy.http import HtmlResponse

    spider = spider_cls(site=ctx.base_url)
    urls = spider.start_urls_for_site()
    output = SpiderOutput(log=f"parsed {len(paths)} saved page(s) offline")
    for index, path in enumerate(paths):
        url = urls[index] if index < len(urls) else path.resolve().as_uri()
        body = path.read_bytes()
        response = HtmlResponse(url=url, body=body, request=Request(url))
        for item in spider.parse(response):
            if isinstance(item, dict):
                output.records.append(item)
        output.source_urls.append(url)
        output.payloads.append(FetchedPayload(url, datetime.now(UTC), 200, "text/html", body))
    output.pages = len(paths)
    harvest: Harvest = spider.harvest
    output.no_price = dict(harvest.no_price)
    output.complete = not harvest.incomplete
    _raise_for(harvest.failures, None, output.log, output)
    return output
