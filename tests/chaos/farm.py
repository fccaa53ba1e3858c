"""The provider farm: a loopback HTTP server that serves API sources' fixtures, changes
their prices on a seeded schedule (logging the truth) and injects faults (counted by kind).

Each source adapter parses its fixture once and exposes *knobs*: prices the farm may move,
each tied to the catalog offers it must show up in (source, sku, ``on_demand``). A fault
is armed on one source and served to its next request(s); the clean document is never
touched by a fault. Every clean (fault-free) answer records which value of each knob was
served and when, so the runner can demand exactly those values in the catalog history.
"""

from __future__ import annotations

import copy
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from service.config import FIXTURES_DIR

HOSTILE = "<script>alert('x')</script>\u202e\u200f<b>evil</b>\x00&amp;\"'"
BIG_FIELD = "A" * (10 * 1024 * 1024)
HARD = "hard"
"""A fault served to every attempt of one crawl (retries included): the crawl must fail."""

FAULT_KINDS = (
    "http_429",
    "http_500",
    "http_503",
    "slow",
    "truncated",
    "invalid_json",
    "renamed_field",
    "drop_90",
    "spike_x100",
    "duplicates",
    "hostile",
)
TRANSIENT = {"http_429"}  # one bad answer, the retry gets a clean one: the crawl succeeds


@dataclass
class Knob:
    source: str
    key: str
    sku: str
    amount: Decimal
    setter: Callable[[Any, Decimal], None]


class Adapter:
    """One source: its route, its fixture, its knobs and how each fault mangles it."""

    name: str
    path: str
    fixture: Path

    def __init__(self) -> None:
        self.doc: Any = json.loads(self.fixture.read_text())

    def knobs(self) -> dict[str, Knob]:
        raise NotImplementedError

    def new_amount(self, old: Decimal, rng: random.Random) -> Decimal:
        factor = Decimal(str(round(rng.uniform(0.8, 1.25), 3)))
        new = (old * factor).quantize(Decimal("0.01"))
        return new if new not in (old, 0) else old + Decimal("0.01")

    def rename(self, doc: Any) -> None:
        raise NotImplementedError

    def drop(self, doc: Any, rng: random.Random) -> None:
        raise NotImplementedError

    def duplicate(self, doc: Any) -> None:
        raise NotImplementedError

    def hostile(self, doc: Any) -> None:
        raise NotImplementedError


def _keep_tenth(items: list[Any], rng: random.Random) -> list[Any]:
    return rng.sample(items, max(1, len(items) // 10))


class Oracle(Adapter):
    name = "oracle"
    path = "/pls/apex/cetools/api/v1/products/"
    fixture = FIXTURES_DIR / "oracle" / "products-USD.json"

    def knobs(self) -> dict[str, Knob]:
        from crawlers.providers.oracle import SHAPES

        found = {}
        for index, item in enumerate(self.doc["items"]):
            shapes = SHAPES.get(item["partNumber"], ())
            if item["metricName"] != "GPU Per Hour" or len(shapes) != 1:
                continue
            prices = [
                p
                for loc in item["currencyCodeLocalizations"]
                if loc["currencyCode"] == "USD"
                for p in loc["prices"]
                if p["model"] == "PAY_AS_YOU_GO"
            ]
            if len(prices) != 1 or prices[0]["value"] is None:
                continue

            def setter(doc: Any, amount: Decimal, i: int = index) -> None:
                for loc in doc["items"][i]["currencyCodeLocalizations"]:
                    for p in loc["prices"]:
                        if loc["currencyCode"] == "USD" and p["model"] == "PAY_AS_YOU_GO":
                            p["value"] = float(amount)

            amount = Decimal(str(prices[0]["value"]))
            found[item["partNumber"]] = Knob(
                self.name, item["partNumber"], shapes[0].name, amount, setter
            )
        return found

    def rename(self, doc: Any) -> None:
        doc["products"] = doc.pop("items")

    def drop(self, doc: Any, rng: random.Random) -> None:
        doc["items"] = _keep_tenth(doc["items"], rng)

    def duplicate(self, doc: Any) -> None:
        doc["items"] = doc["items"] + copy.deepcopy(doc["items"])

    def hostile(self, doc: Any) -> None:
        for item in doc["items"]:
            item["displayName"] = f"{item['displayName']} {HOSTILE}"
        doc["items"][0]["description"] = BIG_FIELD


class Lambda(Adapter):
    name = "lambda"
    path = "/api/v1/instance-types"
    fixture = FIXTURES_DIR / "lambda" / "instance-types.json"

    def knobs(self) -> dict[str, Knob]:
        found = {}
        for key, entry in self.doc["data"].items():
            item = entry["instance_type"]
            if not item["specs"]["gpus"]:
                continue

            def setter(doc: Any, amount: Decimal, k: str = key) -> None:
                doc["data"][k]["instance_type"]["price_cents_per_hour"] = int(amount * 100)

            amount = Decimal(item["price_cents_per_hour"]) / 100
            found[key] = Knob(self.name, key, item["name"], amount, setter)
        return found

    def rename(self, doc: Any) -> None:
        doc["instance_types"] = doc.pop("data")

    def drop(self, doc: Any, rng: random.Random) -> None:
        keep = _keep_tenth(sorted(doc["data"]), rng)
        doc["data"] = {k: doc["data"][k] for k in keep}

    def duplicate(self, doc: Any) -> None:
        for key in list(doc["data"]):
            doc["data"][f"{key}-copy"] = copy.deepcopy(doc["data"][key])

    def hostile(self, doc: Any) -> None:
        for entry in doc["data"].values():
            entry["instance_type"]["description"] = HOSTILE
            for region in entry.get("regions_with_capacity_available") or []:
                region["description"] = HOSTILE
        first = next(iter(doc["data"].values()))
        first["instance_type"]["description"] = BIG_FIELD


class Ovh(Adapter):
    name = "ovhcloud"
    path = "/1.0/order/catalog/public/cloud"
    fixture = FIXTURES_DIR / "ovhcloud" / "catalog-public-cloud-FR.json"
    plan = re.compile(r"^([^.]+)\.consumption$")

    def knobs(self) -> dict[str, Knob]:
        found = {}
        for index, addon in enumerate(self.doc["addons"]):
            match = self.plan.match(addon["planCode"])
            gpu = ((addon.get("blobs") or {}).get("technical") or {}).get("gpu") or {}
            prices = [
                p
                for p in addon["pricings"]
                if {"consumption", "renew"} & set(p.get("capacities") or ["consumption"])
            ]
            if not match or not gpu.get("number") or len(prices) != 1:
                continue
            if match[1].startswith("win-"):
                continue

            def setter(doc: Any, amount: Decimal, i: int = index) -> None:
                for p in doc["addons"][i]["pricings"]:
                    if {"consumption", "renew"} & set(p.get("capacities") or ["consumption"]):
                        p["price"] = int(amount * 10**8)

            amount = Decimal(prices[0]["price"]) / 10**8
            found[addon["planCode"]] = Knob(self.name, addon["planCode"], match[1], amount, setter)
        return found

    def rename(self, doc: Any) -> None:
        doc["addOns"] = doc.pop("addons")

    def drop(self, doc: Any, rng: random.Random) -> None:
        doc["addons"] = _keep_tenth(doc["addons"], rng)

    def duplicate(self, doc: Any) -> None:
        doc["addons"] = doc["addons"] + copy.deepcopy(doc["addons"])

    def hostile(self, doc: Any) -> None:
        for addon in doc["addons"]:
            addon["invoiceName"] = f"{addon.get('invoiceName', '')} {HOSTILE}"
        doc["addons"][0]["chaos_note"] = BIG_FIELD


ADAPTERS: dict[str, type[Adapter]] = {a.name: a for a in (Oracle, Lambda, Ovh)}


@dataclass
class Armed:
    kind: str
    remaining: int
    armed_at: float


@dataclass
class FarmLog:
    changes: list[dict[str, Any]] = field(default_factory=list)
    """Legitimate price changes: t, source, key, sku, old, new."""
    faults: list[dict[str, Any]] = field(default_factory=list)
    """Faults served: t, source, kind (one entry per bad answer)."""
    served: dict[tuple[str, str, Decimal], list[float]] = field(default_factory=dict)
    """(source, knob, value) -> [first, last] time a clean answer carried it."""
    spikes: list[tuple[str, str, Decimal]] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)


class Farm:
    """The server plus its seeded schedule of changes and faults."""

    def __init__(
        self,
        sources: list[str],
        seed: int,
        *,
        http_timeout: float,
        attempts: int,
        event_gap: float = 2.5,
        change_share: float = 0.4,
        kinds: tuple[str, ...] = FAULT_KINDS,
    ) -> None:
        self.rng = random.Random(seed)
        self.adapters = {name: ADAPTERS[name]() for name in sources}
        self.knobs = {name: a.knobs() for name, a in self.adapters.items()}
        self.http_timeout, self.attempts = http_timeout, attempts
        self.event_gap, self.change_share, self.kinds = event_gap, change_share, kinds
        self.armed: dict[str, Armed] = {}
        self.log = FarmLog()
        self.t0 = time.time()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._faults_on = threading.Event()
        self._bodies: dict[str, bytes] = {n: self._dump(a.doc) for n, a in self.adapters.items()}
        self._routes = {a.path: n for n, a in self.adapters.items()}
        self._thread: threading.Thread | None = None
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self._server = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @staticmethod
    def _dump(doc: Any) -> bytes:
        return json.dumps(doc, ensure_ascii=False).encode()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._server.start()

    def start_chaos(self, until: float, max_events: int) -> None:
        self._faults_on.set()
        self._thread = threading.Thread(
            target=self._schedule, args=(until, max_events), name="farm-schedule", daemon=True
        )
        self._thread.start()

    def quiesce(self) -> None:
        """No more changes or faults; armed faults are dropped: clean answers from now on."""
        self._faults_on.clear()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            self.armed.clear()

    def close(self) -> None:
        self.quiesce()
        if self._server.is_alive():  # shutdown() waits for serve_forever: only if it runs
            self.httpd.shutdown()
        self.httpd.server_close()

    def keep_knobs(self, keep: dict[str, set[str]]) -> None:
        """Only the knobs whose baseline the catalog shows are moved (self-calibration)."""
        for name in self.knobs:
            self.knobs[name] = {k: v for k, v in self.knobs[name].items() if k in keep[name]}

    # ------------------------------------------------------------------ schedule

    def _schedule(self, until: float, max_events: int) -> None:
        kinds = list(self.kinds)
        self.rng.shuffle(kinds)
        turn = 0
        for _ in range(max_events):
            gap = self.rng.expovariate(1 / self.event_gap)
            if self._stop.wait(min(gap, max(0.0, until - time.time()))) or time.time() >= until:
                return
            source = self.rng.choice(sorted(self.adapters))
            if self.rng.random() < self.change_share:
                self._change(source)
                continue
            with self._lock:
                if source in self.armed:
                    continue
                kind = kinds[turn % len(kinds)]
                turn += 1
                count = 1 if kind in TRANSIENT or kind not in HTTP_FAULTS else self.attempts
                self.armed[source] = Armed(kind, count, time.time())

    def _change(self, source: str) -> None:
        with self._lock:
            knobs = self.knobs[source]
            if not knobs:
                return
            knob = knobs[self.rng.choice(sorted(knobs))]
            adapter = self.adapters[source]
            new = adapter.new_amount(knob.amount, self.rng)
            knob.setter(adapter.doc, new)
            self.log.changes.append(
                {
                    "t": time.time(),
                    "source": source,
                    "key": knob.key,
                    "sku": knob.sku,
                    "old": knob.amount,
                    "new": new,
                }
            )
            knob.amount = new
            self._bodies[source] = self._dump(adapter.doc)

    # ------------------------------------------------------------------ serving

    def _answer(self, source: str) -> tuple[int, dict[str, str], bytes, float, bool]:
        """status, headers, body, delay, truncate."""
        with self._lock:
            now = time.time()
            self.log.requests[source] += 1
            armed = self.armed.get(source) if self._faults_on.is_set() else None
            clean = self._bodies[source]
            if armed is None:
                for knob in self.knobs[source].values():
                    span = self.log.served.setdefault((source, knob.key, knob.amount), [now, now])
                    span[1] = now
                return 200, {}, clean, 0.0, False
            armed.remaining -= 1
            if armed.remaining <= 0:
                del self.armed[source]
            self.log.faults.append({"t": now, "source": source, "kind": armed.kind})
            return self._fault(source, armed.kind, clean)

    def _fault(
        self, source: str, kind: str, clean: bytes
    ) -> tuple[int, dict[str, str], bytes, float, bool]:
        adapter = self.adapters[source]
        if kind == "http_429":
            return 429, {"Retry-After": "1"}, b'{"error": "slow down"}', 0.0, False
        if kind == "http_500":
            return 500, {}, b"internal error", 0.0, False
        if kind == "http_503":
            return 503, {"Retry-After": "1"}, b"unavailable", 0.0, False
        if kind == "slow":
            return 200, {}, clean, self.http_timeout + 1.5, False
        if kind == "truncated":
            return 200, {}, clean, 0.0, True
        if kind == "invalid_json":
            return 200, {}, clean[: len(clean) // 3] + b"}{,", 0.0, False
        doc = copy.deepcopy(adapter.doc)
        if kind == "renamed_field":
            adapter.rename(doc)
        elif kind == "drop_90":
            adapter.drop(doc, self.rng)
        elif kind == "duplicates":
            adapter.duplicate(doc)
        elif kind == "hostile":
            adapter.hostile(doc)
        elif kind == "spike_x100":
            knobs = self.knobs[source]
            if knobs:
                knob = knobs[self.rng.choice(sorted(knobs))]
                spiked = knob.amount * 100
                knob.setter(doc, spiked)
                self.log.spikes.append((source, knob.sku, spiked))
        return 200, {}, self._dump(doc), 0.0, False

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        farm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                try:
                    source = farm._routes.get(self.path.split("?", 1)[0])
                    if source is None:
                        self._send(404, {}, b"not found", 0.0, False)
                        return
                    self._send(*farm._answer(source))
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the crawler gave up (timeout): fine

            def _send(
                self, status: int, headers: dict[str, str], body: bytes, delay: float, cut: bool
            ) -> None:
                if delay:
                    time.sleep(min(delay, 30.0))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if cut:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        return Handler


HTTP_FAULTS = {"http_429", "http_500", "http_503", "slow", "truncated"}
"""Faults the fetcher retries: armed for every attempt of one crawl (except 429)."""
