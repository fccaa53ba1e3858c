"""What the source contract suite needs to know per source, as data, and its mechanics.

Each source is replayed from its fixture folder through the real local HTTP server
(:mod:`tests.support.replay`). Where the requests go follows from the source itself: a spider's
``start_paths`` (one page each, in ``seed_files`` order, plus robots.txt), a SkyPilot
peer's ``catalog_path()``, a gpuhunt peer's version file and zipped catalog. The API
clients' request targets, and for every source one field to rename (``layout changed``)
and one well-formed answer without offers (``empty``), are declared in :data:`WIRES`.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from crawlers.platforms.gpuhunt import CHANNEL, GpuhuntCatalog
from crawlers.platforms.skypilot import SkyPilotCatalog
from crawlers.providers.alibaba import AlibabaEcs
from crawlers.providers.aws import INDEX_PATH
from crawlers.providers.aws_china import CHINA_INDEX_PATH
from crawlers.providers.azure import SERIES, first_page_url
from crawlers.providers.cudo import machine_types_url
from crawlers.providers.gcp import skus_url
from crawlers.providers.huawei import PATH as HUAWEI_PATH
from crawlers.providers.huawei import HuaweiEcs
from crawlers.providers.tencent import TencentCvm
from crawlers.providers.vultr import plans_url
from crawlers.registry import all_sources
from schema.fx import FxRate
from schema.prices import CatalogVersion, Offer, PriceObservation
from service.core.config import Settings
from service.crawl.run import crawl_source
from service.crawl.seed import seed_files
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBSERVATION = PriceObservation.__table__  # type: ignore[attr-defined]
VERSION = CatalogVersion.__table__  # type: ignore[attr-defined]
FX = FxRate.__table__  # type: ignore[attr-defined]
RETRIES = 1
GARBAGE = b"\x00\x9f<<garbage>> \xff{not: a payload"
EMPTY_PAGE = b"<html><head><title>Pricing</title></head><body><p>Soon.</p></body></html>"
SKYPILOT_HEADER = b"InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region\n"
GPUHUNT_HEADER = b"instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot\n"


@dataclass(frozen=True)
class Wire:
    """One source's replay knowledge: no code, only data."""

    rename: tuple[tuple[str, str], ...]
    """(old, new) text replaced in every fixture file: a renamed field or hook."""
    routes: tuple[tuple[str, str], ...] = ()
    """API clients: (request target, fixture file) in fetch order (a target may repeat:
    its replies are served in turn)."""
    empty: bytes | None = None
    """A well-formed answer with no offers; None: the platform's or the page default (a
    page without the hook: a page with it but no rows goes through another check)."""
    empty_reason: str | None = None
    """Why the empty answer fails, where not the default: ``empty result`` (a page without
    price rows: ``layout changed``). AWS: an offer file without products is a new layout."""
    indexes: int = 0
    """Leading routes that list what to fetch rather than prices (kept in the empty case)."""


def _azure_routes() -> tuple[tuple[str, str], ...]:
    skip = {"NC": 2, "ND": 1, "NG": 1, "NV": 3}  # pages per series, fixtures/azure/README.md
    first = [(first_page_url("", s), f"{s.lower()}-page-1.json") for s in SERIES]
    more = [
        (f"{first_page_url('', s)}&$skip={1000 * n}", f"{s.lower()}-page-{n + 1}.json")
        for s in SERIES
        for n in range(1, skip[s])
    ]
    return (*first, *more)


_GCP_TOKENS = (  # each page's nextPageToken in fixtures/gcp/
    "",
    "APKCS1Hq3xZ_2mLr8sT-Qb0Vn5KfG1wYc7DpAo4eUj6hRt9Ni==",
    "APKCS1GmT8vB_ky2Zx5Jw-3Lr0HuQp7Nc4DfEa1SiVo6Yb9Mt==",
)
_AWS_OFFERS = "/offers/v1.0/aws/AmazonEC2/20251101000000/{}/index.json"

WIRES: dict[str, Wire] = {
    "aws": Wire(
        routes=(
            (INDEX_PATH, "region_index.json"),
            *((_AWS_OFFERS.format(r), f"{r}-index.json") for r in ("us-east-1", "eu-central-1")),
            (_AWS_OFFERS.format("ap-northeast-1"), "ap-northeast-1-index.json"),
        ),
        rename=(('"attributes"', '"attrs"'),),
        empty=b'{"formatVersion": "v1.0", "products": {}, "terms": {"OnDemand": {}}}',
        empty_reason="layout changed",
        indexes=1,
    ),
    "aws-china": Wire(
        routes=(
            (CHINA_INDEX_PATH, "region_index.json"),
            *(
                (f"/offers/v1.0/cn/AmazonEC2/20251101000000/{r}/index.json", f"{r}-index.json")
                for r in ("cn-north-1", "cn-northwest-1")
            ),
        ),
        rename=(('"attributes"', '"attrs"'),),
        empty=b'{"formatVersion": "v1.0", "products": {}, "terms": {"OnDemand": {}}}',
        empty_reason="layout changed",
        indexes=1,
    ),
    # signed RPC calls, all to "/": the answers in fetch order (the seed's order)
    "alibaba": Wire(
        routes=tuple(("/", f) for f in AlibabaEcs.seed_fixtures),
        rename=(('"GPUAmount"', '"GPUCount"'),),
        empty=b'{"RequestId": "E", "NextToken": "", "InstanceTypes": {"InstanceType": []}}',
    ),
    "tencent": Wire(
        routes=tuple(("/", f) for f in TencentCvm.seed_fixtures),
        rename=(('"InstanceTypeQuotaSet"', '"InstanceTypeSet"'),),
        empty=b'{"Response": {"InstanceTypeQuotaSet": [], "RequestId": "E"}}',
    ),
    # signed POSTs of the price API, one a region, all to one path: answers in fetch order
    "huawei": Wire(
        routes=tuple((HUAWEI_PATH, f) for f in HuaweiEcs.seed_fixtures),
        rename=(('"product_rating_results"', '"rating_results"'),),
        empty=b'{"amount": 0, "official_website_amount": 0, "measure_id": 1, "currency": "CNY", '
        b'"product_rating_results": []}',
    ),
    "azure": Wire(
        routes=_azure_routes(),
        rename=(('"retailPrice"', '"price"'),),
        empty=b'{"Items": [], "NextPageLink": null, "Count": 0}',
    ),
    "gcp": Wire(
        routes=(
            *(
                (skus_url("", token), f"skus-page-{n}.json")
                for n, token in enumerate(_GCP_TOKENS, 1)
            ),
        ),
        rename=(('"nanos"', '"nano"'),),
        empty=b'{"skus": [], "nextPageToken": ""}',
    ),
    "oracle": Wire(
        routes=(("/pls/apex/cetools/api/v1/products/?currencyCode=USD", "products-USD.json"),),
        rename=(('"metricName"', '"metric"'),),
        empty=b'{"lastUpdated": "2026-11-14", "items": []}',
    ),
    "ovhcloud": Wire(
        routes=(
            ("/1.0/order/catalog/public/cloud?ovhSubsidiary=FR", "catalog-public-cloud-FR.json"),
        ),
        rename=(('"number"', '"quantity"'),),
        empty=b'{"catalogId": 1, "locale": {"currencyCode": "EUR"}, "addons": [], "plans": []}',
        empty_reason="layout changed",
    ),
    "runpod": Wire(
        routes=(("/graphql", "gpu-catalog.json"),),
        rename=(('"securePrice"', '"secureCloudPrice"'),),
        empty=b'{"data": {"gpuTypes": [], "dataCenters": []}}',
    ),
    "vastai": Wire(
        routes=(
            ("/api/v0/bundles/", "bundles-page-1.json"),
            ("/api/v0/bundles/", "bundles-page-2.json"),
        ),
        rename=(('"gpu_name"', '"gpu_model"'),),
        empty=b'{"offers": []}',
    ),
    "lambda": Wire(
        routes=(("/api/v1/instance-types", "instance-types.json"),),
        rename=(('"price_cents_per_hour"', '"price"'),),
        empty=b'{"data": {}}',
    ),
    "vultr": Wire(
        routes=(
            (plans_url(""), "plans-page-1.json"),
            (plans_url("", "bmV4dF9fdmNnLWExMDAtNmMtNjBnLTQwdnJhbQ=="), "plans-page-2.json"),
        ),
        rename=(('"hourly_cost"', '"price_hourly"'),),
        empty=b'{"plans": [], "meta": {"total": 0, "links": {"next": "", "prev": ""}}}',
    ),
    "runpod-serverless": Wire(
        routes=(("/serverless/pricing.md", "pricing.md"),),
        rename=(("GPU type(s)", "Accelerator(s)"),),
        empty=b"| **GPU type(s)** | **Memory** | **Flex cost per second** |\n| --- | --- | --- |\n",
    ),
    "tensordock": Wire(
        routes=(("/api/v0/client/deploy/hostnodes", "hostnodes.json"),),
        rename=(('"specs"', '"spec"'),),
        empty=b'{"success": true, "hostnodes": {}}',
    ),
    "cudo": Wire(
        routes=tuple((machine_types_url("", n), f"machine-types-page-{n}.json") for n in (1, 2, 3)),
        rename=(('"priceHr"', '"price"'),),
        empty=b'{"pageNumber": 1, "pageSize": 10, "totalCount": 0, "machineTypes": []}',
    ),
    "ecb": Wire(
        routes=(("/stats/eurofxref/eurofxref-hist-90d.xml", "eurofxref-hist-90d.xml"),),
        rename=(("rate=", "value="),),
        empty=b"<gesmes:Envelope xmlns:gesmes='http://www.gesmes.org/xml/2002-08-01'/>",
        empty_reason="layout changed",
    ),
    # pricing pages: the hook each spider finds its prices by
    "lambda-web": Wire(rename=(("data-plan", "data-sku"),)),
    "nebius-web": Wire(
        rename=(("pc-highlight-table-block", "pc-table"),),
        empty=b"<html><body><div class='pc-highlight-table-block__table'></div></body>",
    ),
    "digitalocean-web": Wire(rename=(("Price</p>", "Cost</p>"),)),
    "paperspace-web": Wire(rename=(("instance-names", "instance-titles"),)),
    "coreweave-web": Wire(rename=(("gpu-pricing", "gpu-prices"),)),
    "hyperstack-web": Wire(rename=(("page-price_card", "pricing-card"),)),
    "scaleway-web": Wire(rename=(("ComponentPricingOffer", "Offer"), ("<th", "<td"))),
    "datacrunch-web": Wire(rename=(("GPU model", "Accelerator"),)),
    "gcore-web": Wire(rename=(('"component":"gpu-pricing"', '"component":"prices"'),)),
    "genesiscloud-web": Wire(rename=(("per GPU/hour", "per hour"),)),
    "crusoe-web": Wire(rename=(("prixing-item", "pricing-item"),)),
    "voltagepark-web": Wire(rename=(("pricing11_plan", "pricing12_plan"),)),
    "ovhcloud-web": Wire(rename=(("<th>Prix</th>", "<th>Tarif</th>"), ("data-server", "data-x"))),
}
PLATFORM_WIRES: dict[type, Wire] = {
    SkyPilotCatalog: Wire(
        # Price is the last column in some clouds' files (JarvisLabs)
        rename=((",Price,", ",PricePerHour,"), (",Price\n", ",PricePerHour\n")),
        empty=SKYPILOT_HEADER,
    ),
    GpuhuntCatalog: Wire(rename=((",price,", ",usd,"),), empty=GPUHUNT_HEADER, indexes=1),
}


def is_spider(cls: type) -> bool:
    return bool(getattr(cls, "is_gpuatlas_spider", False))


def wire(name: str) -> Wire:
    if name in WIRES:
        return WIRES[name]
    cls = all_sources()[name]
    return next(w for base, w in PLATFORM_WIRES.items() if issubclass(cls, base))


def fixture_dir(cls: type) -> Path:
    return FIXTURES / (getattr(cls, "fixtures", None) or cls.name)  # type: ignore[attr-defined]


@dataclass
class Replay:
    """A source's answers: request target -> the bodies served in turn."""

    name: str
    routes: dict[str, list[bytes]]
    content_type: dict[str, str]
    data: str
    """The target whose answer the failure cases replace (the first payload with prices)."""
    payloads: list[str]
    """Every target that answers with prices."""
    files: list[Path]

    def serve(self, server: ReplayServer, faults: dict[str, list[Reply]] | None = None) -> None:
        server.routes.clear()
        server.hits.clear()
        server.requests.clear()
        for target, bodies in self.routes.items():
            kind = self.content_type[target]
            replies = [Reply(body, content_type=kind) for body in bodies]
            server.route(target, *(faults or {}).get(target, replies))

    def reply(self, body: bytes, **kwargs: Any) -> Reply:
        return Reply(body, content_type=self.content_type[self.data], **kwargs)


def zipped(member: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo(member, date_time=(2025, 11, 28, 1, 0, 0)), data)
    return buffer.getvalue()


def _kind(path: Path) -> str:
    return Reply.file(path).content_type


def replay(name: str, edit: tuple[tuple[str, str], ...] = ()) -> Replay:
    """``name``'s fixtures as the server answers them, with ``edit`` applied to each file."""
    cls: Any = all_sources()[name]
    folder = fixture_dir(cls)
    files = seed_files(cls)

    def body(path: Path) -> bytes:
        data = path.read_bytes()
        for old, new in edit:
            data = data.replace(old.encode(), new.encode())
        return data

    routes: dict[str, list[bytes]] = {}
    kinds: dict[str, str] = {}

    def add(target: str, data: bytes, kind: str) -> None:
        routes.setdefault(target, []).append(data)
        kinds[target] = kind

    if is_spider(cls):
        add("/robots.txt", (folder / "robots.txt").read_bytes(), "text/plain")
        for path, page in zip(cls.start_paths, files, strict=True):
            add(path, body(page), "text/html; charset=utf-8")
        data = cls.start_paths[0]
    elif issubclass(cls, SkyPilotCatalog):
        data = cls.catalog_path()
        add(data, body(files[0]), "text/csv")
    elif issubclass(cls, GpuhuntCatalog):
        version = (folder / "version").read_text().strip()
        add(f"/{CHANNEL}/{cls.peer}/version", f"{version}\n".encode(), "text/plain")
        data = f"/{CHANNEL}/{cls.peer}/{version}/catalog.zip"
        add(data, zipped(f"{cls.peer}.csv", body(files[0])), "application/zip")
    else:
        for target, file in wire(name).routes:
            add(target, body(folder / file), _kind(folder / file))
        data = wire(name).routes[wire(name).indexes][0]
    payloads = [t for t in routes if t != "/robots.txt"][wire(name).indexes :]
    return Replay(name, routes, kinds, data, payloads, files)


def empty_answer(name: str) -> bytes:
    cls: Any = all_sources()[name]
    chosen = wire(name).empty
    if chosen is not None and issubclass(cls, GpuhuntCatalog):
        return zipped(f"{cls.peer}.csv", chosen)
    return EMPTY_PAGE if chosen is None else chosen


def catalog_state(engine: Engine, name: str) -> tuple[dict[int, dict[str, Any]], int, Any, int]:
    """What a failed crawl must leave as it was: the source's offers (every column), its
    price observations, the current catalog version, and the FX rates stored."""
    with engine.connect() as conn:
        offers = conn.execute(select(OFFER).where(OFFER.c.source == name)).mappings().all()
        ids = [row["id"] for row in offers]
        observations = conn.execute(
            select(func.count()).select_from(OBSERVATION).where(OBSERVATION.c.offer_id.in_(ids))
        ).scalar_one()
        version = conn.execute(select(func.max(VERSION.c.id))).scalar()
        rates = conn.execute(select(func.count()).select_from(FX)).scalar_one()
    return {r["id"]: dict(r) for r in offers}, observations, version, rates


def configure(settings: Settings, server: ReplayServer, name: str, **extra: Any) -> Settings:
    credential = getattr(all_sources()[name], "credential", None)
    key_id = getattr(all_sources()[name], "credential_id", None)
    options = getattr(all_sources()[name], "credential_options", ())
    update: dict[str, Any] = {
        "source_base_urls": {name: server.url},
        "http_max_retries": RETRIES,
        "http_backoff_seconds": 0.01,
        "http_timeout_seconds": 10.0,
        "crawl_timeout_seconds": 60.0,
        **({credential: "test-key"} if credential else {}),
        **({key_id: "test-key-id"} if key_id else {}),
        **{option: f"test-{option}" for option in options},
        **extra,
    }
    return settings.model_copy(update=update)


def check_bad_answers(
    engine: Engine,
    settings: Settings,
    server: ReplayServer,
    subtests: pytest.Subtests,
    name: str,
    target: str,
    answers: dict[str, tuple[Reply, str]],
) -> None:
    """Each answer (served at ``target``) fails with its label and leaves the catalog."""
    before = catalog_state(engine, name)
    for case, (reply, label) in answers.items():
        with subtests.test(case):
            server.route(target, reply)
            report = crawl_source(engine, configure(settings, server, name), name)
            assert report.label.startswith(label), report.label
            assert catalog_state(engine, name) == before


def offers_by(engine: Engine, name: str, *key: str) -> dict[Any, dict[str, Any]]:
    """The source's stored offers by ``key`` (one column: its value; several: a tuple)."""
    with engine.connect() as conn:
        rows = conn.execute(select(OFFER).where(OFFER.c.source == name)).mappings().all()
    if len(key) == 1:
        return {r[key[0]]: dict(r) for r in rows}
    return {tuple(r[k] for k in key): dict(r) for r in rows}


def versions(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(VERSION)).scalar_one())
