"""The page for people: the GPU overview (home), the listing with filters, offer, provider,
GPU and compare pages (HTML).

Handlers only parse, call the shared queries and render; every page links its JSON twin
under ``/v1``. Bad input re-renders the form with a message (400); unknown things get an
HTML 404. No page issues more than a fixed number of queries, whatever the catalog size.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from math import ceil
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from schema.enums import PriceKind
from schema.text import ascii_digits
from service.api.deps import ConnDep
from service.compliance import NOTICE
from service.compliance.filters import gdpr_countries
from service.query.facts import offer_context
from service.query.filters import (
    ComplianceRefused,
    ComplianceSets,
    ComplianceUnavailable,
    OfferFilters,
    resolve_compliance,
)
from service.query.history import offer_history
from service.query.offers import also_from, get_offer, list_offers
from service.query.overview import (
    EXPORT_DESTINATIONS,
    OVERVIEW_KINDS,
    BadIds,
    compare_document,
    gpu_document,
    overview_document,
    parse_compare_ids,
)
from service.query.reference import get_gpu, get_provider, list_providers
from service.query.sql import NotFound
from service.web import data
from service.web.chart import lines_chart, sparkline, step_chart
from service.web.forms import (
    GDPR_ZONES,
    PER_PAGE_CHOICES,
    SORT_LABELS,
    ListingForm,
    parse_listing,
)
from service.web.render import STATIC, path_part, render

router = APIRouter(include_in_schema=False)

CHEAPEST_ON_GPU_PAGE = 10
MAX_ID_DIGITS = 18


def mount_static(app: FastAPI) -> None:
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.state.html_not_found = not_found  # a path no route has, asked by a browser


def page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(render(template, **context), status_code=status)


def not_found(what: str) -> HTMLResponse:
    return page("not_found.html", 404, title="Not found", message=what, json_url=None)


def _choices(conn: Any) -> dict[str, Any]:
    return {
        "gpus": data.gpu_choices(conn),
        "providers": [(p["slug"], p["name"]) for p in list_providers(conn)],
        "cert_schemes": data.cert_schemes(conn),
        "price_kinds": [k.value for k in PriceKind],
        "gdpr_zones": GDPR_ZONES,
        "sort_labels": SORT_LABELS,
        "per_page_choices": PER_PAGE_CHOICES,
    }


@router.get("/offers", response_class=HTMLResponse)
def index(request: Request, conn: ConnDep) -> HTMLResponse:
    form: ListingForm = parse_listing(request.query_params)
    today = datetime.now(UTC).date()
    rows: list[dict[str, Any]] = []
    total = pages = 0
    compliance = None
    choices = _choices(conn)
    unknown = sorted(set(form.filters.cert) - set(choices["cert_schemes"]))
    if unknown:
        form.errors["cert"] = f"no certification scheme {', '.join(unknown)} on record"
    if not form.errors:
        try:
            compliance = resolve_compliance(conn, form.filters, today)
        except ComplianceUnavailable as exc:
            form.errors[exc.parameter] = "not available on this server yet"
        except ComplianceRefused as exc:
            form.errors[exc.parameter] = exc.reason
    if not form.errors:
        total = data.count_offers(conn, form.filters, compliance=compliance)
        pages = max(1, ceil(total / form.per_page))
        if form.page > pages:
            form.errors["page"] = f"past the last page ({pages})"
        else:
            rows = list_offers(
                conn,
                form.filters,
                form.per_page,
                (form.page - 1) * form.per_page,
                compliance=compliance,
                sort=form.sort,
                descending=form.descending,
            )
    ctx = offer_context(conn, rows, today)
    return page(
        "index.html",
        400 if form.errors else 200,
        title="GPU offers",
        form=form,
        rows=rows,
        ctx=ctx,
        total=total,
        pages=pages,
        json_url="/v1/offers?" + form.api_query(form.per_page),
        **choices,
    )


@router.get("/offers/{offer_id}", response_class=HTMLResponse)
def offer_page(offer_id: str, conn: ConnDep) -> HTMLResponse:
    if not ascii_digits(offer_id) or len(offer_id) > MAX_ID_DIGITS:
        return not_found(f"There is no offer {offer_id!r}.")
    number = int(offer_id)
    try:
        offer = get_offer(conn, number)
        history = offer_history(conn, number)
    except NotFound:
        return not_found(f"There is no offer {number}.")
    now = datetime.now(UTC)
    runs = data.runs_by_ids(conn, [h["crawl_run_id"] for h in history])
    return page(
        "offer.html",
        title=f"{offer['provider']} {offer['sku']} in {offer['region']}",
        offer=offer,
        history=history,
        runs=runs,
        chart=step_chart(history, now),
        ctx=offer_context(conn, [offer], now.date()),
        also_from=also_from(conn, [offer])[number],
        provider_name=data.provider_names(conn, [offer["provider"]]).get(offer["provider"]),
        json_url=f"/v1/offers/{number}",
        history_json_url=f"/v1/offers/{number}/history",
    )


@router.get("/providers/{slug}", response_class=HTMLResponse)
def provider_page(slug: str, conn: ConnDep) -> HTMLResponse:
    today = datetime.now(UTC).date()
    try:
        provider = get_provider(conn, slug, today)
    except NotFound:
        return not_found(f"There is no provider {slug!r}.")
    sources = data.provider_sources(conn, slug)
    return page(
        "provider.html",
        title=provider["name"],
        provider=provider,
        runs=data.latest_runs_of(conn, sources),
        sources=sources,
        json_url=f"/v1/providers/{path_part(slug)}",
    )


def _filtered(
    conn: Any, form: ListingForm, today: Any, choices: dict[str, Any]
) -> ComplianceSets | None:
    """The compliance sets behind the form's filters, or None with ``form.errors`` set."""
    unknown = sorted(set(form.filters.cert) - set(choices["cert_schemes"]))
    if unknown:
        form.errors["cert"] = f"no certification scheme {', '.join(unknown)} on record"
    if form.errors:
        return None
    try:
        return resolve_compliance(conn, form.filters, today)
    except ComplianceUnavailable as exc:
        form.errors[exc.parameter] = "not available on this server yet"
    except ComplianceRefused as exc:
        form.errors[exc.parameter] = exc.reason
    return None


def _overview_choices(conn: Any) -> dict[str, Any]:
    return {"cert_schemes": data.cert_schemes(conn), "gdpr_zones": GDPR_ZONES}


LISTING_ONLY = ("sort", "page", "per_page")
"""Parameters only the listing has: a link to ``/`` carrying one is an old listing link."""


@router.get("/", response_class=HTMLResponse, response_model=None)
def overview(request: Request, conn: ConnDep) -> HTMLResponse | RedirectResponse:
    if any(name in request.query_params for name in LISTING_ONLY):
        return RedirectResponse(f"/offers?{request.url.query}", status_code=308)
    form = parse_listing(request.query_params)
    today = datetime.now(UTC).date()
    choices = _overview_choices(conn)
    compliance = _filtered(conn, form, today, choices)
    doc: dict[str, Any] = {"data": [], "price_kinds": list(OVERVIEW_KINDS), "trend": {}}
    if not form.errors:
        eu = gdpr_countries(conn, today, "eu_eea")
        doc = overview_document(conn, form.filters, compliance, today, eu)
    names = data.provider_names(
        conn, [c["provider"] for g in doc["data"] for c in g["cheapest"].values() if c]
    )
    query = form.filter_query()
    return page(
        "overview.html",
        400 if form.errors else 200,
        title="GPU overview",
        form=form,
        doc=doc,
        sparks={g["slug"]: sparkline(g["trend"]) for g in doc["data"]},
        provider_names=names,
        query=query,
        json_url="/v1/overview" + (f"?{query}" if query else ""),
        **choices,
    )


@router.get("/gpus/{slug}", response_class=HTMLResponse)
def gpu_page(request: Request, slug: str, conn: ConnDep) -> HTMLResponse:
    today = datetime.now(UTC).date()
    try:
        gpu = get_gpu(conn, slug)
    except NotFound:
        return not_found(f"There is no GPU model {slug!r}.")
    form = parse_listing(request.query_params)
    choices = _overview_choices(conn)
    compliance = _filtered(conn, form, today, choices)
    destinations = list(EXPORT_DESTINATIONS)
    extra = (request.query_params.get("destination") or "").strip().upper()
    if extra and extra not in destinations:
        destinations.append(extra[:8])
    filters = form.filters if not form.errors else OfferFilters()
    doc = gpu_document(conn, gpu, filters, compliance, today, destinations)
    cheapest = list_offers(
        conn, replace(filters, gpu=gpu["slug"]), CHEAPEST_ON_GPU_PAGE, compliance=compliance
    )
    names = data.provider_names(conn, [row["provider"] for row in doc["matrix"]])
    chart = lines_chart(
        [(names.get(h["provider"], h["provider"]), h["daily"]) for h in doc["history"]],
        doc["history_start"],
        doc["history_end"],
    )
    query = form.filter_query()
    suffix = f"?{query}" if query else ""
    return page(
        "gpu.html",
        400 if form.errors else 200,
        title=gpu["name"],
        form=form,
        gpu=gpu,
        doc=doc,
        chart=chart,
        provider_names=names,
        cheapest=cheapest,
        ctx=offer_context(conn, cheapest, today),
        answers=doc["export_control"],
        today=today,
        notice=NOTICE,
        query=query,
        json_url=f"/v1/gpus/{path_part(gpu['slug'])}/overview{suffix}",
        offers_url=f"/offers?gpu={path_part(gpu['slug'])}" + (f"&{query}" if query else ""),
        **choices,
    )


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, conn: ConnDep) -> HTMLResponse:
    today = datetime.now(UTC).date()
    try:
        ids = parse_compare_ids(request.query_params.getlist("ids"))
    except BadIds as exc:
        return page(
            "compare.html", 400, title="Compare offers", error=str(exc), doc=None, json_url=None
        )
    try:
        doc = compare_document(conn, ids, today)
    except NotFound as exc:
        return not_found(f"{str(exc).capitalize()}.")
    offers = doc["data"]
    return page(
        "compare.html",
        title="Compare offers",
        error=None,
        doc=doc,
        ctx=offer_context(conn, offers, today),
        provider_names=data.provider_names(conn, [o["provider"] for o in offers]),
        json_url="/v1/compare?ids=" + ",".join(str(i) for i in ids),
    )
