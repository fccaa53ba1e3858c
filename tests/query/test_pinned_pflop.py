"""A listing ``as_of`` a past version sorted by USD per PFLOPS-hour keys each offer by its
price at that version: on SQLite the offer row's stored key serves the offers not repriced
since (``service.query.sql.stored_or_pinned_pflop``), the others' key is computed from the
observation in force then. Checked against a brute-force reading of every observation row,
at every version of a catalog whose offers are repriced, withdrawn, brought back and
added, both directions, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from schema.catalog import GpuModel
from schema.prices import pflop_hour_key, sort_key_e10
from service.core.config import Settings
from service.query.filters import OfferFilters
from service.query.offers import list_offers
from service.query.sql import OFFER
from tests.query.test_history_reads import build, observations, visible

GPU = GpuModel.__table__  # type: ignore[attr-defined]


def expected(engine: Engine, rows: list[dict[str, Any]], version: int, descending: bool) -> Any:
    """(id, key) of every offer in force at ``version``: keyed first (by key, then id; the
    key descending when asked), then the offers without a key, by id."""
    with engine.connect() as conn:
        models = dict(conn.execute(select(OFFER.c.id, OFFER.c.gpu_slug)).all())
        tflops = dict(conn.execute(select(GPU.c.slug, GPU.c.tflops_bf16)).all())
    keyed, unkeyed = [], []
    for offer_id, obs in visible(rows, version).items():
        key = pflop_hour_key(sort_key_e10(obs["gpu_hour_usd"]), tflops.get(models[offer_id]))
        (unkeyed if key is None else keyed).append((offer_id, key))
    keyed.sort(key=lambda item: item[0])
    keyed.sort(key=lambda item: item[1], reverse=descending)
    return keyed + sorted(unkeyed)


def test_pinned_pflop_pages_key_each_offer_by_its_price_then(
    engine: Engine, settings: Settings
) -> None:
    last = build(engine, settings)
    rows = observations(engine)
    repriced_since = {r["offer_id"] for r in rows if r["version_from"] > 1}
    assert repriced_since, "the catalog must hold offers repriced after its first version"
    everyone = OfferFilters(include_peers=True)
    for version in range(1, last):
        for descending in (False, True):
            want = expected(engine, rows, version, descending)
            with engine.connect() as conn:
                page = list_offers(
                    conn,
                    everyone,
                    1000,
                    version=version,
                    sort="price_per_pflop_hour",
                    descending=descending,
                )
            got = [
                (r["id"], None if r["sort_value"] is None else int(r["sort_value"])) for r in page
            ]
            assert got == want, (version, descending)
            assert any(key is not None for _, key in got)
