"""The listing form: raw query strings -> OfferFilters, sort and page, or friendly errors.

Empty fields mean "not set" (a submitted HTML form sends every field). Values are checked
here rather than by FastAPI so a bad value re-renders the form with a message (HTTP 400)
instead of a JSON problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlencode

from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import QueryParams

from schema.codes import country_codes
from schema.compliance import CERT_SCHEMES
from schema.enums import Interconnect, Network, PriceKind
from schema.text import ascii_digits
from schema.types import NUMERIC_SCALE, within_scale
from service.query.filters import OfferFilters
from service.query.sql import SORT_KEYS

PER_PAGE_CHOICES = (25, 50, 100)
DEFAULT_PER_PAGE = 50
MAX_PAGE = 100_000
GDPR_ZONES = ("eu_eea", "adequacy", "any")
SORT_LABELS = {
    "price_per_gpu_hour": "USD per GPU-hour",
    "price": "USD per hour (instance)",
    "price_per_pflop_hour": "USD per PFLOP-hour (BF16)",
    "gpu_count": "GPU count",
    "provider": "provider",
}
FORM_FIELDS = (
    "gpu",
    "min_gpus",
    "provider",
    "country",
    "gdpr",
    "cert",
    "export_destination",
    "price_kind",
    "max_price_per_gpu_hour",
    "interconnect",
    "network",
    "min_network_gbps",
)
URL_FIELDS = (
    "max_gpus",
    "min_gpu_memory_gb",
    "region",
    "not_country",
    "provider_hq_not_in",
    "source",
    "bare_metal",
)
"""The API's listing filters the pages take as URL parameters without a field of their
own: kept in every link and in the form (hidden), so a URL copied from the API answers
the same here."""
FILTER_FIELDS = FORM_FIELDS + URL_FIELDS
SHARED_FIELDS = frozenset(
    {"gdpr", "cert", "export_destination", "interconnect", "network", "min_network_gbps"}
)
"""The fields of ``templates/_filters.html``, on every page's form."""
LISTS = frozenset({"provider", "not_country", "provider_hq_not_in", "cert"})
"""Fields that take several values, repeated or comma-separated (as the API's)."""
NOT_HERE = ("as_of", "include_peers")
"""The API's listing parameters no page takes: refused by name, never ignored."""
BOOLEAN: TypeAdapter[bool] = TypeAdapter(bool)
"""A yes/no parameter read as the API reads it (pydantic's words: true/false, 1/0, yes/no,
on/off...)."""
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}$")
MAX_NUMBER = Decimal(1_000_000)


@dataclass
class ListingForm:
    """What the visitor asked for, as typed (for redisplay) and as parsed."""

    values: dict[str, Any] = field(default_factory=dict)
    """Field name -> the text (or list of texts for ``cert``) to put back in the form."""
    errors: dict[str, str] = field(default_factory=dict)
    filters: OfferFilters = field(default_factory=OfferFilters)
    sort: str = "price_per_gpu_hour"
    descending: bool = False
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE

    interconnects = tuple(kind.value for kind in Interconnect)
    """The choices of the interconnect field."""
    networks = tuple(kind.value for kind in Network)
    """The choices of the network field."""

    @property
    def sort_param(self) -> str:
        return ("-" if self.descending else "") + self.sort

    def query(self, **changes: Any) -> str:
        """This listing's query string, with ``changes`` applied (None removes a key)."""
        items: list[tuple[str, str]] = []
        state: dict[str, Any] = {
            **{k: v for k, v in self.values.items() if v not in (None, "", [])},
            "sort": None if self.sort_param == "price_per_gpu_hour" else self.sort_param,
            "page": None if self.page == 1 else str(self.page),
            "per_page": None if self.per_page == DEFAULT_PER_PAGE else str(self.per_page),
        }
        state.update(changes)
        for key in (*FILTER_FIELDS, "sort", "per_page", "page"):
            value = state.get(key)
            if value in (None, "", []):
                continue
            if isinstance(value, list):
                items.extend((key, str(v)) for v in value)
            else:
                items.append((key, str(value)))
        return urlencode(items)

    def hidden_items(self, shown: Iterable[str] = ()) -> list[tuple[str, str]]:
        """The filters set that the page's form has no field for (``shown``: the page's
        own fields, beside the shared ones of ``_filters.html``): its hidden inputs, so
        that submitting the form keeps them."""
        visible = {*SHARED_FIELDS, *shown}
        return [
            (k, str(v))
            for k in FILTER_FIELDS
            if k not in visible and (v := self.values.get(k)) not in (None, "", [])
        ]

    def _filter_items(self) -> list[tuple[str, str]]:
        items: list[tuple[str, str]] = []
        for key in FILTER_FIELDS:
            value = self.values.get(key)
            if value in (None, "", []):
                continue
            if isinstance(value, list):
                items.extend((key, str(v)) for v in value)
            else:
                items.append((key, str(value)))
        return items

    def filter_query(self) -> str:
        """The filters alone (no sort, no page): what the overview, a GPU page and the
        listing carry over to each other, and what their JSON twins take."""
        return urlencode(self._filter_items())

    def api_query(self, limit: int) -> str:
        """The JSON twin's query string (``/v1/offers``): same filters, same sort."""
        items = self._filter_items()
        if self.sort_param != "price_per_gpu_hour":
            items.append(("sort", self.sort_param))
        items.append(("limit", str(limit)))
        return urlencode(items)


def _text(params: QueryParams, name: str, limit: int = 100) -> str:
    return (params.get(name) or "").strip()[:limit]


def _decimal(form: ListingForm, name: str, text: str) -> Decimal | None:
    if not text:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        form.errors[name] = "not a number"
        return None
    if not value.is_finite() or value < 0 or value > MAX_NUMBER:
        form.errors[name] = "a number from 0 to 1,000,000"
        return None
    try:
        return within_scale(value)
    except ValueError:
        form.errors[name] = f"at most {NUMERIC_SCALE} decimal places"
        return None


def _int(form: ListingForm, name: str, text: str, low: int, high: int) -> int | None:
    if not text:
        return None
    if not ascii_digits(text) or not low <= int(text) <= high:
        form.errors[name] = f"a whole number from {low} to {high:,}"
        return None
    return int(text)


def _country(form: ListingForm, name: str, text: str) -> str | None:
    if not text:
        return None
    code = text.upper()
    if code not in country_codes():
        form.errors[name] = "a two-letter ISO 3166-1 country code (e.g. DE)"
        return None
    return code


def _slug(form: ListingForm, name: str, text: str) -> str | None:
    if not text:
        return None
    if not SLUG.match(text):
        form.errors[name] = "letters, digits and - _ . : + only"
        return None
    return text


def _words(values: list[str], *, lower: bool = True) -> list[str]:
    """Repeated or comma-separated words (as the API takes them), trimmed (and
    lower-cased), each once, in the order given."""
    words: list[str] = []
    for value in values:
        for part in value.split(","):
            word = part.strip()[:64]
            word = word.lower() if lower else word
            if word and word not in words:
                words.append(word)
    return words


def _listed(params: QueryParams, name: str) -> str:
    """A list field's values, repeated or comma-separated, as one comma-separated text."""
    return ",".join(_words(params.getlist(name), lower=False))[:400]


def _countries(form: ListingForm, name: str, text: str) -> list[str]:
    codes = [_country(form, name, part) for part in text.split(",") if part]
    return [] if name in form.errors else [c for c in codes if c]


def _boolean(form: ListingForm, name: str, text: str) -> bool | None:
    if not text:
        return None
    try:
        return BOOLEAN.validate_python(text)
    except ValidationError:
        form.errors[name] = "true or false"
        return None


def parse_listing(params: QueryParams) -> ListingForm:
    form = ListingForm()
    values: dict[str, Any] = {
        name: _listed(params, name) if name in LISTS else _text(params, name)
        for name in FILTER_FIELDS
        if name != "cert"
    }
    certs = _words(params.getlist("cert"))
    form.values = {**values, "cert": certs}
    for name in (*FILTER_FIELDS, "sort", "page", "per_page"):
        if name not in LISTS and len(params.getlist(name)) > 1:
            form.errors[name] = "given more than once: give it once"
    for name in NOT_HERE:
        if name in params:
            form.errors[name] = "not taken by this page (the JSON twin, /v1/offers, takes it)"

    gpu = _slug(form, "gpu", values["gpu"])
    providers = [p for p in values["provider"].split(",") if _slug(form, "provider", p)]
    min_gpus = _decimal(form, "min_gpus", values["min_gpus"])
    max_gpus = _decimal(form, "max_gpus", values["max_gpus"])
    if min_gpus is not None and max_gpus is not None and min_gpus > max_gpus:
        form.errors["min_gpus"] = "greater than max_gpus"
    min_memory = _decimal(form, "min_gpu_memory_gb", values["min_gpu_memory_gb"])
    not_country = _countries(form, "not_country", values["not_country"])
    hq_not_in = _countries(form, "provider_hq_not_in", values["provider_hq_not_in"])
    source = _slug(form, "source", values["source"])
    region = values["region"] or None
    bare_metal = _boolean(form, "bare_metal", values["bare_metal"])
    max_price = _decimal(form, "max_price_per_gpu_hour", values["max_price_per_gpu_hour"])
    country = _country(form, "country", values["country"])
    destination = _country(form, "export_destination", values["export_destination"])
    gdpr = values["gdpr"] or None
    if gdpr is not None and gdpr not in GDPR_ZONES:
        form.errors["gdpr"] = f"one of {', '.join(GDPR_ZONES)}"
        gdpr = None
    price_kind = values["price_kind"] or None
    if price_kind is not None and price_kind not in {k.value for k in PriceKind}:
        form.errors["price_kind"] = "not a known price kind"
        price_kind = None
    interconnect = values["interconnect"] or None
    if interconnect is not None and interconnect not in ListingForm.interconnects:
        form.errors["interconnect"] = f"one of {', '.join(ListingForm.interconnects)}"
        interconnect = None
    network = values["network"] or None
    if network is not None and network not in ListingForm.networks:
        form.errors["network"] = f"one of {', '.join(ListingForm.networks)}"
        network = None
    min_network = _decimal(form, "min_network_gbps", values["min_network_gbps"])
    for cert in certs:
        if cert not in CERT_SCHEMES:
            form.errors["cert"] = f"not a certification scheme (one of {', '.join(CERT_SCHEMES)})"

    sort = _text(params, "sort") or "price_per_gpu_hour"
    descending = sort.startswith("-")
    key = sort.removeprefix("-")
    if key not in SORT_KEYS:
        form.errors["sort"] = f"one of {', '.join(SORT_KEYS)}"
        key, descending = "price_per_gpu_hour", False
    form.sort, form.descending = key, descending

    per_page = _int(form, "per_page", _text(params, "per_page"), 1, max(PER_PAGE_CHOICES))
    form.per_page = per_page or DEFAULT_PER_PAGE
    form.page = _int(form, "page", _text(params, "page"), 1, MAX_PAGE) or 1

    form.filters = OfferFilters(
        gpu=gpu,
        provider=tuple(providers) or None,
        country=country,
        price_kind=price_kind,
        min_gpus=min_gpus,
        gdpr=gdpr,
        cert=tuple(certs) if "cert" not in form.errors else (),
        export_destination=destination,
        max_price_per_gpu_hour=max_price,
        interconnect=(interconnect,) if interconnect else (),
        network=(network,) if network else (),
        min_network_gbps=min_network,
        max_gpus=max_gpus,
        min_gpu_memory_gb=min_memory,
        region=region,
        not_country=tuple(not_country),
        provider_hq_not_in=tuple(hq_not_in),
        source=source,
        bare_metal=bare_metal,
    )
    return form
