"""Named dependencies: settings, a read connection, strict query parameters, caching."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from fastapi import Depends, Path, Request, Response
from sqlalchemy import Connection, Engine

from service.api.problems import Problem
from service.core.config import Settings
from service.query.versions import current_version

CACHE_SECONDS = 300
"""Crawls run every few hours at most: five minutes of staleness is harmless."""
IMMUTABLE_SECONDS = 86400
"""A response pinned to a catalog version never changes."""


# Dependencies that neither block nor do I/O are ``async def``: FastAPI runs a plain ``def``
# dependency in the thread pool, a hand-off that costs more than the work itself.


async def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def get_engine(request: Request) -> Engine:
    return request.app.state.engine  # type: ignore[no-any-return]


def get_conn(request: Request) -> Iterator[Connection]:
    """One snapshot per request: REPEATABLE READ on PostgreSQL, a read transaction on SQLite."""
    with get_engine(request).connect() as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        yield conn


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
RowId = Annotated[int, Path(ge=1, le=2**31 - 1, description="a row id")]
"""A database id in a path: bounded, so out-of-range input is a 422, never a 500."""
ConnDep = Annotated[Connection, Depends(get_conn)]


def reject_nul(request: Request) -> None:
    """NUL characters are never meaningful (and PostgreSQL text cannot hold them)."""
    values = [*request.query_params.multi_items(), *request.path_params.items()]
    _refuse_nul(sorted({name for name, value in values if "\x00" in str(value)}))


def reject_nul_body(body: bytes) -> None:
    """The same for the strings of a JSON body (keys and values, at any depth), each named
    by its path (``filters.region``). JSON carries a NUL only escaped (``\\u0000``); a body
    that is not JSON is left to the body's own validation."""
    if b"\\u0000" not in body:
        return
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than it can be read
        return
    bad: list[str] = []
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str) and "\x00" in value:
            bad.append(path or "body")
        elif isinstance(value, dict):
            for key, item in value.items():
                name = f"{path}.{key}" if path else str(key)
                if "\x00" in key:
                    bad.append(name)
                stack.append((name, item))
        elif isinstance(value, list):
            stack.extend((f"{path}.{i}" if path else str(i), v) for i, v in enumerate(value))
    _refuse_nul(sorted(set(bad)))


def _refuse_nul(names: list[str]) -> None:
    if names:
        raise Problem(
            422,
            "Invalid parameter",
            f"invalid: {', '.join(names)}",
            kind="invalid-parameter",
            invalid_params=[{"name": n, "reason": "contains a NUL character"} for n in names],
        )


def reject_unknown_params(allowed: set[str]):  # type: ignore[no-untyped-def]
    """A dependency refusing query parameters the endpoint does not define, and a
    parameter of one value given several times (``country=DE&country=US`` would otherwise
    be answered for its last value alone). Parameters declared as lists may repeat."""

    async def check(request: Request) -> None:
        reject_nul(request)
        unknown = sorted(set(request.query_params) - allowed)
        if unknown:
            raise Problem(
                400,
                "Unknown parameter",
                f"unknown query parameter(s): {', '.join(unknown)}",
                kind="unknown-parameter",
                invalid_params=[
                    {"name": n, "reason": "not a parameter of this endpoint"} for n in unknown
                ],
            )
        names = [name for name, _ in request.query_params.multi_items()]
        if len(names) == len(request.query_params):
            return  # none repeated: the common case costs nothing more
        lists = _list_params(request.scope.get("route"))
        counts = Counter(names)
        repeated = sorted(n for n, c in counts.items() if c > 1 and n not in lists)
        if repeated:
            raise Problem(
                422,
                "Invalid parameter",
                f"invalid: {', '.join(repeated)}",
                kind="invalid-parameter",
                invalid_params=[
                    {"name": n, "reason": f"given {counts[n]} times; it takes one value"}
                    for n in repeated
                ],
            )

    return check


NO_PARAMS = [Depends(reject_unknown_params(set()))]
"""The dependencies of an endpoint that takes no query parameter at all."""


LIST_PARAMS_ATTRIBUTE = "gpuatlas_list_params"


def _list_params(route: Any) -> frozenset[str]:
    """The query parameters ``route`` (and its dependencies) declare as lists, found once
    per route and kept on it. Parameters an endpoint reads itself (``/v1/changes.atom``'s
    filters) are single-valued."""
    if route is None:
        return frozenset()
    found: frozenset[str] | None = getattr(route, LIST_PARAMS_ATTRIBUTE, None)
    if found is None:
        names: set[str] = set()
        pending = [route.dependant]
        while pending:
            dependant = pending.pop()
            pending.extend(dependant.dependencies)
            for field in dependant.query_params:
                if _takes_list(field.field_info.annotation):
                    names.add(field.alias)
        found = frozenset(names)
        setattr(route, LIST_PARAMS_ATTRIBUTE, found)
    return found


def _takes_list(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return any(_takes_list(arg) for arg in get_args(annotation))
    return origin in (list, set, tuple, frozenset) or annotation in (list, set, tuple)


def cache(response: Response, *, pinned: bool = False) -> None:
    """Set Cache-Control: a day for an answer pinned to a past version, five minutes
    otherwise. (The ETag and 304s come from the body: :mod:`service.api.conditional`.)"""
    max_age = IMMUTABLE_SECONDS if pinned else CACHE_SECONDS
    response.headers["Cache-Control"] = f"public, max-age={max_age}"


def catalog_version(response: Response, conn: ConnDep) -> int:
    """The current catalog version, with the Cache-Control header for it."""
    version = current_version(conn)
    cache(response)
    return version


VersionDep = Annotated[int, Depends(catalog_version)]
