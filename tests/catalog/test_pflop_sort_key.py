"""The stored USD per PFLOPS-hour sort key (``offer.pflop_hour_usd_e10``, migration 0021).

It must equal the figure the listing shows (USD per GPU-hour x 1000 / BF16 TFLOPS, rounded
half to even to 10 places) x 10^10 for every offer, whichever way the row was written: a
new offer (SQLite's row path and staged path, PostgreSQL), a repriced one, a TFLOPS figure
changed by a reference load, the migration's backfill. And the listing sorted by it pages
in that order, both directions, with filters, through cursors.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import Engine, literal, select, text
from sqlalchemy.types import BigInteger

from schema.catalog import GpuModel
from schema.prices import (
    SORT_KEY_MAX,
    Offer,
    pflop_hour_key,
    pflop_hour_key_scaled_sql,
    pflop_hour_key_sql,
    tflops_scaled,
)
from service.api.main import create_app
from service.catalog import writer as writer_module
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.compliance.reference_load import load_reference
from service.core.config import REFERENCE_DIR, Settings
from service.core.db import make_engine
from service.core.migrate import downgrade, upgrade
from service.query.offers import live_gpu_slugs
from tests.api.test_api_query import page_all
from tests.conftest import scratch_pg_database
from tests.support.factories import record

OFFER = Offer.__table__  # type: ignore[attr-defined]
GPU = GpuModel.__table__  # type: ignore[attr-defined]
GPUS = ["H100 SXM", "A100 80GB", "H100 PCIe", "L4", "L40S", "H100 NVL", "T4", "Mystery 9000"]
"""Three H100 models (``gpu=h100`` merges a walk per model), GPUs without a BF16 figure
or without a model."""
TEN_PLACES = Decimal("1e-10")
H100 = "nvidia-h100-sxm-80gb"


def _records(source: str, n: int, shift: int = 0) -> list[dict[str, Any]]:
    """Varied prices: GPU counts of 1, 3 and 8 (a third of a price has 10 decimal places),
    amounts with up to 4 places, a currency without a rate (no USD price), GPUs without a
    BF16 figure or without a model."""
    return [
        record(
            i,
            provider=source,
            source=source,
            sku=f"{source}-{i % 13}",
            gpu_name_raw=GPUS[i % len(GPUS)],
            gpu_count=str([1, 3, 8][i % 3]),
            region=f"{source}-r{i // 13}",
            country=["DE", "US", "FR"][i % 3],
            price_kind=["on_demand", "spot"][i % 2],
            amount=str(Decimal("0.7301") + Decimal((i * 7 + shift) % 23) * Decimal("0.4137")),
            currency="XTS" if i % 11 == 5 else "USD",
        )
        for i in range(n)
    ]


def _shown(gpu_hour_usd: Decimal | None, tflops: Decimal | None) -> Decimal | None:
    """The listing's figure, from its definition (not from the code under test)."""
    if gpu_hour_usd is None or not tflops:
        return None
    return (gpu_hour_usd * 1000 / tflops).quantize(TEN_PLACES, rounding=ROUND_HALF_EVEN)


def _keys(engine: Engine) -> dict[int, tuple[int | None, int | None]]:
    """Offer id -> (stored key, the key its price and its GPU's TFLOPS give)."""
    with engine.connect() as conn:
        tflops = dict(conn.execute(select(GPU.c.slug, GPU.c.tflops_bf16)).all())
        rows = conn.execute(
            select(OFFER.c.id, OFFER.c.gpu_hour_usd, OFFER.c.gpu_slug, OFFER.c.pflop_hour_usd_e10)
        ).all()
    out = {}
    for offer_id, per_gpu, slug, stored in rows:
        shown = _shown(per_gpu, tflops.get(slug) if slug else None)
        out[offer_id] = (stored, None if shown is None else int(shown.scaleb(10)))
    return out


def _assert_keys_right(engine: Engine) -> dict[int, int | None]:
    keys = _keys(engine)
    wrong = {i: pair for i, pair in keys.items() if pair[0] != pair[1]}
    assert not wrong, wrong
    stored = {i: pair[0] for i, pair in keys.items()}
    assert any(k is None for k in stored.values()) and any(k for k in stored.values())
    return stored


def _reference_with_tflops(tmp_path: Path, slug: str, bf16: str) -> Path:
    folder = tmp_path / "ref"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(REFERENCE_DIR, folder)
    data = yaml.safe_load((folder / "gpus.yaml").read_text())
    (model,) = [g for g in data["gpus"] if g["slug"] == slug]
    model["tflops"]["bf16"] = bf16
    (folder / "gpus.yaml").write_text(yaml.safe_dump(data, allow_unicode=True))
    return folder


EDGES = [
    # (USD per GPU-hour x 10^10, TFLOPS): exact halves (400, 16, 2000 with odd prices) both
    # ways, a third of a price, no figure, zero, below the key's 10^-4 TFLOPS, a high price
    *((e10, Decimal(t)) for e10 in (1, 3, 5, 33333333333, 33333333334) for t in (400, 16, 2000)),
    (24500000000, Decimal("989.5")),
    (8333333333, Decimal("312")),
    (0, Decimal("121")),
    (12345678901234, Decimal("0.5")),
    (10**13, Decimal("1979")),
    (5, None),
    (5, Decimal(0)),
    (5, Decimal("0.00004")),
    (None, Decimal(400)),
]


def test_key_in_sql_equals_the_key_in_python(engine: Engine) -> None:
    """:func:`pflop_hour_key_sql` (migration, reference loads, pinned reads), its form on a
    TFLOPS figure scaled in Python (staged ingest) and :func:`pflop_hour_key` (ingest's
    rows) agree, and equal the figure shown x 10^10, halves included."""
    dialect = engine.dialect.name
    halves = 0
    with engine.connect() as conn:
        for e10, tflops in EDGES:
            price = literal(e10, BigInteger)
            figure = literal(tflops, GPU.c.tflops_bf16.type)
            in_sql = conn.execute(select(pflop_hour_key_sql(price, figure, dialect))).scalar()
            in_python = pflop_hour_key(e10, tflops)
            assert in_sql == in_python, (e10, tflops)
            # SQLite's staged ingest: the TFLOPS figure scaled in Python, the key in SQL
            scaled = literal(tflops_scaled(tflops), BigInteger)
            staged = conn.execute(select(pflop_hour_key_scaled_sql(price, scaled))).scalar()
            assert staged == in_python, (e10, tflops)
            shown = _shown(None if e10 is None else Decimal(e10).scaleb(-10), tflops)
            if tflops is not None and tflops < Decimal("0.0001"):
                shown = None  # below the key's resolution: no key
            assert in_python == (None if shown is None else int(shown.scaleb(10))), (e10, tflops)
            if e10 is not None and tflops and (Decimal(e10) * 2000 / tflops) % 2 == 1:
                halves += 1
    assert halves >= 4


MOST = SORT_KEY_MAX // 10**7
"""The largest whole part of a key (USD per PFLOPS-hour x 10^3) that fits the BIGINT range."""


@pytest.mark.parametrize(
    ("e10", "tflops", "expected"),
    [
        (3_300_000_000_000_000_000, Decimal(8), SORT_KEY_MAX),  # 3.3 x 10^8 USD over 8 TFLOPS
        ((MOST + 1) * 10**4, Decimal(1), SORT_KEY_MAX),
        (MOST * 10**4 + 4776, Decimal(1), SORT_KEY_MAX),  # the largest whole part, past it
        (MOST * 10**4 + 4775, Decimal(1), MOST * 10**7 + 4_775_000),  # within: exact
        (SORT_KEY_MAX, Decimal("0.0001"), SORT_KEY_MAX),
    ],
)
def test_key_in_sql_saturates_as_the_key_in_python(
    engine: Engine, e10: int, tflops: Decimal, expected: int
) -> None:
    """A price per GPU-hour of 10^8 (the most a record may give) over a GPU of a few TFLOPS
    is past the BIGINT range as USD per PFLOPS-hour x 10^10: the key saturates, in SQL as in
    Python (PostgreSQL raised "bigint out of range", which stopped every reference load and
    the overview's daily trend)."""
    assert pflop_hour_key(e10, tflops) == expected
    with engine.connect() as conn:
        price = literal(e10, BigInteger)
        figure = literal(tflops, GPU.c.tflops_bf16.type)
        dialect = engine.dialect.name
        assert conn.execute(select(pflop_hour_key_sql(price, figure, dialect))).scalar() == expected
        scaled = literal(tflops_scaled(tflops), BigInteger)
        assert conn.execute(select(pflop_hour_key_scaled_sql(price, scaled))).scalar() == expected


@pytest.mark.parametrize("staged", [False, True], ids=["rows", "staged"])
def test_stored_key_follows_ingest_and_reference_loads(
    engine: Engine,
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    staged: bool,
) -> None:
    """New offers, repriced offers, a TFLOPS change, a GPU model that loses its figure: the
    stored key is the formula's after each (``staged``: SQLite's staged insert for every
    batch of new offers; PostgreSQL always writes rows)."""
    if staged and engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL writes new offers as rows only")
    if staged:
        monkeypatch.setattr(writer_module, "STAGED_MIN_ROWS", 1)
    load_reference(engine, REFERENCE_DIR)
    ingest(engine, settings, CrawlResult(source="lambda", records=_records("lambda", 60)))
    first = _assert_keys_right(engine)

    repriced = _records("lambda", 60)
    for r in repriced[::3]:  # a third of the prices move a little
        r["amount"] = str(Decimal(r["amount"]) + Decimal("0.0101"))
    result = ingest(engine, settings, CrawlResult(source="lambda", records=repriced))
    assert result.changed == 20, result
    second = _assert_keys_right(engine)
    assert sum(first[i] != second[i] for i in first) >= 10

    with engine.connect() as conn:
        h100 = set(conn.execute(select(OFFER.c.id).where(OFFER.c.gpu_slug == H100)).scalars())
    report = load_reference(engine, _reference_with_tflops(tmp_path, H100, "400"))
    third = _assert_keys_right(engine)
    changed = {i for i in third if third[i] != second[i]}
    assert changed and changed <= h100
    assert report.changed["offer_pflop_keys"] == len(changed)

    load_reference(engine, _reference_with_tflops(tmp_path, H100, None))  # type: ignore[arg-type]
    fourth = _assert_keys_right(engine)
    assert all(fourth[i] is None for i in h100)
    assert load_reference(engine, REFERENCE_DIR).changed["offer_pflop_keys"] > 0
    _assert_keys_right(engine)


@pytest.fixture
def client(engine: Engine, settings: Settings, reference_data: None) -> Iterator[TestClient]:
    for source, shift in (("lambda", 0), ("aws", 3), ("ovhcloud", 7)):
        ingest(engine, settings, CrawlResult(source=source, records=_records(source, 40, shift)))
    app = create_app(settings.model_copy(update={"scheduler_enabled": False}))
    with TestClient(app) as test_client:
        test_client.engine = engine  # type: ignore[attr-defined]
        yield test_client


def _formula_order(client: TestClient, params: dict[str, str], descending: bool) -> list[int]:
    """Every offer the filters keep, in the documented order computed from the formula: the
    figure from each offer's USD per GPU-hour and its GPU's TFLOPS, then the id; offers
    without a figure last, by id."""
    everything = client.get("/v1/offers", params={**params, "limit": 1000}).json()["data"]
    engine: Engine = client.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        tflops = dict(conn.execute(select(GPU.c.slug, GPU.c.tflops_bf16)).all())
    keyed = []
    for offer in everything:
        per_gpu = offer["price_per_gpu_hour_usd"]
        slug = offer["gpu"]
        figure = _shown(Decimal(per_gpu) if per_gpu is not None else None, tflops.get(slug))
        keyed.append((figure, offer["id"]))
    present = sorted((k, i) for k, i in keyed if k is not None)
    if descending:
        present.sort(key=lambda pair: pair[1])
        present.sort(key=lambda pair: pair[0], reverse=True)
    return [i for _, i in present] + sorted(i for k, i in keyed if k is None)


PFLOP_FILTERS: list[dict[str, str]] = [
    {},
    {"min_gpu_memory_gb": "48"},
    {"gpu": "h100"},
    {"gpu": "h100", "not_country": "DE"},
    {"gpu": "nvidia-h100-pcie-80gb"},
    {"gpu": "t4"},  # no BF16 figure: every offer unkeyed, by id (no walk at all)
    {"not_country": "US", "min_gpus": "3"},
    {"provider": "aws,lambda", "max_price_per_gpu_hour": "2"},
]


@pytest.mark.parametrize("sort", ["price_per_pflop_hour", "-price_per_pflop_hour"])
def test_listing_pages_in_the_formula_order(client: TestClient, sort: str) -> None:
    """Paged through cursors (pages of 1, 4 and 7), both directions, with filters that keep
    whole GPU models out, one model or a family of several (one walk per model, merged): the
    formula's order, and the figures shown follow it."""
    engine: Engine = client.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        assert len(live_gpu_slugs(conn, "h100")) == 3  # the family's walks are merged
    for params in PFLOP_FILTERS:
        expected = _formula_order(client, params, sort.startswith("-"))
        assert len(expected) > 3, params
        for limit in (1, 4, 7):
            paged = page_all(client, {**params, "sort": sort}, limit=limit)
            assert [o["id"] for o in paged] == expected, (params, limit)
        shown = [o["price_per_pflop_hour_usd"] for o in paged]
        figures = [Decimal(s) for s in shown if s is not None]
        assert figures == sorted(figures, reverse=sort.startswith("-")), params
        assert None not in shown[: len(figures)], params


def _backfill_roundtrip(url: str) -> None:
    """0021 up with offers (backfilled to the formula's keys), down (column and index
    gone, offers kept), up again (the same keys)."""
    upgrade(url)
    engine = make_engine(url)
    try:
        settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
        load_reference(engine, REFERENCE_DIR)
        ingest(engine, settings, CrawlResult(source="lambda", records=_records("lambda", 60)))
        written = _assert_keys_right(engine)
        downgrade(url, "0020")
        engine.dispose()
        with engine.connect() as conn:
            columns = {c[1] for c in _columns(conn)}
            assert "pflop_hour_usd_e10" not in columns
            assert conn.execute(text("SELECT count(*) FROM offer")).scalar() == len(written)
        upgrade(url)
        engine.dispose()
        assert _assert_keys_right(engine) == written
    finally:
        engine.dispose()


def _columns(conn: Any) -> list[tuple[Any, ...]]:
    if conn.dialect.name == "sqlite":
        return [tuple(r) for r in conn.execute(text("PRAGMA table_info(offer)"))]
    names = conn.execute(
        text("SELECT 0, column_name FROM information_schema.columns WHERE table_name = 'offer'")
    )
    return [tuple(r) for r in names]


def test_sqlite_backfill_up_down_up(tmp_path: Path) -> None:
    _backfill_roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_backfill_up_down_up() -> None:
    with scratch_pg_database() as url:
        _backfill_roundtrip(url)
