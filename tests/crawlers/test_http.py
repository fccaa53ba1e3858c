"""The shared fetch loop, through a real local HTTP server: paging, retries, caps, errors."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawlers.base import ApiSource, Context, Request, Response, SourceError
from crawlers.http import PAYLOAD_KEY, FetchPolicy, json_body, require, run_api_source
from tests.support.replay import ReplayServer, Reply


class Paged(ApiSource):
    """A minimal source: /items?page=N with a `next` page number."""

    name = "paged-test"
    provider = "acme"
    base_url = "http://unused"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(f"{ctx.base_url}/items", params={"page": "1"})

    def parse(self, response: Response, ctx: Context) -> Iterator[dict[str, Any] | Request]:
        body = json_body(response)
        for item in require(body, "items"):
            yield {"sku": item["sku"], "amount": item["price"]}
        if body.get("next"):
            yield Request(f"{ctx.base_url}/items", params={"page": str(body["next"])})


def page(n: int, items: int = 3, last: bool = False) -> bytes:
    return orjson.dumps(
        {
            "items": [{"sku": f"p{n}-{i}", "price": "1.5"} for i in range(items)],
            "next": None if last else n + 1,
        }
    )


def policy(**overrides: Any) -> FetchPolicy:
    sleeps: list[float] = []
    base = {"max_retries": 2, "backoff_base": 0.01, "max_backoff": 2.0, "sleep": sleeps.append}
    return FetchPolicy(**{**base, **overrides})


def crawl(server: ReplayServer, **overrides: Any):  # type: ignore[no-untyped-def]
    return run_api_source(Paged(), Context(base_url=server.url), policy(**overrides))


def test_follows_pages_to_the_end_and_tags_each_record_with_its_payload(
    server: ReplayServer,
) -> None:
    for n in (1, 2, 3):
        server.route(f"/items?page={n}", Reply(page(n, last=n == 3)))
    output = crawl(server)
    assert output.pages == 3 and len(output.records) == 9
    assert [r[PAYLOAD_KEY] for r in output.records] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert len(output.payloads) == 3 and output.payloads[2].body == page(3, last=True)
    agent = server.requests[0][2]["User-Agent"]
    assert agent.startswith("gpuatlas/")


def test_retries_429_honouring_retry_after_then_succeeds(server: ReplayServer) -> None:
    sleeps: list[float] = []
    server.route(
        "/items?page=1", Reply(b"slow down", 429, {"Retry-After": "1"}), Reply(page(1, last=True))
    )
    output = run_api_source(Paged(), Context(base_url=server.url), policy(sleep=sleeps.append))
    assert len(output.records) == 3 and sleeps == [1.0] and output.retries == 1


def test_5xx_storm_beyond_the_budget_fails_with_its_reason(server: ReplayServer) -> None:
    server.route("/items?page=1", Reply(b"oops", 503))
    with pytest.raises(SourceError) as info:
        crawl(server)
    assert info.value.reason == "server error" and "after 2 retries" in str(info.value)
    assert server.hits["/items?page=1"] == 3


def test_retry_after_beyond_the_budget_gives_up_at_once(server: ReplayServer) -> None:
    server.route("/items?page=1", Reply(b"", 429, {"Retry-After": "3600"}))
    with pytest.raises(SourceError, match="rate limited"):
        crawl(server)
    assert server.hits["/items?page=1"] == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(b"no", 401), "unauthorized"),
        (Reply(b"no", 403), "unauthorized"),
        (Reply(b"gone", 404), "not found"),
        (Reply(b"teapot", 418), "http error"),
        (Reply(b"{not json"), "invalid payload"),
        (Reply(orjson.dumps({"renamed": []})), "layout changed"),
        (Reply(page(1, last=True), truncate=True), "truncated body"),
    ],
)
def test_each_failure_has_its_own_reason(server: ReplayServer, reply: Reply, reason: str) -> None:
    server.route("/items?page=1", reply)
    with pytest.raises(SourceError) as info:
        crawl(server)
    assert info.value.reason == reason


def test_timeout_is_retried_then_reported(server: ReplayServer) -> None:
    server.route("/items?page=1", Reply(page(1, last=True), delay=0.5))
    with pytest.raises(SourceError, match="timeout"):
        crawl(server, timeout=0.1, max_retries=1)


def test_page_cap_and_paging_loop(server: ReplayServer) -> None:
    for n in range(1, 6):
        server.route(f"/items?page={n}", Reply(page(n)))
    with pytest.raises(SourceError, match="too many pages"):
        crawl(server, max_pages=3)
    server.route("/items?page=1", Reply(orjson.dumps({"items": [], "next": 1})))
    with pytest.raises(SourceError, match="paging loop"):
        crawl(server)


def test_byte_cap(server: ReplayServer) -> None:
    server.route("/items?page=1", Reply(page(1, items=2000, last=True)))
    with pytest.raises(SourceError, match="too large"):
        crawl(server, max_bytes=10_000)


def test_redirect_loop(server: ReplayServer) -> None:
    server.route("/items?page=1", Reply(b"", 302, {"Location": "/loop"}))
    server.route("/loop", Reply(b"", 302, {"Location": "/items?page=1"}))
    with pytest.raises(SourceError, match="redirect loop"):
        crawl(server)


def test_the_backoff_setting_reaches_the_fetch_policy() -> None:
    from pydantic import ValidationError

    from service.core.config import Settings
    from service.crawl.run import fetch_policy

    assert fetch_policy(Settings(_env_file=None)).backoff_base == 0.5
    assert fetch_policy(Settings(http_backoff_seconds=0.01, _env_file=None)).backoff_base == 0.01
    with pytest.raises(ValidationError, match="http_backoff_seconds"):
        Settings(http_backoff_seconds=-1, _env_file=None)


class Spooled(Paged):
    """Paged, each page spooled to a file as AWS's offer files are."""

    name = "spooled-test"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(f"{ctx.base_url}/items", params={"page": "1"}, stream_to_file=True)

    def parse(self, response: Response, ctx: Context) -> Iterator[dict[str, Any] | Request]:
        for item in super().parse(response, ctx):
            if isinstance(item, Request):
                item = Request(item.url, params=item.params, stream_to_file=True)
            yield item


def spooled_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("gpuatlas-*.payload"))


@pytest.mark.parametrize(
    ("third", "reason"),
    [
        (Reply(b"gone", 404), "not found"),  # a page fails after two were spooled
        (Reply(b"{not json"), "invalid payload"),  # a spooled page that cannot be parsed
        (Reply(page(3, items=4000)), "too large"),  # the byte cap, half-way through a file
    ],
)
def test_a_failed_crawl_leaves_no_spooled_file(
    server: ReplayServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    third: Reply,
    reason: str,
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for n in (1, 2):
        server.route(f"/items?page={n}", Reply(page(n)))
    server.route("/items?page=3", third)
    cap = 40_000 if reason == "too large" else 10**9
    with pytest.raises(SourceError, match=reason):
        run_api_source(Spooled(), Context(base_url=server.url), policy(max_bytes=cap))
    assert spooled_files(tmp_path) == []
    # the same crawl, successful, keeps its files for the ingest (which deletes them)
    server.route("/items?page=3", Reply(page(3, last=True)))
    output = run_api_source(Spooled(), Context(base_url=server.url), policy())
    kept = [p.path for p in output.payloads]
    assert len(output.records) == 9 and all(p is not None and p.exists() for p in kept)
    assert spooled_files(tmp_path) == sorted(p for p in kept if p is not None)
