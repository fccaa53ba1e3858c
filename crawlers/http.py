"""The httpx fetch loop every API source shares: retries, backoff, caps, provenance.

It runs a source's ``start``/``parse`` generators: requests are fetched (with retries on
429/5xx honouring ``Retry-After``, exponential backoff with jitter, and caps on pages and
bytes); responses are handed to ``parse``; records are collected with every raw payload
for provenance. Every failure ends as a :class:`SourceError` with a short reason.
"""

from __future__ import annotations

import email.utils
import random
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from crawlers.base import (
    ApiSource,
    Context,
    LayoutChanged,
    RawRecord,
    Request,
    Response,
    SourceError,
)
from schema.text import ascii_digits

RETRYABLE_STATUS = {429, 500, 502, 503, 504}
KEEP_RECORDS = 20_000
"""The raw records a network crawl keeps as it parses its responses (about 1 KB each):
a larger crawl keeps none and parses its payloads again when its records are read
(:func:`reparse`)."""
PAYLOAD_KEY = "_payload"
"""Set on each raw record: the index of the payload it was parsed from (provenance)."""


@dataclass(frozen=True)
class FetchPolicy:
    user_agent: str = "gpuatlas/0.1 (+https://github.com/gpuatlas/gpuatlas)"
    timeout: float = 30.0
    max_retries: int = 4
    backoff_base: float = 0.5
    max_backoff: float = 60.0
    max_pages: int = 2000
    max_bytes: int = 2 * 1024**3
    sleep: Callable[[float], None] = time.sleep


@dataclass
class FetchedPayload:
    url: str
    fetched_at: datetime
    status_code: int
    content_type: str | None
    body: bytes | None = None
    path: Path | None = None
    """A response spooled to a temporary file (deleted with the crawl: :func:`discard_spooled`)."""
    request: Request | None = None
    """The request answered (what :func:`reparse` hands ``parse`` again: its ``meta``)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    file: Path | None = None
    """A saved response (``--from-file``), read afresh each time it is parsed; never deleted."""


@dataclass
class CrawlOutput:
    records: list[RawRecord] = field(default_factory=list)
    """The raw records parsed while fetching, when kept (see :func:`drive`)."""
    payloads: list[FetchedPayload] = field(default_factory=list)
    source_urls: list[str] = field(default_factory=list)
    pages: int = 0
    retries: int = 0
    complete: bool = True
    notes: dict[str, Any] = field(default_factory=dict)
    """What the source left out on purpose and why (stored in the crawl run's log)."""
    parsed: int = 0
    """Raw records parsed while fetching (kept in :attr:`records` or not)."""
    reread: Callable[[], Iterator[RawRecord]] | None = None
    """The crawl's raw records read again from its payloads (:func:`reparse`), when they
    were not kept in :attr:`records`."""
    deferred: int = 0
    """Payloads left unparsed while fetching (they lead to no request): the crawl's records
    are read from its payloads, none kept."""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if ascii_digits(value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class Fetcher:
    """Fetch one request with retries; enforce the byte budget across the crawl."""

    def __init__(self, client: httpx.Client, policy: FetchPolicy, spool_dir: Path | None = None):
        self.client = client
        self.policy = policy
        self.bytes_read = 0
        self.retries = 0
        self.spool_dir = spool_dir

    def fetch(
        self,
        request: Request,
        headers: dict[str, str],
        prepare: Callable[[Request], Request] | None = None,
    ) -> Response:
        """``prepare`` turns the request into the one sent, at each attempt (signing)."""
        policy = self.policy
        last_problem = "network error"
        for attempt in range(policy.max_retries + 1):
            wait: float | None = None
            try:
                response = self._send(prepare(request) if prepare else request, headers)
            except httpx.TimeoutException as exc:
                last_problem = f"timeout: {type(exc).__name__}"
            except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                last_problem = f"truncated body: {exc}"
            except httpx.TransportError as exc:
                last_problem = f"network error: {exc}"
            else:
                if response.status not in RETRYABLE_STATUS:
                    return self._check(response)
                last_problem = (
                    "rate limited: HTTP 429"
                    if response.status == 429
                    else f"server error: HTTP {response.status}"
                )
                wait = _retry_after(response.headers.get("retry-after"))
                if wait is not None and wait > policy.max_backoff:
                    raise SourceError("rate limited", f"Retry-After {wait:.0f}s exceeds budget")
            if attempt == policy.max_retries:
                break
            if wait is None:
                wait = min(policy.max_backoff, policy.backoff_base * 2**attempt)
                wait *= 0.5 + random.random() / 2  # noqa: S311 (jitter, not crypto)
            self.retries += 1
            policy.sleep(wait)
        reason, _, detail = last_problem.partition(": ")
        raise SourceError(reason, f"{detail} (after {policy.max_retries} retries) {request.url}")

    def _send(self, request: Request, headers: dict[str, str]) -> Response:
        with self.client.stream(
            request.method,
            request.url,
            params=dict(request.params) if request.params else None,
            json=request.json,
            content=request.content,
            headers={**headers, **(request.headers or {})},
        ) as raw:
            fetched_at = datetime.now(UTC)
            if request.stream_to_file and raw.status_code == 200:
                path = self._spool(raw)
                return Response(
                    str(raw.url), raw.status_code, b"", dict(raw.headers), request, fetched_at, path
                )
            chunks = []
            for chunk in raw.iter_bytes():
                self._count(len(chunk))
                chunks.append(chunk)
            return Response(
                str(raw.url),
                raw.status_code,
                b"".join(chunks),
                dict(raw.headers),
                request,
                fetched_at,
            )

    def _spool(self, raw: httpx.Response) -> Path:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below, kept on disk)
            prefix="gpuatlas-", suffix=".payload", dir=self.spool_dir, delete=False
        )
        try:
            with handle:
                for chunk in raw.iter_bytes(1 << 20):
                    self._count(len(chunk))
                    handle.write(chunk)
        except BaseException:  # too large, a dropped connection...: no file left behind
            Path(handle.name).unlink(missing_ok=True)
            raise
        return Path(handle.name)

    def _count(self, size: int) -> None:
        self.bytes_read += size
        if self.bytes_read > self.policy.max_bytes:
            raise SourceError("too large", f"more than {self.policy.max_bytes} bytes fetched")

    @staticmethod
    def _check(response: Response) -> Response:
        if response.status in (401, 403):
            raise SourceError("unauthorized", f"HTTP {response.status} from {response.url}")
        if response.status == 404:
            raise SourceError("not found", f"HTTP 404 from {response.url}")
        if response.status >= 400:
            raise SourceError("http error", f"HTTP {response.status} from {response.url}")
        return response


def drive(
    source: ApiSource,
    ctx: Context,
    first: Iterable[Request],
    fetch: Callable[[Request], Response],
    *,
    max_pages: int,
    on_page: Callable[[int, int], None] | None = None,
    keep_records: int | None = None,
) -> CrawlOutput:
    """Breadth-first over requests: fetch each, parse it, queue what parse asks for.

    The records parsed are kept in ``output.records``, at most ``keep_records`` of them
    (None: all): past that many none is kept, only counted (``output.parsed``), and the
    crawl's payloads are parsed again when its records are read (:func:`reparse`), so a
    large crawl is never held as records. A response whose parse asks for nothing more
    (``source.leads_nowhere``, e.g. a peer catalog) is left for that reading, unless every
    record is kept: then none is kept (``output.deferred``). A crawl that fails part-way
    deletes the responses it spooled to disk (a multi-GB AWS offer file each) before the
    error goes on: nothing would ever read them."""
    output = CrawlOutput()
    try:
        return _drive(source, ctx, first, fetch, max_pages, on_page, output, keep_records)
    except BaseException:
        discard_spooled(output)
        raise


def discard_spooled(output: CrawlOutput) -> None:
    """Delete the files of ``output``'s spooled responses."""
    for payload in output.payloads:
        if payload.path is not None:
            payload.path.unlink(missing_ok=True)


def _drive(
    source: ApiSource,
    ctx: Context,
    first: Iterable[Request],
    fetch: Callable[[Request], Response],
    max_pages: int,
    on_page: Callable[[int, int], None] | None,
    output: CrawlOutput,
    keep_records: int | None,
) -> CrawlOutput:
    queue: list[Request] = list(first)
    seen_urls: set[tuple[str, str, str]] = set()
    while queue:
        request = queue.pop(0)
        identity = (
            request.method,
            request.url,
            repr(
                (
                    sorted((request.params or {}).items()),
                    request.json,
                    request.content,
                    sorted((request.headers or {}).items()),  # e.g. a region named in a header
                )
            ),
        )
        if identity in seen_urls:
            raise SourceError("paging loop", f"{request.url} requested twice")
        seen_urls.add(identity)
        if output.pages >= max_pages:
            raise SourceError("too many pages", f"more than {max_pages} pages")
        response = fetch(request)
        output.pages += 1
        output.source_urls.append(response.url)
        output.payloads.append(
            FetchedPayload(
                response.url,
                response.fetched_at,
                response.status,
                response.headers.get("content-type"),
                response.body or None,
                response.path,
                response.request,
                response.headers,
            )
        )
        payload_index = len(output.payloads) - 1
        if keep_records is not None and source.leads_nowhere(response):
            output.deferred += 1  # parsed when the records are read, not twice
            output.records.clear()
            if on_page:
                on_page(output.pages, output.parsed)
            continue
        for item in parse_guarded(source, response, ctx):
            if isinstance(item, Request):
                queue.append(item)
                continue
            output.parsed += 1
            if keep_records is None or (output.parsed <= keep_records and not output.deferred):
                item[PAYLOAD_KEY] = payload_index
                output.records.append(item)
            elif output.records:
                output.records.clear()  # too many: they are read again from the payloads
        if on_page:
            on_page(output.pages, output.parsed)
    return output


def parse_guarded(source: ApiSource, response: Response, ctx: Context) -> Iterator[Any]:
    """Run ``parse``, turning structural surprises into a clear 'layout changed' error."""
    try:
        yield from source.parse(response, ctx)
    except SourceError:
        raise
    except (ValueError, SyntaxError, UnicodeDecodeError) as exc:
        # orjson/json decoding errors are ValueErrors; ElementTree's ParseError a SyntaxError
        raise SourceError("invalid payload", f"{type(exc).__name__}: {exc}"[:300]) from None
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise LayoutChanged(f"{type(exc).__name__}: {exc}"[:300]) from None


def run_api_source(
    source: ApiSource,
    ctx: Context,
    policy: FetchPolicy,
    *,
    transport: httpx.BaseTransport | None = None,
    on_page: Callable[[int, int], None] | None = None,
    keep_records: int | None = None,
) -> CrawlOutput:
    headers = {"User-Agent": policy.user_agent, "Accept-Encoding": "gzip, deflate"}
    headers.update(source.headers(ctx))
    with httpx.Client(
        timeout=httpx.Timeout(policy.timeout),
        follow_redirects=True,
        max_redirects=5,
        transport=transport,
    ) as client:
        fetcher = Fetcher(client, policy)

        def fetch(request: Request) -> Response:
            try:
                return fetcher.fetch(request, headers, lambda r: source.sign(r, ctx))
            except httpx.TooManyRedirects as exc:
                raise SourceError("redirect loop", str(exc)) from None

        output = drive(
            source,
            ctx,
            source.start(ctx),
            fetch,
            max_pages=policy.max_pages,
            on_page=on_page,
            keep_records=keep_records,
        )
        output.retries = fetcher.retries
    return output


def run_from_files(
    source: ApiSource, ctx: Context, paths: list[Path], *, parse: bool = True
) -> CrawlOutput:
    """Parse saved responses offline: each file is one response; follow-ups are ignored.

    Without ``parse`` nothing is read but the files' names: each is a payload read afresh
    when the crawl's records are read (:func:`reparse`)."""
    output = CrawlOutput()
    for path in paths:
        url = path.resolve().as_uri()
        fetched_at = datetime.now(UTC)
        output.pages += 1
        output.source_urls.append(url)
        if not parse:
            output.payloads.append(FetchedPayload(url, fetched_at, 200, None, file=path))
            continue
        body = path.read_bytes()
        response = Response(url, 200, body, {}, None, fetched_at)
        output.payloads.append(FetchedPayload(url, fetched_at, 200, None, body))
        payload_index = len(output.payloads) - 1
        with naming(path):
            for item in parse_guarded(source, response, ctx):
                if not isinstance(item, Request):
                    output.parsed += 1
                    item[PAYLOAD_KEY] = payload_index
                    output.records.append(item)
    return output


@contextmanager
def naming(path: Path | None) -> Iterator[None]:
    """A saved response's parse error names its file (a crawl may be given several)."""
    try:
        yield
    except SourceError as exc:
        if path is not None:
            exc.detail = f"{path}: {exc.detail}" if exc.detail else str(path)
            exc.args = (f"{exc.reason}: {exc.detail}",)
        raise


def reparse(
    source: ApiSource, ctx: Context, output: CrawlOutput, *, restart: bool
) -> Iterator[RawRecord]:
    """The raw records of ``output``'s payloads, parsed again by ``source`` (a fresh
    instance), each tagged with its payload's index (:data:`PAYLOAD_KEY`); the requests
    ``parse`` yields are dropped (they were fetched). Parsing is deterministic: the same
    payloads, in fetch order, through the same ``ctx`` give the same records, so a crawl's
    records can be read as often as they are needed without being held. With ``restart``
    the source's ``start`` runs first, as a network crawl ran it (a source may note there
    what it asked for). At the end, ``output.notes`` are the source's own counts."""
    if restart:
        for _ in source.start(ctx):
            pass
    for index, payload in enumerate(output.payloads):
        body, path = payload.body or b"", payload.path
        if payload.file is not None:
            if source.reads_path:
                path = payload.file
            else:
                body = payload.file.read_bytes()
        response = Response(
            payload.url,
            payload.status_code,
            body,
            payload.headers,
            payload.request,
            payload.fetched_at,
            path,
        )
        with naming(payload.file):
            for item in parse_guarded(source, response, ctx):
                if not isinstance(item, Request):
                    item[PAYLOAD_KEY] = index
                    yield item
        del response, body
    output.notes.update(source_notes(source))


def source_notes(source: object) -> dict[str, Any]:
    """What a source left out on purpose, counted (its ``skipped`` and ``stats``)."""
    notes = {}
    for counter in ("skipped", "stats"):
        counts = getattr(source, counter, None)
        if counts:
            notes[counter] = dict(counts)
    return notes


def json_body(response: Response) -> Any:
    """Decode a JSON payload (orjson); a decode error becomes 'invalid payload'."""
    import orjson

    if response.path is not None:
        return orjson.loads(response.path.read_bytes())
    return orjson.loads(response.body)


def require(mapping: Any, *keys: str) -> Any:
    """``mapping[k1][k2]…`` or a clear 'layout changed' naming the missing key."""
    value = mapping
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise LayoutChanged(f"missing field {'.'.join(keys)!r}")
        value = value[key]
    return value
