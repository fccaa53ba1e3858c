"""Scrapy settings for every gpuatlas spider: politeness first, then robustness.

Built per crawl by :func:`crawl_settings` from the service's fetch policy (user agent,
timeouts, retries, byte cap), so there is one source of configuration: the service's
``Settings``. Nothing here reads the environment.

Politeness: robots.txt is obeyed, one request at a time per site, a 2 s base delay that
AutoThrottle raises when the site slows down, an identifying user agent with a contact
URL, no cookies. Only a loopback target (the local replay server the tests use) skips
the delays: there is no remote site to be polite to.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"

HTML_MAX_BYTES = 16 * 1024 * 1024
"""A pricing page is tens or hundreds of KB; anything above 16 MiB is refused."""
HTML_WARN_BYTES = 4 * 1024 * 1024
RETRY_HTTP_CODES = [429, 500, 502, 503, 504, 522, 524, 408]
REDIRECT_MAX_TIMES = 5
DOWNLOAD_DELAY = 2.0
AUTOTHROTTLE_START_DELAY = 5.0
AUTOTHROTTLE_MAX_DELAY = 60.0
HTTPCACHE_EXPIRATION_SECS = 6 * 3600

ITEM_PIPELINES = {
    "crawlers.scrapy.pipelines.ValidateOffers": 100,
    "crawlers.scrapy.pipelines.CollectOffers": 900,
}


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def crawl_settings(
    *,
    user_agent: str,
    base_url: str,
    timeout: float = 30.0,
    max_retries: int = 2,
    max_bytes: int = HTML_MAX_BYTES,
    max_pages: int = 100,
    log_file: Path | None = None,
    log_level: str = "INFO",
    http_cache_dir: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Scrapy settings dict for one crawl of one site."""
    local = is_loopback(base_url)
    max_size = min(max_bytes, HTML_MAX_BYTES)
    settings: dict[str, Any] = {
        "BOT_NAME": "gpuatlas",
        "TWISTED_REACTOR": ASYNCIO_REACTOR,
        # no remote consoles into a crawler: telnet, and the HTTP remote control of 2.19
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        # politeness
        "ROBOTSTXT_OBEY": True,
        "ROBOTSTXT_USER_AGENT": (user_agent.split("/", 1)[0].split() or ["gpuatlas"])[0],
        "USER_AGENT": user_agent,
        "COOKIES_ENABLED": False,
        "CONCURRENT_REQUESTS": 4,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 0.0 if local else DOWNLOAD_DELAY,
        "DOWNLOAD_DELAY_JITTER": 0.5,
        "AUTOTHROTTLE_ENABLED": True,
        "AUTOTHROTTLE_START_DELAY": 0.0 if local else AUTOTHROTTLE_START_DELAY,
        "AUTOTHROTTLE_MAX_DELAY": AUTOTHROTTLE_MAX_DELAY,
        "AUTOTHROTTLE_TARGET_CONCURRENCY": 1.0,
        # robustness: Scrapy's own retry middleware
        "RETRY_ENABLED": True,
        "RETRY_TIMES": max_retries,
        "RETRY_HTTP_CODES": RETRY_HTTP_CODES,
        "DOWNLOAD_TIMEOUT": timeout,
        "DOWNLOAD_MAXSIZE": max_size,
        "DOWNLOAD_WARNSIZE": min(HTML_WARN_BYTES, max_size),
        "REDIRECT_MAX_TIMES": REDIRECT_MAX_TIMES,
        "CLOSESPIDER_PAGECOUNT": max_pages,
        "DEFAULT_REQUEST_HEADERS": {
            "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8",
            "Accept-Language": "en",
        },
        "ITEM_PIPELINES": ITEM_PIPELINES,
        # logging: the child's log tail reaches the crawl run
        "LOG_LEVEL": log_level,
        "LOG_FILE": str(log_file) if log_file else None,
        "LOG_FILE_APPEND": False,
        "LOG_INSTALL_ROOT_HANDLER": True,
        "STATS_DUMP": True,
    }
    if http_cache_dir is not None:  # development only: replay pages instead of refetching
        settings.update(
            {
                "HTTPCACHE_ENABLED": True,
                "HTTPCACHE_DIR": str(http_cache_dir),
                "HTTPCACHE_EXPIRATION_SECS": HTTPCACHE_EXPIRATION_SECS,
                "HTTPCACHE_IGNORE_HTTP_CODES": [*RETRY_HTTP_CODES, 403, 404],
            }
        )
    if overrides:
        settings.update(overrides)
    return settings
