"""The CNY sources (AWS China, Alibaba Cloud, Tencent Cloud, Huawei Cloud) beyond the contract
suite:
request signing against the providers' documented examples and on the wire, their error
answers, hostile answers, the stored CNY prices, tax flags and weekly prices."""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from sqlalchemy import Engine, select

from crawlers.base import Context
from crawlers.http import run_from_files
from crawlers.providers import alibaba, huawei, tencent
from crawlers.providers.aws_china import AwsChinaPriceList
from schema.prices import Offer, PriceObservation
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.crawl.run import crawl_source
from service.crawl.seed import seed_files
from tests.conftest import FIXTURES
from tests.support.replay import ReplayServer, Reply
from tests.support.source_contract import catalog_state, configure, replay

OFFER = Offer.__table__  # type: ignore[attr-defined]
OBS = PriceObservation.__table__  # type: ignore[attr-defined]

# --------------------------------------------------------------------- signatures

# Alibaba Cloud's worked example of the RPC signature (ECS DescribeRegions, AccessKeySecret
# "testsecret"): https://www.alibabacloud.com/help/doc-detail/28139.htm
ALIBABA_DOC_PARAMS = {
    "AccessKeyId": "testid",
    "Action": "DescribeRegions",
    "Format": "XML",
    "SignatureMethod": "HMAC-SHA1",
    "SignatureNonce": "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf",
    "SignatureVersion": "1.0",
    "Timestamp": "2016-02-23T12:46:24Z",
    "Version": "2014-05-26",
}
ALIBABA_DOC_STRING_TO_SIGN = (
    "GET&%2F&AccessKeyId%3Dtestid%26Action%3DDescribeRegions%26Format%3DXML"
    "%26SignatureMethod%3DHMAC-SHA1%26SignatureNonce%3D3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf"
    "%26SignatureVersion%3D1.0%26Timestamp%3D2016-02-23T12%253A46%253A24Z%26Version%3D2014-05-26"
)


def test_alibaba_rpc_signature_matches_the_documented_example() -> None:
    assert alibaba.string_to_sign("GET", ALIBABA_DOC_PARAMS) == ALIBABA_DOC_STRING_TO_SIGN
    assert alibaba.rpc_signature("GET", ALIBABA_DOC_PARAMS, "testsecret") == (
        "OLeaidS1JvxuMvnyHOwuJ+uX5qY="
    )


def test_alibaba_signed_params_add_the_common_parameters() -> None:
    params = {k: v for k, v in ALIBABA_DOC_PARAMS.items() if k in ("Action", "Format", "Version")}
    signed = alibaba.signed_params(
        params,
        "testid",
        "testsecret",
        now=datetime(2016, 2, 23, 12, 46, 24),
        nonce="3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf",
    )
    assert signed["Signature"] == "OLeaidS1JvxuMvnyHOwuJ+uX5qY="
    assert {k: v for k, v in signed.items() if k != "Signature"} == ALIBABA_DOC_PARAMS


def test_alibaba_percent_encoding_keeps_only_unreserved_characters() -> None:
    assert alibaba.percent_encode("a b*c~d/e+f") == "a%20b%2Ac~d%2Fe%2Bf"
    assert alibaba.percent_encode("北") == "%E5%8C%97"


# Tencent Cloud's worked example of signature v3 (CVM DescribeInstances in ap-guangzhou at
# 1551113065, the example key pair): https://www.tencentcloud.com/document/product/213/30654
TENCENT_DOC_PAYLOAD = (
    b'{"Limit": 1, "Filters": [{"Values": ["\\u672a\\u547d\\u540d"], "Name": "instance-name"}]}'
)
TENCENT_DOC_HEADERS = {
    "content-type": "application/json; charset=utf-8",
    "host": "cvm.tencentcloudapi.com",
}


def test_tencent_tc3_signature_matches_the_documented_example() -> None:
    canonical, signed = tencent.canonical_request(TENCENT_DOC_HEADERS, TENCENT_DOC_PAYLOAD)
    assert signed == "content-type;host"
    assert canonical == (
        "POST\n/\n\ncontent-type:application/json; charset=utf-8\nhost:cvm.tencentcloudapi.com\n"
        "\ncontent-type;host\n"
        "35e9c5b0e3ae67532d3c9f17ead6c90222632e5b1ff7f6e89887f1398934f064"
    )
    authorization = tencent.tc3_authorization(
        "AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE",
        "Gu5t9xGARNpq86cd98joQYCN3EXAMPLE",
        TENCENT_DOC_HEADERS,
        TENCENT_DOC_PAYLOAD,
        1551113065,
    )
    assert authorization == (
        "TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2019-02-25/cvm/"
        "tc3_request, SignedHeaders=content-type;host, "
        "Signature=72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168"
    )


# Huawei Cloud's worked example of AK/SK signing (VPC list, X-Sdk-Date 20191115T033655Z, the
# example key pair): https://support.huaweicloud.com/devg-apisign/api-sign-algorithm-002.html
# and the pages after it (string to sign, signature, Authorization header).
HUAWEI_DOC_URL = (
    "https://service.region.example.com/v1/77b6a44cba5143ab91d13ab9a8ff44fd/vpcs"
    "?limit=2&marker=13551d6b-755d-4757-b956-536f674975c0"
)
HUAWEI_DOC_HEADERS = {
    "Content-Type": "application/json",
    "Host": "service.region.example.com",
    "X-Sdk-Date": "20191115T033655Z",
}


def test_huawei_sdk_signature_matches_the_documented_example() -> None:
    canonical, signed = huawei.canonical_request("GET", HUAWEI_DOC_URL, HUAWEI_DOC_HEADERS, b"")
    assert signed == "content-type;host;x-sdk-date"
    assert canonical.startswith(
        "GET\n/v1/77b6a44cba5143ab91d13ab9a8ff44fd/vpcs/\n"
        "limit=2&marker=13551d6b-755d-4757-b956-536f674975c0\n"
    )
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    assert digest == "b25362e603ee30f4f25e7858e8a7160fd36e803bb2dfe206278659d71a9bcd7a"
    authorization = huawei.sdk_authorization(
        "QTWAOYTTINDUT2QVKYUC",
        "MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc",
        "GET",
        HUAWEI_DOC_URL,
        HUAWEI_DOC_HEADERS,
        b"",
    )
    assert authorization == (
        "SDK-HMAC-SHA256 Access=QTWAOYTTINDUT2QVKYUC, SignedHeaders=content-type;host;x-sdk-date, "
        "Signature=7be6668032f70418fcc22abc52071e57aff61b84a1d2381bb430d6870f4f6ebe"
    )


# --------------------------------------------------------------------- on the wire


def _sqlite(sqlite_url: str) -> Settings:
    return Settings(database_url=sqlite_url, environment="test", _env_file=None)  # type: ignore[call-arg]


def test_alibaba_signs_every_attempt_on_the_wire(
    sqlite_engine: Engine, sqlite_url: str, server: ReplayServer
) -> None:
    answers = replay("alibaba")
    throttled = answers.reply(b"slow down", status=429, headers={"Retry-After": "0"})
    answers.serve(server, {"/": [throttled, *(answers.reply(b) for b in answers.routes["/"])]})
    config = configure(_sqlite(sqlite_url), server, "alibaba")
    assert crawl_source(sqlite_engine, config, "alibaba").label == "ok"
    queries = [dict(parse_qsl(urlsplit(path).query)) for _, path, _, _ in server.requests]
    assert len(queries) == len(answers.routes["/"]) + 1
    for query in queries:
        signature = query.pop("Signature")
        assert query["AccessKeyId"] == "test-key-id"
        assert alibaba.rpc_signature("GET", query, "test-key") == signature
    # the throttled request was sent again, signed anew (another nonce)
    assert queries[0]["Action"] == queries[1]["Action"] == "DescribeInstanceTypes"
    assert queries[0]["SignatureNonce"] != queries[1]["SignatureNonce"]
    assert len({q["SignatureNonce"] for q in queries}) == len(queries)
    prices = [q for q in queries if q["Action"] == "DescribePrice"]
    assert {q["PriceUnit"] for q in prices} == {"Hour", "Week"}
    assert {q["RegionId"] for q in prices} == set(alibaba.REGIONS)


def test_tencent_signs_each_region_on_the_wire(
    sqlite_engine: Engine, sqlite_url: str, server: ReplayServer
) -> None:
    replay("tencent").serve(server)
    config = configure(_sqlite(sqlite_url), server, "tencent")
    assert crawl_source(sqlite_engine, config, "tencent").label == "ok"
    regions = []
    for method, _, headers, body in server.requests:
        got = {k.lower(): v for k, v in headers.items()}
        assert method == "POST" and got["x-tc-action"] == "DescribeZoneInstanceConfigInfos"
        signed = {
            "content-type": got["content-type"],
            "host": got["host"],
            "x-tc-action": got["x-tc-action"].lower(),
        }
        expected = tencent.tc3_authorization(
            "test-key-id", "test-key", signed, body, int(got["x-tc-timestamp"])
        )
        assert got["authorization"] == expected
        filters = {f["Name"]: f["Values"] for f in json.loads(body)["Filters"]}
        assert filters["instance-charge-type"] == ["POSTPAID_BY_HOUR", "SPOTPAID"]
        regions.append(got["x-tc-region"])
    assert regions == list(tencent.REGIONS)


def test_huawei_signs_each_region_on_the_wire(
    sqlite_engine: Engine, sqlite_url: str, server: ReplayServer
) -> None:
    answers = replay("huawei")
    throttled = answers.reply(
        b'{"error_code": "APIGW.0308"}', status=429, headers={"Retry-After": "0"}
    )
    bodies = answers.routes[huawei.PATH]
    answers.serve(server, {huawei.PATH: [throttled, *(answers.reply(b) for b in bodies)]})
    config = configure(_sqlite(sqlite_url), server, "huawei")
    assert crawl_source(sqlite_engine, config, "huawei").label == "ok"
    regions, dates = [], []
    for method, path, headers, body in server.requests:
        got = {k.lower(): v for k, v in headers.items()}
        assert method == "POST" and path == huawei.PATH
        signed = {k: got[k] for k in ("content-type", "host", "x-sdk-date")}
        expected = huawei.sdk_authorization(
            "test-key-id", "test-key", "POST", f"{server.url}{path}", signed, body
        )
        assert got["authorization"] == expected
        asked = json.loads(body)
        assert asked["project_id"] == "test-huawei_project_id"
        products = asked["product_infos"]
        assert 0 < len(products) <= 100
        for product in products:
            region, flavor = product["id"].split("/")
            assert product == huawei.product_infos(region, (flavor,))[0]
            assert product["resource_spec"] == f"{flavor}.linux" and product["region"] == region
        regions.append(products[0]["region"])
        dates.append(got["x-sdk-date"])
    # the throttled request was sent again and signed anew; then one request a region
    assert regions == [huawei.REGIONS[0], *huawei.REGIONS]
    assert all(len(d) == 16 and d.endswith("Z") for d in dates)


def test_huawei_batches_product_infos_by_the_documented_maximum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(huawei, "MAX_PRODUCTS", 3)
    ctx = Context(base_url="http://x", options={"huawei_project_id": "p"})
    requests = list(huawei.HuaweiEcs().start(ctx))
    sizes = [len(json.loads(r.content or b"")["product_infos"]) for r in requests]
    flavors = [len(huawei.REGION_FLAVORS[r]) for r in huawei.REGIONS]
    assert sum(sizes) == sum(flavors) and max(sizes) == 3
    assert len(requests) == sum(-(-n // 3) for n in flavors)


@pytest.mark.parametrize(
    ("status", "body", "label"),
    [
        (401, b'{"error_code": "APIGW.0301", "error_msg": "verify aksk signature fail"}', "failed: unauthorized"),
        (400, b'{"error_code": "CBC.0100", "error_msg": "Invalid parameter."}', "failed: http error"),
        (200, b'{"error_code": "CBC.0999", "error_msg": "Other errors."}', "failed: api error"),
    ],
)  # fmt: skip
def test_huawei_error_answers_fail_clearly(
    engine: Engine, settings: Settings, server: ReplayServer, status: int, body: bytes, label: str
) -> None:
    server.route(huawei.PATH, Reply(body, status=status, content_type="application/json"))
    before = catalog_state(engine, "huawei")
    report = crawl_source(engine, configure(settings, server, "huawei"), "huawei")
    assert report.label.startswith(label), report.label
    assert catalog_state(engine, "huawei") == before


def test_a_missing_huawei_project_id_skips_the_crawl(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    replay("huawei").serve(server)
    config = configure(settings, server, "huawei", huawei_project_id=None)
    report = crawl_source(engine, config, "huawei")
    assert report.label == "skipped: no credential"
    assert server.requests == []


@pytest.mark.parametrize(
    ("code", "label"),
    [
        ("AuthFailure.SignatureFailure", "failed: unauthorized"),
        ("RequestLimitExceeded", "failed: rate limited"),
        ("InvalidParameterValue", "failed: api error"),
    ],
)
def test_tencent_errors_answered_with_http_200_fail_clearly(
    engine: Engine, settings: Settings, server: ReplayServer, code: str, label: str
) -> None:
    error = {"Response": {"Error": {"Code": code, "Message": "m"}, "RequestId": "r"}}
    server.route("/", Reply(json.dumps(error).encode(), content_type="application/json"))
    before = catalog_state(engine, "tencent")
    report = crawl_source(engine, configure(settings, server, "tencent"), "tencent")
    assert report.label.startswith(label), report.label
    assert catalog_state(engine, "tencent") == before


# --------------------------------------------------------------------- hostile answers


def _offline(source: Any, files: list[Path]) -> list[dict[str, Any]]:
    return run_from_files(source, Context(base_url="http://x"), files).records


def _edited(tmp_path: Path, folder: str, name: str, old: str, new: str) -> Path:
    text = (FIXTURES / folder / name).read_text()
    assert old in text, old
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("file", "old", "new", "reason"),
    [
        ("instance-types-page-1.json", '"ecs.gn6v-c8g1.2xlarge"', '"ecs.x\\u202e<script>"', "layout"),
        ("instance-types-page-1.json", '"ecs.gn6v-c8g1.2xlarge"', '"' + "ecs." + "a" * 300 + '"', "layout"),
        ("price-cn-beijing-gn6v-c8g1.2xlarge-hour.json", '"OriginalPrice": 26.46', '"OriginalPrice": true', "layout"),
        ("price-cn-beijing-gn6v-c8g1.2xlarge-hour.json", '"OriginalPrice": 26.46', '"OriginalPrice": "lots"', "layout"),
        ("price-cn-beijing-gn6v-c8g1.2xlarge-hour.json", '"instanceType"', '"instance"', "layout"),
        ("available-cn-beijing.json", '"RegionId": "cn-beijing"', '"RegionId": "../../etc"', "layout"),
        ("price-cn-beijing-gn6v-c8g1.2xlarge-hour.json", '"OriginalPrice": 26.46', '"OriginalPrice": NaN', "invalid"),
    ],
)  # fmt: skip
def test_alibaba_hostile_answers_fail_with_a_reason(
    tmp_path: Path, file: str, old: str, new: str, reason: str
) -> None:
    names = [p.name for p in seed_files(alibaba.AlibabaEcs)]
    files = [
        _edited(tmp_path, "alibaba", n, old, new) if n == file else FIXTURES / "alibaba" / n
        for n in names
    ]
    plain = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, plain, "alibaba", from_files=files, dry_run=True)
    expected = "layout changed" if reason == "layout" else "invalid payload"
    assert report.label == f"failed: {expected}", report.label


def test_alibaba_price_answer_nobody_asked_for_is_refused() -> None:
    price = FIXTURES / "alibaba" / "price-cn-beijing-gn6v-c8g1.2xlarge-hour.json"
    plain = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, plain, "alibaba", from_files=[price], dry_run=True)
    assert report.label == "failed: layout changed"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"id": "cn-north-4/pi2.2xlarge.4"', '"id": "cn-north-4/../../etc"'),
        ('"id": "cn-north-4/pi2.2xlarge.4"', '"id": "cn-north-4/pi2.8xlarge.4"'),
        ('"id": "cn-north-4/pi2.2xlarge.4"', '"id": "cn-east-3/p3.16xlarge.8"'),
        ('"currency": "CNY"', '"currency": "USD"'),
        ('"official_website_amount": 8.46', '"official_website_amount": "8.46"'),
        ('"official_website_amount": 8.46', '"official_website_amount": true'),
        ('"measure_id": 1,\n      "discount_rating_results": []', '"measure_id": 3,\n      "discount_rating_results": []'),
        ('"product_rating_results": [', '"product_rating_results": "none", "x": ['),
    ],
)  # fmt: skip
def test_huawei_hostile_answers_fail_with_a_reason(tmp_path: Path, old: str, new: str) -> None:
    path = _edited(tmp_path, "huawei", "ratings-cn-north-4.json", old, new)
    plain = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, plain, "huawei", from_files=[path], dry_run=True)
    assert report.label == "failed: layout changed", report.label


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"Zone": "ap-beijing-5"', '"Zone": "beijing; DROP TABLE offer"'),
        ('"InstanceType": "GN7.2XLARGE32"', '"InstanceType": "GN7\\u0000X"'),
        ('"ChargeUnit": "HOUR"', '"ChargeUnit": "MONTH"'),
        ('"UnitPrice": 8.73', '"UnitPrice": [8.73]'),
    ],
)
def test_tencent_hostile_answers_fail_with_a_reason(tmp_path: Path, old: str, new: str) -> None:
    path = _edited(tmp_path, "tencent", "zone-instance-config-ap-beijing.json", old, new)
    plain = Settings(environment="test", _env_file=None)  # type: ignore[call-arg]
    report = crawl_source(None, plain, "tencent", from_files=[path], dry_run=True)
    assert report.label == "failed: layout changed", report.label


def test_an_oversized_answer_is_refused(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    replay("tencent").serve(server)
    before = catalog_state(engine, "tencent")
    config = configure(settings, server, "tencent", http_max_bytes=2048)
    report = crawl_source(engine, config, "tencent")
    assert report.label.startswith("failed: too large"), report.label
    assert catalog_state(engine, "tencent") == before


def test_a_missing_key_id_skips_the_crawl(
    engine: Engine, settings: Settings, server: ReplayServer
) -> None:
    replay("alibaba").serve(server)
    config = configure(settings, server, "alibaba", alibaba_access_key_id=None)
    report = crawl_source(engine, config, "alibaba")
    assert report.label == "skipped: no credential"
    assert server.requests == []


# --------------------------------------------------------------------- what is stored


def _seed(engine: Engine, settings: Settings, *names: str) -> None:
    load_reference(engine, REFERENCE_DIR)
    from crawlers.registry import get_source

    for name in ("ecb", *names):
        report = crawl_source(engine, settings, name, from_files=seed_files(get_source(name)))
        assert report.label == "ok", report


def _stored(engine: Engine, source: str) -> dict[tuple[str, str, str], Any]:
    query = select(OFFER, OBS.c.amount_usd, OBS.c.fx_rate, OBS.c.fx_date, OBS.c.hourly_amount)
    query = query.join(OBS, OBS.c.id == OFFER.c.observation_id).where(OFFER.c.source == source)
    with engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    return {(r["sku"], r["region"], r["price_kind"]): r for r in rows}


def _cny_rate(engine: Engine) -> tuple[Decimal, date]:
    from schema.fx import FxRate

    fx = FxRate.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        day = (
            conn.execute(
                select(fx.c.rate_date).where(fx.c.currency == "CNY").order_by(fx.c.rate_date.desc())
            )
            .scalars()
            .first()
        )
        rates = dict(
            conn.execute(select(fx.c.currency, fx.c.per_eur).where(fx.c.rate_date == day)).all()
        )
    return (rates["USD"] / rates["CNY"]).quantize(Decimal("1e-10")), day


def test_cny_prices_are_stored_as_quoted_and_converted_exactly(
    engine: Engine, settings: Settings
) -> None:
    _seed(engine, settings, "alibaba", "tencent", "aws-china", "huawei")
    rate, day = _cny_rate(engine)
    assert rate > 0
    for source in ("alibaba", "tencent", "aws-china", "huawei"):
        rows = _stored(engine, source)
        assert rows, source
        for row in rows.values():
            assert row["currency"] == "CNY"
            assert row["fx_rate"] == rate and row["fx_date"] == day
            assert row["amount_usd"] == (row["amount"] * rate).quantize(Decimal("1e-10"))
            assert row["gpu_slug"] and row["country"] in ("CN", "HK")
    ali = _stored(engine, "alibaba")
    hour = ali[("ecs.gn7i-c8g1.2xlarge", "cn-beijing", "on_demand")]
    assert hour["amount"] == Decimal("11.28") and hour["unit"] == "hour"
    week = ali[("ecs.gn7i-c8g1.2xlarge", "cn-beijing", "weekly")]
    assert week["unit"] == "week" and week["amount"] == Decimal("1042.27")
    assert week["hourly_amount"] == (Decimal("1042.27") / 168).quantize(Decimal("1e-10"))
    assert ali[("ecs.gn7i-c8g1.2xlarge", "cn-hongkong", "on_demand")]["country"] == "HK"
    south = ali[("ecs.gn7i-c8g1.2xlarge", "cn-shenzhen", "on_demand")]["amount"]
    assert south == (Decimal("11.28") * Decimal("1.18")).quantize(Decimal("0.01"))
    ten = _stored(engine, "tencent")
    # a type sold in two zones of a region at two prices: the lower one
    assert ten[("GN7.2XLARGE32", "ap-guangzhou", "on_demand")]["amount"] == Decimal("10.30")
    assert ten[("GN7.2XLARGE32", "ap-beijing", "spot")]["amount"] == Decimal("1.75")
    assert ("GN10Xp.20XLARGE320", "ap-beijing", "spot") not in ten  # sold out
    aws = _stored(engine, "aws-china")
    assert aws[("p3.2xlarge", "cn-north-1", "on_demand")]["amount"] == Decimal("25.552")
    assert {r[1] for r in aws} == {"cn-north-1", "cn-northwest-1"}
    hw = _stored(engine, "huawei")
    assert len(hw) == sum(len(f) for f in huawei.REGION_FLAVORS.values())
    # the list price (official_website_amount), not the account's discounted amount
    assert hw[("p2v.2xlarge.8", "cn-north-4", "on_demand")]["amount"] == Decimal("19.55")
    assert hw[("p3.16xlarge.8", "cn-north-4", "on_demand")]["gpu_count"] == 8
    assert hw[("pi2.2xlarge.4", "ap-southeast-1", "on_demand")]["country"] == "HK"
    assert {r["gpu_slug"] for r in hw.values()} >= {"nvidia-t4-16gb", "nvidia-v100-sxm2-16gb"}


def test_each_price_says_whether_it_includes_tax(engine: Engine, settings: Settings) -> None:
    _seed(engine, settings, "alibaba", "aws-china", "lambda", "huawei")
    with engine.connect() as conn:
        flags = dict(
            conn.execute(
                select(OFFER.c.source, OFFER.c.tax_included).group_by(
                    OFFER.c.source, OFFER.c.tax_included
                )
            ).all()
        )
    # no source read says whether Huawei's list prices include VAT
    assert flags == {"alibaba": True, "aws-china": False, "lambda": None, "huawei": None}


def test_chinese_regions_map_to_provinces_and_hong_kong_to_hk(engine: Engine) -> None:
    from schema.catalog import Region

    load_reference(engine, REFERENCE_DIR)
    region = Region.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        rows = conn.execute(
            select(region.c.provider, region.c.code, region.c.country, region.c.province)
        )
        places = {(r.provider, r.code): (r.province, r.country) for r in rows}
    assert places[("alibaba", "cn-beijing")] == ("Beijing", "CN")
    assert places[("alibaba", "cn-shenzhen")] == ("Guangdong", "CN")
    assert places[("tencent", "ap-guangzhou")] == ("Guangdong", "CN")
    assert places[("aws", "cn-northwest-1")] == ("Ningxia", "CN")
    assert places[("alibaba", "cn-hongkong")] == (None, "HK")
    assert places[("tencent", "ap-hongkong")] == (None, "HK")
    assert places[("huawei", "cn-south-1")] == ("Guangdong", "CN")
    assert places[("huawei", "ap-southeast-1")] == (None, "HK")
    mainland = [k for k, (_, country) in places.items() if country == "CN"]
    assert mainland and all(places[k][0] for k in mainland)
    sources = (
        ("alibaba", alibaba.REGIONS),
        ("tencent", tencent.REGIONS),
        ("huawei", huawei.REGIONS),
    )
    for name, regions in sources:
        assert all((name, code) in places for code in regions)


# --------------------------------------------------------------------- real data


def test_real_aws_china_excerpt_is_skipped_cleanly(realdata: Path) -> None:
    """The real Ningxia excerpt holds one gp3 volume priced in CNY: no GPU offer, no error."""
    path = (
        realdata
        / "aws-china"
        / "aws-pricelist-ec2-cn-northwest-1-gp3-excerpt-opencost-testdata.json"
    )
    source = AwsChinaPriceList()
    assert _offline(source, [path]) == []
    data = json.loads(path.read_bytes())
    (sku,) = data["products"]
    assert sku == "R83VXG9NAPDASEGN"
    assert source.product(data["products"][sku], None) is None
