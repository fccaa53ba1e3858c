"""The provider farm: a loopback HTTP server that serves API sources' fixtures and HTML
pricing pages, changes their prices on a seeded schedule (logging the truth) and injects
faults (counted by kind).

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
    "layout_changed",
    "columns_reordered",
    "drop_90",
    "spike_x100",
    "duplicates",
    "hostile",
)
TRANSIENT = {"http_429"}  # one bad answer, the retry gets a clean one: the crawl succeeds
LAYOUT_FAULTS = {"renamed_field", "layout_changed"}
"""Faults after which the crawl must fail with the reason ``layout changed``."""
API_ONLY = {"invalid_json", "renamed_field"}
HTML_ONLY = {"layout_changed", "columns_reordered"}
ROBOTS = b"User-agent: *\nDisallow: /private/\n"


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
    content_type = "application/json"
    prefix = ""
    """Path prefix of the source's base URL on the farm (HTML sources share paths)."""

    def __init__(self) -> None:
        self.doc: Any = json.loads(self.fixture.read_text())

    def kinds(self, kinds: tuple[str, ...]) -> list[str]:
        """The fault kinds this source can be served (in ``kinds``' order)."""
        return [k for k in kinds if k not in HTML_ONLY]

    def render(self, doc: Any) -> bytes:
        return json.dumps(doc, ensure_ascii=False).encode()

    def mangle(self, kind: str, doc: Any, rng: random.Random) -> bytes:
        """The body of a content fault (``doc`` is a copy of the clean document)."""
        if kind == "renamed_field":
            self.rename(doc)
        elif kind == "drop_90":
            self.drop(doc, rng)
        elif kind == "duplicates":
            self.duplicate(doc)
        elif kind == "hostile":
            self.hostile(doc)
        return self.render(doc)

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


_ROW = re.compile(r"<tr\b[^>]*>.*?</tr>", re.S)
_CELL = re.compile(r"(<t[dh]\b[^>]*>)(.*?)(</t[dh]>)", re.S)
_PRICE = re.compile(r"\$(\d+\.\d+)")
_SLOT = re.compile(r"\{\{knob:([^}]+)\}\}")


def _cells(row: str) -> list[str]:
    return [m.group(2) for m in _CELL.finditer(row)]


def _set_cells(row: str, cells: list[str]) -> str:
    found = iter(cells)
    return _CELL.sub(lambda m: m.group(1) + next(found) + m.group(3), row)


class HtmlAdapter(Adapter):
    """A pricing page (Scrapy spider): the fixture becomes a template whose price cells
    are slots; ``doc`` is the knobs' amounts, rendered into the page on every answer.

    Faults rewrite the rendered page: the first table is the price table (its ``<thead>``
    row and ``<tbody>`` rows)."""

    content_type = "text/html; charset=utf-8"
    page: str
    """The spider's start path."""
    price_cell: int
    unread_cell: int
    """A column the spider does not read (hostile strings go there)."""
    swap: tuple[int, int]
    """Two columns the spider finds by name: reordering them must change nothing."""
    header: tuple[str, str]
    """A header the spider keys on, and the renamed one that must fail the crawl."""
    min_rows_for_drop = 5

    def __init__(self) -> None:
        self.prefix = f"/{self.name}"
        self.path = self.prefix + self.page
        html = self.fixture.read_text()
        start, end = html.index("<tbody"), html.index("</tbody>")
        rows = []
        self.skus: dict[str, str] = {}
        self.doc = {}
        for row in _ROW.findall(html[start:end]):
            cells = _cells(row)
            price = _PRICE.search(cells[self.price_cell]) if len(cells) > self.price_cell else None
            if price is not None:
                key = self.sku_of(row, cells)
                self.doc[key] = Decimal(price.group(1))
                self.skus[key] = key
                cells[self.price_cell] = _PRICE.sub(
                    "$" + "{{knob:" + key + "}}", cells[self.price_cell], count=1
                )
                row = _set_cells(row, cells)
            rows.append(row)
        self.template = html[:start] + html[start:end].split(">", 1)[0] + ">"
        self.template += "\n".join(rows) + html[end:]

    def sku_of(self, row: str, cells: list[str]) -> str:
        raise NotImplementedError

    def kinds(self, kinds: tuple[str, ...]) -> list[str]:
        small = len(self.doc) < self.min_rows_for_drop  # too few offers for the count guard
        return [k for k in kinds if k not in API_ONLY and not (small and k == "drop_90")]

    def knobs(self) -> dict[str, Knob]:
        def setter(key: str) -> Callable[[Any, Decimal], None]:
            def set_amount(doc: Any, amount: Decimal) -> None:
                doc[key] = amount

            return set_amount

        return {
            key: Knob(self.name, key, self.skus[key], amount, setter(key))
            for key, amount in self.doc.items()
        }

    def text(self, doc: Any) -> str:
        return _SLOT.sub(lambda m: f"{doc[m.group(1)]:.2f}", self.template)

    def render(self, doc: Any) -> bytes:
        return self.text(doc).encode()

    def _table(self, html: str, edit: Callable[[str, list[str]], tuple[str, list[str]]]) -> str:
        """Rewrite the first table: ``edit(header_row, body_rows)``."""
        start = html.index("<table")
        end = html.index("</table>", start)
        table = html[start:end]
        head_at = table.index("<thead")
        head_end = table.index("</thead>")
        body_at = table.index("<tbody")
        body_end = table.index("</tbody>")
        header = _ROW.findall(table[head_at:head_end])[0]
        body = _ROW.findall(table[body_at:body_end])
        new_header, new_body = edit(header, body)
        body_open = table[body_at:].split(">", 1)[0] + ">"
        table = (
            table[:head_at]
            + table[head_at:head_end].replace(header, new_header)
            + table[head_end:body_at]
            + body_open
            + "\n".join(new_body)
            + table[body_end:]
        )
        return html[:start] + table + html[end:]

    def mangle(self, kind: str, doc: Any, rng: random.Random) -> bytes:
        html = self.text(doc)
        if kind == "drop_90":
            html = self._table(html, lambda h, rows: (h, _keep_tenth(rows, rng)))
        elif kind == "duplicates":
            html = self._table(html, lambda h, rows: (h, [r for r in rows for _ in (0, 1)]))
        elif kind == "columns_reordered":
            a, b = self.swap

            def reorder(row: str) -> str:
                cells = _cells(row)
                if len(cells) > max(a, b):
                    cells[a], cells[b] = cells[b], cells[a]
                    # the cells' own tags move along (th/td attributes)
                    tags = [(m.group(1), m.group(3)) for m in _CELL.finditer(row)]
                    tags[a], tags[b] = tags[b], tags[a]
                    parts = iter(zip(tags, cells, strict=True))
                    return _CELL.sub(lambda _m: "".join(_next3(parts)), row)
                return row

            html = self._table(html, lambda h, rows: (reorder(h), [reorder(r) for r in rows]))
        elif kind == "hostile":
            i = self.unread_cell

            def poison(row: str) -> str:
                cells = _cells(row)
                if len(cells) > i:
                    cells[i] = f"{cells[i]} {HOSTILE}"
                return _set_cells(row, cells)

            html = self._table(html, lambda h, rows: (h, [poison(r) for r in rows]))
            html = html.replace("</title>", f" {HOSTILE}</title>", 1)
            html = html.replace("</body>", f'<div hidden class="x">{BIG_FIELD}</div></body>', 1)
        elif kind == "layout_changed":
            html = self.relayout(html, rng.randrange(3))
        return html.encode()

    def relayout(self, html: str, variant: int) -> str:
        """A redesign the spider's hooks no longer find: 0 renamed header, 1 the table
        turned into cards (``div``s), 2 the table removed (prices moved to a script)."""
        if variant == 0:
            old, new = self.header
            return html.replace(f">{old}<", f">{new}<")
        start = html.index("<table")
        end = html.index("</table>", start) + len("</table>")
        if variant == 1:
            cards = re.sub(r"<(/?)(?:table|thead|tbody|tr|th|td)\b", r"<\1div", html[start:end])
            return html[:start] + cards + html[end:]
        return html[:start] + '<div id="app" data-prices-url="/api/prices"></div>' + html[end:]


def _next3(parts: Any) -> tuple[str, str, str]:
    (open_tag, close_tag), cell = next(parts)
    return open_tag, cell, close_tag


class GenesisCloudWeb(HtmlAdapter):
    name = "genesiscloud-web"
    page = "/pricing"
    fixture = FIXTURES_DIR / "genesiscloud-web" / "pricing.html"
    price_cell, unread_cell, swap = 4, 3, (1, 2)
    header = ("On-demand price per GPU/hour", "On-demand price / GPU-hour")

    def sku_of(self, row: str, cells: list[str]) -> str:
        found = re.search(r'data-gpu="([^"]+)"', row)
        assert found is not None
        return found.group(1)


class DataCrunchWeb(HtmlAdapter):
    name = "datacrunch-web"
    page = "/products"
    fixture = FIXTURES_DIR / "datacrunch-web" / "products.html"
    price_cell, unread_cell, swap = 7, 6, (3, 4)
    header = ("GPU model", "Accelerator")

    def sku_of(self, row: str, cells: list[str]) -> str:
        return re.sub(r"<[^>]+>", "", cells[0]).strip()


ADAPTERS: dict[str, type[Adapter]] = {
    a.name: a for a in (Oracle, Lambda, Ovh, GenesisCloudWeb, DataCrunchWeb)
}


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


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    delay: float = 0.0
    truncate: bool = False
    clean: bool = False


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
        self.event_gap, self.change_share = event_gap, change_share
        self.order = list(kinds)
        self.rng.shuffle(self.order)
        self.kinds = {name: set(a.kinds(kinds)) for name, a in self.adapters.items()}
        self.turn = 0
        self.armed: dict[str, Armed] = {}
        self.log = FarmLog()
        self.t0 = time.time()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._faults_on = threading.Event()
        self._bodies: dict[str, bytes] = {n: a.render(a.doc) for n, a in self.adapters.items()}
        self._routes = {a.path: n for n, a in self.adapters.items()}
        self.deliveries: list[tuple[float, str]] = []
        """(time, source) of every clean answer written in full: a crawl's fetch just ended."""
        self._delivered = threading.Condition()
        self._thread: threading.Thread | None = None
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self._server = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def base_urls(self) -> dict[str, str]:
        """Each source's base URL on the farm (the ``source_base_urls`` setting)."""
        return {name: self.url + a.prefix for name, a in self.adapters.items()}

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

    def wait_delivery(self, after: float, timeout: float) -> tuple[float, str] | None:
        """The first clean answer written in full after ``after`` (None after ``timeout``)."""
        deadline = time.time() + timeout
        with self._delivered:
            while True:
                for at, source in self.deliveries[-50:]:
                    if at > after:
                        return at, source
                left = deadline - time.time()
                if left <= 0:
                    return None
                self._delivered.wait(min(left, 0.5))

    # ------------------------------------------------------------------ schedule

    def _schedule(self, until: float, max_events: int) -> None:
        for _ in range(max_events):
            gap = self.rng.expovariate(1 / self.event_gap)
            if self._stop.wait(min(gap, max(0.0, until - time.time()))) or time.time() >= until:
                return
            if self.rng.random() < self.change_share:
                self._change(self.rng.choice(sorted(self.adapters)))
                continue
            with self._lock:  # round-robin over the kinds, each on a free source that has it
                for step in range(len(self.order)):
                    kind = self.order[(self.turn + step) % len(self.order)]
                    free = [
                        n
                        for n in sorted(self.adapters)
                        if kind in self.kinds[n] and n not in self.armed
                    ]
                    if free:
                        break
                else:
                    continue
                self.turn += step + 1
                source = self.rng.choice(free)
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
            self._bodies[source] = adapter.render(adapter.doc)

    # ------------------------------------------------------------------ serving

    def _answer(self, source: str) -> Answer:
        with self._lock:
            now = time.time()
            self.log.requests[source] += 1
            armed = self.armed.get(source) if self._faults_on.is_set() else None
            clean = self._bodies[source]
            content_type = self.adapters[source].content_type
            if armed is None:
                for knob in self.knobs[source].values():
                    span = self.log.served.setdefault((source, knob.key, knob.amount), [now, now])
                    span[1] = now
                return Answer(200, clean, content_type=content_type, clean=True)
            armed.remaining -= 1
            if armed.remaining <= 0:
                del self.armed[source]
            self.log.faults.append({"t": now, "source": source, "kind": armed.kind})
            answer = self._fault(source, armed.kind, clean)
            answer.content_type = content_type
            return answer

    def _fault(self, source: str, kind: str, clean: bytes) -> Answer:
        adapter = self.adapters[source]
        if kind == "http_429":
            return Answer(429, b'{"error": "slow down"}', {"Retry-After": "1"})
        if kind == "http_500":
            return Answer(500, b"internal error")
        if kind == "http_503":
            return Answer(503, b"unavailable", {"Retry-After": "1"})
        if kind == "slow":
            return Answer(200, clean, delay=self.http_timeout + 1.5)
        if kind == "truncated":
            return Answer(200, clean, truncate=True)
        if kind == "invalid_json":
            return Answer(200, clean[: len(clean) // 3] + b"}{,")
        doc = copy.deepcopy(adapter.doc)
        if kind == "spike_x100":
            knobs = self.knobs[source]
            if knobs:
                knob = knobs[self.rng.choice(sorted(knobs))]
                spiked = knob.amount * 100
                knob.setter(doc, spiked)
                self.log.spikes.append((source, knob.sku, spiked))
            return Answer(200, adapter.render(doc))
        return Answer(200, adapter.mangle(kind, doc, self.rng))

    def _written(self, source: str) -> None:
        with self._delivered:
            self.deliveries.append((time.time(), source))
            del self.deliveries[:-1000]
            self._delivered.notify_all()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        farm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                try:
                    path = self.path.split("?", 1)[0]
                    if path == "/robots.txt":  # one site for every HTML source
                        self._send(Answer(200, ROBOTS, content_type="text/plain"))
                        return
                    source = farm._routes.get(path)
                    if source is None:
                        self._send(Answer(404, b"not found", content_type="text/plain"))
                        return
                    answer = farm._answer(source)
                    self._send(answer)
                    if answer.clean:
                        farm._written(source)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the crawler gave up (timeout): fine

            def _send(self, answer: Answer) -> None:
                if answer.delay:
                    time.sleep(min(answer.delay, 30.0))
                body = answer.body
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if answer.truncate:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)
                self.wfile.flush()

        return Handler


HTTP_FAULTS = {"http_429", "http_500", "http_503", "slow", "truncated"}
"""Faults the fetcher retries: armed for every attempt of one crawl (except 429)."""
