"""What every price source is: where to fetch, how to parse one payload, its schedule.

A source module declares one subclass of :class:`ApiSource` (httpx) or, for HTML pages,
of ``crawlers.scrapy.HtmlSpider`` (Scrapy). Provider metadata is declared once, as class
attributes, and stamped on every record by the pipeline. Sources only fetch and map:
validation and normalization live in :mod:`crawlers.pipeline`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

SourceKind = Literal["api", "html", "peer", "marketplace", "fx"]
SCHEDULE_DEFAULTS: dict[str, str] = {
    "api": "1h",
    "html": "6h",
    "peer": "6h",
    "marketplace": "10m",
    "fx": "1d",
}


class SourceError(Exception):
    """A crawl failed; ``status_reason`` is the short machine-readable reason."""

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class LayoutChanged(SourceError):
    """The payload no longer has the structure the parser knows (renamed field, new page)."""

    def __init__(self, detail: str) -> None:
        super().__init__("layout changed", detail)


@dataclass(frozen=True)
class Request:
    url: str
    method: Literal["GET", "POST"] = "GET"
    params: Mapping[str, str] | None = None
    json: Any = None
    content: bytes | None = None
    """A body sent as these exact bytes (a signed body must be the bytes signed)."""
    headers: Mapping[str, str] | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    stream_to_file: bool = False
    """Spool the body to a temporary file (very large payloads); parse gets ``Response.path``."""


@dataclass
class Response:
    url: str
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    request: Request | None = None
    fetched_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    path: Path | None = None
    """Set instead of ``body`` for streamed payloads."""

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.request.meta if self.request else {}

    def open(self) -> Any:
        """A binary file object over the payload, whether streamed or in memory."""
        if self.path is not None:
            return self.path.open("rb")
        import io

        return io.BytesIO(self.body)


RawRecord = dict[str, Any]


@dataclass
class Context:
    """What a source may know at run time: its base URL and credential (for a key pair,
    ``credential_id`` is the key's ID and ``credential`` its secret)."""

    base_url: str
    credential: str | None = None
    credential_id: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    """The values of the source's ``credential_options`` (Settings field -> value)."""
    now: datetime = field(default_factory=lambda: datetime.now(UTC))


class ApiSource:
    """A price API client: ``start`` yields the first requests, ``parse`` yields records
    (plain dicts of OfferRecord fields) and follow-up requests (pages)."""

    name: ClassVar[str]
    provider: ClassVar[str]
    kind: ClassVar[SourceKind] = "api"
    schedule: ClassVar[str] = "1h"
    parser_version: ClassVar[str] = "1"
    base_url: ClassVar[str]
    currency: ClassVar[str | None] = "USD"
    credential: ClassVar[str | None] = None
    """Name of the Settings field holding the credential (missing → skipped)."""
    credential_id: ClassVar[str | None] = None
    """For a key pair (an ID and a secret that signs requests): the Settings field holding
    the ID, ``credential`` holding the secret; either missing → skipped."""
    credential_options: ClassVar[tuple[str, ...]] = ()
    """Further Settings fields an authenticated request needs besides the key (e.g. an
    account's project ID); any missing → skipped, like the credential."""
    tax_included: ClassVar[bool | None] = None
    """Whether the quoted prices include sales tax/VAT (None: the source does not say)."""
    docs_url: ClassVar[str | None] = None
    terms_url: ClassVar[str | None] = None
    max_bytes: ClassVar[int | None] = None
    """A larger byte budget than the global one, for sources with huge payloads."""
    keep_records: ClassVar[bool] = False
    """Keep every record a network crawl parses, however many, instead of parsing its
    payloads again when they are ingested (``crawlers.http.KEEP_RECORDS``): for payloads
    that cost far more to parse again than their records cost to hold."""
    reads_path: ClassVar[bool] = False
    """``parse`` reads a payload from ``Response.path`` when it is set, opening it rather
    than reading it whole: a saved file (``--from-file``) is handed over as its path."""
    fixtures: ClassVar[str | None] = None
    """Folder under fixtures/ with this source's recorded responses (defaults to name)."""

    def start(self, ctx: Context) -> Iterator[Request]:
        raise NotImplementedError

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        raise NotImplementedError

    def leads_nowhere(self, response: Response) -> bool:
        """Whether ``parse`` of ``response`` yields records only, never a request: a network
        crawl then leaves it unparsed until its records are read (``crawlers.http.drive``),
        instead of parsing it once more while fetching (a large peer catalog)."""
        return False

    def headers(self, ctx: Context) -> dict[str, str]:
        """Extra request headers (e.g. the credential)."""
        return {}

    def sign(self, request: Request, ctx: Context) -> Request:
        """The request as sent, signed anew for each attempt (a signature carries a time
        and a nonce, so a retry is signed again); unsigned sources return it as it is."""
        return request
