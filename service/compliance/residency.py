"""GDPR zones: where personal data from the EU/EEA may go, derived from country lists.

``eu_eea``                the country is in the EU or the EEA on the date;
``adequacy``              an EU adequacy decision covers the country on the date;
``adequacy_conditional``  adequacy only for organisations in a framework (EU-US DPF: a US
                          region is adequate only if the provider's US entity is on the list);
``none``                  none of the above (a third country: transfers need safeguards).
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from sqlalchemy import Connection

from service.compliance.countries import CountryLists, country_lists, parse_country

GdprZone = Literal["eu_eea", "adequacy", "adequacy_conditional", "none"]
GDPR_ZONES: tuple[GdprZone, ...] = ("eu_eea", "adequacy", "adequacy_conditional", "none")

# the listing filter's words -> the zones they accept
GDPR_FILTERS: dict[str, tuple[GdprZone, ...]] = {
    "eu_eea": ("eu_eea",),
    "adequacy": ("eu_eea", "adequacy"),
    "any": ("eu_eea", "adequacy", "adequacy_conditional"),
}

_ZONE_LISTS: tuple[tuple[GdprZone, tuple[str, ...]], ...] = (
    ("eu_eea", ("eu", "eea")),
    ("adequacy", ("eu_adequacy",)),
    ("adequacy_conditional", ("eu_adequacy_conditional",)),
)


def gdpr_zone(country: str, lists: CountryLists) -> GdprZone:
    """The zone of ``country`` given the country lists in force (see :func:`country_lists`)."""
    for zone, names in _ZONE_LISTS:
        if any(country in lists.get(name, frozenset()) for name in names):
            return zone
    return "none"


def zone_countries(lists: CountryLists, zone: GdprZone) -> frozenset[str]:
    """Countries in ``zone`` (not for ``none``, which is every other country)."""
    if zone == "none":
        raise ValueError("'none' is every other country: filter with 'not in' the other zones")
    members: set[str] = set()
    for country in {c for names in lists.values() for c in names}:
        if gdpr_zone(country, lists) == zone:
            members.add(country)
    return frozenset(members)


def residency(conn: Connection, country: str, on: date) -> GdprZone:
    return gdpr_zone(parse_country(country), country_lists(conn, on))
