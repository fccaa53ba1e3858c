"""ISO 3166-1 alpha-2 countries and ISO 4217 currencies, from pycountry."""

from __future__ import annotations

from functools import cache

import pycountry


@cache
def country_codes() -> frozenset[str]:
    return frozenset(c.alpha_2 for c in pycountry.countries)


@cache
def currency_codes() -> frozenset[str]:
    return frozenset(c.alpha_3 for c in pycountry.currencies)


def iso_country(value: str) -> str:
    """``value`` upper-cased when it is an ISO 3166-1 alpha-2 country's code; ValueError
    otherwise (two letters no country has would match nothing)."""
    code = value.upper()
    if code not in country_codes():
        raise ValueError(f"{value!r} is not an ISO 3166-1 alpha-2 country")
    return code


def country_name(code: str) -> str | None:
    country = pycountry.countries.get(alpha_2=code)
    return country.name if country else None


def country_code(name: str) -> str | None:
    """ "United States" -> "US", "Germany" -> "DE"; None when pycountry does not know it."""
    try:
        return str(pycountry.countries.lookup(name.strip()).alpha_2)
    except LookupError:
        return None
