"""The compact current state (service.catalog.state): what it costs per offer, and that
the diff it drives is the one the rules say.

* Python's allocations are traced while a source's state is read and a crawl of its keys
  is judged: a few dozen bytes an offer, where key -> state text dictionaries took
  about 400 (the bound fails if the state grows back into objects per offer).
* Random sequences of crawls (prices changed, respelled, back again; attributes changed;
  offers omitted and back; duplicates with the same and another price; invalid records)
  are ingested in batches of 3, as records and as JSON Lines files (whose unchanged lines
  are skipped), on SQLite and PostgreSQL; each result and the offers it leaves are
  compared with a plain model of the rules (docs/ingest.md).
"""

from __future__ import annotations

import shutil
import tracemalloc
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from schema.prices import Offer
from service.catalog.diff import load_current
from service.catalog.ingest import ingest
from service.catalog.results import CrawlResult
from service.catalog.snapshot import ingest_jsonl
from service.catalog.state import StateHandle
from service.catalog.validation import StreamValidator
from service.core.config import Settings
from service.core.db import make_engine
from tests.catalog.test_line_skip import reference_template as reference_template
from tests.conftest import with_reference
from tests.support.factories import record, records

OFFER = Offer.__table__  # type: ignore[attr-defined]

# -- bytes per offer ------------------------------------------------------------------------

OFFERS = 4_000
STATE_BYTES = 200
"""Bound on the traced bytes an offer's current state takes with its line digest (143
measured at 4,000 offers; a key -> state text dictionary took about 390 with the line map)."""
SEEN_BYTES = 16
"""Bound on what judging a crawl's record of a current offer adds (0-10 measured: the
state holds it; a key -> amount dictionary took about 140)."""
NEW_BYTES = 64
"""Bound on what a key no current offer has adds (about 40 measured)."""


def _file(folder: Path, n: int) -> Path:
    path = folder / "acme.jsonl"
    path.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in records(n)))
    return path


def test_the_current_state_takes_a_few_dozen_bytes_an_offer(
    reference_template: Path, tmp_path: Path
) -> None:
    database = tmp_path / "catalog.db"
    shutil.copy(reference_template, database)
    url = f"sqlite:///{database}"
    engine = make_engine(url)
    settings = Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]
    try:
        path = _file(tmp_path, OFFERS)
        for complete in (True, False):  # the second (the full path again) records lines
            result = ingest_jsonl(engine, settings, path, "acme", complete=complete)
            assert result.status.value == "ok"
        crawl = records(OFFERS)
        fresh = records(OFFERS, source="acme", region="elsewhere")
        with engine.connect() as conn:
            tracemalloc.start()
            try:
                state = load_current(conn, "acme", lines=True)
                held = tracemalloc.get_traced_memory()[0]
                handle = StateHandle()
                handle.open(state)
                validator = StreamValidator("acme", [], index=None, handle=handle)
                before = tracemalloc.get_traced_memory()[0]
                for start in range(0, OFFERS, 500):
                    validator.batch(crawl[start : start + 500])
                seen = tracemalloc.get_traced_memory()[0] - before
                before = tracemalloc.get_traced_memory()[0]
                for start in range(0, OFFERS, 500):
                    validator.batch(fresh[start : start + 500])
                new = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
    finally:
        engine.dispose()
    assert len(state) == OFFERS and state.lines is not None and len(state.lines) == OFFERS
    assert validator.offers == 2 * OFFERS
    assert held / OFFERS < STATE_BYTES, held / OFFERS
    assert seen / OFFERS < SEEN_BYTES, seen / OFFERS
    assert new / OFFERS < NEW_BYTES, new / OFFERS


# -- the diff against a model of the rules --------------------------------------------------

KEYS = 8
ACTION = st.sampled_from(
    ["omit", "same", "same", "same", "price", "respelled", "vcpus", "dup-same", "dup-other"]
    + ["invalid", "invalid-only"]
)
CRAWL = st.fixed_dictionaries(
    {
        "actions": st.lists(ACTION, min_size=KEYS, max_size=KEYS),
        "complete": st.sampled_from([True, True, False]),
        "file": st.booleans(),
    }
)


def _item(i: int, price: int, vcpus: int, spelled: bool = False) -> dict[str, Any]:
    amount = Decimal(20 + i) + Decimal(price) / 4
    text = f"{amount:.4f}" if spelled else str(amount)
    return record(i, amount=text, vcpus=str(vcpus))


class Model:
    """The catalog as the rules say: key -> (amount, vcpus, active)."""

    def __init__(self) -> None:
        self.offers: dict[int, tuple[Decimal, int, bool]] = {}
        self.prices = dict.fromkeys(range(KEYS), 0)
        self.vcpus = dict.fromkeys(range(KEYS), 8)

    def crawl(self, actions: list[str]) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
        """This crawl's records and the counts the rules give (None: nothing valid)."""
        items: list[dict[str, Any]] = []
        seen: dict[int, Decimal] = {}
        protected: set[int] = set()
        rejected = 0
        for i, action in enumerate(actions):
            if action == "omit":
                continue
            if action == "invalid-only":  # rejected: neither written nor withdrawn
                items.append({**_item(i, self.prices[i], self.vcpus[i]), "amount": "-1"})
                protected.add(i)
                rejected += 1
                continue
            if action == "price":
                self.prices[i] += 1
            if action == "vcpus":
                self.vcpus[i] += 1
            item = _item(i, self.prices[i], self.vcpus[i], spelled=action == "respelled")
            items.append(item)
            seen[i] = Decimal(item["amount"])
            if action == "dup-same":
                items.append(_item(i, self.prices[i], self.vcpus[i], spelled=True))
            elif action == "dup-other":
                items.append(_item(i, self.prices[i] + 1, self.vcpus[i]))
                protected.add(i)
                rejected += 1
            elif action == "invalid":
                items.append({**item, "amount": "-1"})
                protected.add(i)
                rejected += 1
        # records out of key order, across batches of 3
        items = items[1::2] + items[0::2]
        valid = [i for i in seen if i not in protected]
        counts = {"seen": len(valid), "rejected": rejected, "added": 0, "changed": 0}
        counts |= {"updated": 0, "withdrawn": 0}
        if not valid:
            return items, None
        return items, counts | {"_seen": list(seen), "_protected": list(protected)}  # type: ignore[dict-item]

    def apply(self, counts: dict[str, Any], complete: bool) -> dict[str, int]:
        seen, protected = set(counts.pop("_seen")), set(counts.pop("_protected"))
        for i in seen - protected:
            amount = Decimal(20 + i) + Decimal(self.prices[i]) / 4
            old = self.offers.get(i)
            if old is None or not old[2]:
                counts["added"] += 1
            elif old[0] != amount:
                counts["changed"] += 1
            elif old[1] != self.vcpus[i]:
                counts["updated"] += 1
            self.offers[i] = (amount, self.vcpus[i], True)
        if complete:
            for i, (amount, vcpus, active) in list(self.offers.items()):
                if active and i not in seen and i not in protected:
                    counts["withdrawn"] += 1
                    self.offers[i] = (amount, vcpus, False)
        return counts


def _offers(engine: Engine) -> dict[int, tuple[Decimal, int, bool]]:
    with engine.connect() as conn:
        rows = conn.execute(select(OFFER.c.sku, OFFER.c.amount, OFFER.c.vcpus, OFFER.c.status))
        return {
            int(sku.removeprefix("gpu-")): (Decimal(amount), int(vcpus), status == "active")
            for sku, amount, vcpus, status in rows
        }


def _run(engine: Engine, folder: Path, crawls: list[dict[str, Any]]) -> None:
    settings = Settings(
        database_url=str(engine.url),
        environment="test",
        _env_file=None,  # type: ignore[call-arg]
        min_offer_ratio=Decimal(0),
    )
    model = Model()
    first = [_item(i, 0, 8) for i in range(KEYS)]
    ingest(engine, settings, CrawlResult("acme", first), batch_size=3)
    model.offers = {i: (Decimal(20 + i), 8, True) for i in range(KEYS)}
    for number, crawl in enumerate(crawls):
        items, counts = model.crawl(crawl["actions"])
        if crawl["file"]:
            path = folder / f"crawl-{number}.jsonl"
            path.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in items))
            result = ingest_jsonl(engine, settings, path, "acme", complete=crawl["complete"])
        else:
            result = ingest(
                engine,
                settings,
                CrawlResult("acme", items, complete=crawl["complete"]),
                batch_size=3,
            )
        if counts is None:
            assert result.status.value != "ok"
        else:
            assert result.status.value == "ok", result.reason
            expected = model.apply(counts, crawl["complete"])
            assert {k: result.counts[k] for k in expected} == expected
        assert _offers(engine) == model.offers


ALL_CHANGES = {"actions": ["price", "respelled", "vcpus", "omit"] * 2, "complete": True}


@pytest.mark.slow
def test_the_diff_is_what_the_rules_say(
    db_url: str, reference_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    @given(crawls=st.lists(CRAWL, min_size=1, max_size=5))
    @example(
        crawls=[
            ALL_CHANGES | {"file": False},
            {"actions": ["same"] * KEYS, "complete": True, "file": True},
            {"actions": ["dup-same", "dup-other", "invalid", "invalid-only"] + ["same"] * 4}
            | {"complete": True, "file": True},
        ]
    )
    @hsettings(
        max_examples=25 if db_url.startswith("sqlite") else 8,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    def check(crawls: list[dict[str, Any]]) -> None:
        folder = tmp_path_factory.mktemp("state")
        if db_url.startswith("sqlite"):
            shutil.copy(reference_template, folder / "catalog.db")
            url = f"sqlite:///{folder / 'catalog.db'}"
        else:
            url = with_reference(db_url)
        engine = make_engine(url)
        try:
            _run(engine, folder, crawls)
        finally:
            engine.dispose()

    check()
