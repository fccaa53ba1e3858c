"""Country lists (EU, EEA, adequacy, US country groups) as held and in force on a date."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date

from sqlalchemy import Connection

from schema.codes import country_codes, country_name
from schema.compliance import CountryMembership
from service.compliance.versioning import all_versions, rows_on, within

MEMBERSHIP = CountryMembership.__table__  # type: ignore[attr-defined]

CountryLists = Mapping[str, frozenset[str]]
_CODE = re.compile(r"^[A-Za-z]{2}$")


class InvalidCountry(ValueError):
    """A country code is malformed or not an ISO 3166-1 alpha-2 code."""


def parse_country(value: str) -> str:
    """Upper-case ISO 3166-1 alpha-2 code, or :class:`InvalidCountry` saying what is wrong."""
    text = value.strip()
    if not _CODE.match(text):
        raise InvalidCountry(f"{value!r} is not a two-letter ISO 3166-1 alpha-2 code (e.g. DE)")
    code = text.upper()
    if code not in country_codes():
        raise InvalidCountry(f"{code!r} is not an ISO 3166-1 alpha-2 country code")
    return code


def describe(code: str) -> str | None:
    return country_name(code)


def membership_rows(conn: Connection, on: date) -> list[dict[str, object]]:
    """Membership rows as recorded on ``on`` and valid on ``on``."""
    versions = all_versions(conn, MEMBERSHIP)
    held = rows_on(versions, lambda r: (r["country"], r["list"], r["valid_from"]), on)
    return [r for r in held if within(on, r["valid_from"], r["valid_to"])]  # type: ignore[arg-type]


def country_lists(conn: Connection, on: date) -> dict[str, frozenset[str]]:
    """List name -> its member countries on ``on``."""
    lists: dict[str, set[str]] = {}
    for row in membership_rows(conn, on):
        lists.setdefault(str(row["list"]), set()).add(str(row["country"]))
    return {name: frozenset(members) for name, members in lists.items()}
