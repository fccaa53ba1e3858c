"""The outbox: events are matched and written by the ingest transaction that caused them."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import Engine

from service.config import REFERENCE_DIR, Settings
from service.ingest import CrawlResult, ingest
from service.reference import load_reference
from tests.alerts_helpers import events, subscribe
from tests.factories import records


def crawl(items: list[dict[str, object]]) -> CrawlResult:
    return CrawlResult(source="acme", records=items)


def test_conditions_and_filters_produce_the_right_events(
    engine: Engine, settings: Settings
) -> None:
    load_reference(engine, REFERENCE_DIR)
    base = records(20)  # amounts 20.0 .. 21.9 for 8 GPUs: 2.5 .. 2.74 USD/GPU-hour
    ingest(engine, settings, crawl(base))
    drop, _ = subscribe(engine, settings, filters={"gpu": "h100"}, condition={"price_drop_pct": 10})
    rise, _ = subscribe(engine, settings, condition={"price_rise_pct": "5"})
    below, _ = subscribe(
        engine, settings, filters={"country": "de"}, condition={"below_usd_per_gpu_hour": "2.3"}
    )
    new, _ = subscribe(engine, settings, condition={"new_offer": True})
    gone, _ = subscribe(
        engine, settings, filters={"provider": "acme"}, condition={"withdrawn": True}
    )
    other, _ = subscribe(
        engine, settings, filters={"provider": "elsewhere"}, condition={"new_offer": True}
    )
    nl_only, _ = subscribe(
        engine, settings, filters={"country": "NL"}, condition={"price_drop_pct": 1}
    )
    changed = [dict(r) for r in base[:-1]]  # the last offer is withdrawn
    changed[0]["amount"] = "16.00"  # -20 %: drop, and 2.0 USD/GPU-h crosses below 2.3
    changed[1]["amount"] = "18.90"  # 20.1 -> 18.9: -6 %, no drop event (threshold 10)
    changed[2]["amount"] = "23.00"  # 20.2 -> 23: +13.9 %: rise
    changed.append(dict(records(21)[-1], sku="fresh", amount="30"))
    result = ingest(engine, settings, crawl(changed))
    assert result.catalog_version == 2
    got = {
        (e["subscription_id"], e["event_type"], e["payload"]["offer"]["sku"])
        for e in events(engine)
    }
    assert got == {
        (drop, "price_drop", "gpu-0"),
        (below, "below", "gpu-0"),
        (rise, "price_rise", "gpu-2"),
        (new, "new_offer", "fresh"),
        (gone, "withdrawn", "gpu-19"),
    }
    assert other not in {s for s, _, _ in got} and nl_only not in {s for s, _, _ in got}
    event = events(engine, subscription_id=drop)[0]
    payload = event["payload"]
    assert (
        payload["id"] == event["idempotency_key"] == f"gpa-{drop}-2-{event['offer_id']}-price_drop"
    )
    assert payload["price"] == {"amount": "16", "currency": "USD", "price_per_gpu_hour_usd": "2"}
    assert payload["old_price"]["amount"] == "20" and payload["change_pct"] == "-20"
    # atom-only subscriptions are published by the commit itself; webhooks wait for delivery
    assert {e["status"] for e in events(engine)} == {"delivered"}
    # the same crawl again changes nothing and raises nothing
    ingest(engine, settings, crawl(changed))
    assert len(events(engine)) == 5


def test_quarantined_ingest_writes_no_event(engine: Engine, settings: Settings) -> None:
    settings = settings.model_copy(update={"allow_private_webhooks": True})
    base = records(20)
    ingest(engine, settings, crawl(base))
    subscribe(engine, settings, condition={"price_drop_pct": 1}, url="http://127.0.0.1:9/x")
    wild = [dict(r, amount=str(Decimal(r["amount"]) / 100)) for r in base]  # ×0.01: implausible
    result = ingest(
        engine, settings.model_copy(update={"allow_private_webhooks": True}), crawl(wild)
    )
    assert result.status.value == "quarantined"
    assert events(engine) == []
    ok = [dict(r) for r in base]
    ok[0]["amount"] = "10.00"
    assert ingest(engine, settings, crawl(ok)).status.value == "ok"
    pending = events(engine)
    assert len(pending) == 1 and pending[0]["status"] == "pending"


def test_deleted_subscriptions_are_not_matched(engine: Engine, settings: Settings) -> None:
    from service.alerts.store import delete_subscription

    ingest(engine, settings, crawl(records(5)))
    sub, _ = subscribe(engine, settings, condition={"new_offer": True})
    with engine.connect() as conn:
        from service.alerts.store import get_subscription

        key_id = get_subscription(conn, sub)["api_key_id"]  # type: ignore[index]
    assert delete_subscription(engine, key_id, sub)
    ingest(engine, settings, crawl(records(6)))
    assert events(engine) == []
