"""Listing filters resolved to plain sets, for the query service.

Each helper takes a connection and a day and returns a set the caller can use in
``IN`` / ``NOT IN`` clauses; all read the versions the catalog held on that day.

* :func:`providers_with_certs` — ``cert=`` (repeatable: every scheme required);
* :func:`gdpr_countries` — ``gdpr=eu_eea|adequacy|any``;
* :func:`gpus_needing_licence` — ``export_destination=CC``;
* :func:`providers_hq_in` — ``provider_hq_not_in=``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime

from sqlalchemy import Connection, select

from schema.catalog import Provider
from service.compliance.certifications import CertStatus, certifications_on, select_valid
from service.compliance.countries import country_lists, parse_country
from service.compliance.queries import export_answers
from service.compliance.residency import GDPR_FILTERS, zone_countries

PROVIDER = Provider.__table__  # type: ignore[attr-defined]


def _today() -> date:
    return datetime.now(UTC).date()


def providers_with_certs(
    conn: Connection,
    schemes: Sequence[str],
    on: date | None = None,
    *,
    cert_status: CertStatus = "certified",
    region: str | None = None,
) -> set[str]:
    """Providers holding every scheme in ``schemes`` on ``on``.

    Whole-provider scope only unless ``region`` is given (a region-scoped certificate does not
    make the whole provider certified). ``cert_status='reported'`` also accepts ``reported``.
    """
    day = on or _today()
    wanted = set(schemes)
    held: dict[str, set[str]] = {}
    for cert in select_valid(certifications_on(conn, day), day, cert_status=cert_status):
        if region is None and cert.regions is not None:
            continue
        if region is not None and not cert.covers(region):
            continue
        held.setdefault(cert.provider, set()).add(cert.scheme)
    return {provider for provider, schemes_held in held.items() if wanted <= schemes_held}


def gdpr_countries(conn: Connection, on: date | None = None, zone: str = "adequacy") -> set[str]:
    """Countries accepted by ``gdpr=<zone>`` on ``on``.

    ``eu_eea``: EU/EEA only; ``adequacy`` (the default, what "GDPR region" means here):
    EU/EEA plus adequacy countries; ``any``: also the conditional case (the US under the DPF).
    """
    if zone not in GDPR_FILTERS:
        raise ValueError(f"gdpr: use one of {', '.join(GDPR_FILTERS)}")
    lists = country_lists(conn, on or _today())
    members: set[str] = set()
    for accepted in GDPR_FILTERS[zone]:
        members |= zone_countries(lists, accepted)
    return members


def gpus_needing_licence(
    conn: Connection, destination: str, on: date | None = None, *, include_unknown: bool = True
) -> set[str]:
    """GPU slugs whose export to ``destination`` needs a licence on ``on``.

    With ``include_unknown`` (the default) GPUs whose answer is unknown are included too, so
    an ``export_destination`` filter never shows an offer it cannot vouch for. Raises
    ``NoRuleSet`` when no rule set is in force on the day, ``InvalidCountry`` for a bad code.
    """
    country = parse_country(destination)
    answers = export_answers(conn, country, on or _today())
    return {
        slug
        for slug, answer in answers.items()
        if answer.licence_required is True or (include_unknown and answer.licence_required is None)
    }


def gpu_classifications(conn: Connection, on: date | None = None) -> dict[str, tuple[str, str]]:
    """GPU slug -> (ECCN, basis) on ``on``; the destination does not matter for this."""
    answers = export_answers(conn, "US", on or _today())
    return {slug: (a.eccn, a.basis) for slug, a in answers.items()}


def providers_hq_in(conn: Connection, countries: Iterable[str]) -> set[str]:
    """Providers headquartered in any of ``countries`` (for ``provider_hq_not_in``)."""
    codes = [parse_country(c) for c in countries]
    stmt = select(PROVIDER.c.slug).where(PROVIDER.c.hq_country.in_(codes))
    return set(conn.execute(stmt).scalars())
