"""Catalog versions, diffs between them, the change feed, and crawl sources."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from schema.api import ChangesPage, DiffPage, VersionPublic
from service.api import cursor as cursors
from service.api.deps import (
    NO_PARAMS,
    ConnDep,
    SettingsDep,
    VersionDep,
    cache,
    reject_unknown_params,
)
from service.api.params import invalid
from service.api.serialize import change_public
from service.crawl.schedules import next_runs
from service.crawl.sources import list_sources
from service.query.runs import last_runs
from service.query.versions import change_feed, current_version, diff_versions, list_versions

router = APIRouter(prefix="/v1", tags=["catalog"])

Limit = Annotated[int, Query(ge=1, le=1000)]
Cursor = Annotated[str | None, Query(max_length=500)]
VersionNumber = Annotated[int, Query(ge=0, le=2**31 - 1)]


@router.get(
    "/versions",
    response_model=list[VersionPublic],
    dependencies=[Depends(reject_unknown_params({"limit", "before"}))],
)
def versions(
    conn: ConnDep,
    version: VersionDep,
    limit: Limit = 100,
    before: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> list[VersionPublic]:
    return [VersionPublic.model_validate(r) for r in list_versions(conn, limit, before)]


def _check_version(name: str, value: int, latest: int) -> None:
    if value > latest:
        raise invalid(name, f"version {value} does not exist (latest {latest})")


def _int_cursor(cursor: str, *keys: str) -> list[int]:
    state = cursors.decode(cursor)
    return [cursors.integer(state.get(k)) for k in keys]


@router.get(
    "/diff",
    response_model=DiffPage,
    dependencies=[Depends(reject_unknown_params({"from", "to", "limit", "cursor"}))],
)
def diff(
    response: Response,
    conn: ConnDep,
    old: Annotated[int, Query(alias="from", ge=0, le=2**31 - 1)],
    new: Annotated[int | None, Query(alias="to", ge=0, le=2**31 - 1)] = None,
    limit: Limit = 1000,
    cursor: Cursor = None,
) -> DiffPage:
    latest = current_version(conn)
    after = 0
    if cursor:  # a page of one diff: its versions, ``to`` kept when it was left out
        state = cursors.decode(cursor)
        after = cursors.integer(state.get("o"))
        if "f" in state:  # (a cursor issued before 2026-12-06 names neither)
            issued_from, issued_to = cursors.integer(state["f"]), cursors.integer(state.get("t"))
            if issued_from != old or (new is not None and issued_to != new):
                raise invalid("cursor", "not a cursor for this diff", status=400)
            new = issued_to
    new = latest if new is None else new
    _check_version("from", old, latest)
    _check_version("to", new, latest)
    cache(response, pinned=True)
    changes, last = diff_versions(conn, old, new, after_offer=after, limit=limit)
    following = {"f": old, "t": new, "o": last}
    return DiffPage(
        from_version=old,
        to_version=new,
        data=[change_public(c) for c in changes],  # type: ignore[misc]
        next_cursor=cursors.encode(following) if last is not None else None,
    )


@router.get(
    "/changes",
    response_model=ChangesPage,
    dependencies=[Depends(reject_unknown_params({"since", "limit", "cursor"}))],
    description="Every price change after version `since`, oldest first. Poll with the "
    "`catalog_version` you last saw as `since`, following `next_cursor` until it is null.",
)
def changes(
    response: Response,
    conn: ConnDep,
    since: VersionNumber = 0,
    limit: Limit = 1000,
    cursor: Cursor = None,
) -> ChangesPage:
    latest = current_version(conn)
    until = latest
    after = (since, 0)
    if cursor:
        until, version, offer_id = _int_cursor(cursor, "u", "v", "o")
        if until > latest or not since <= version <= until:
            raise invalid("cursor", "not a cursor for this feed", status=400)
        after = (version, offer_id)
    cache(response, pinned=until != latest)
    rows, last = change_feed(conn, since, until, after=after, limit=limit)
    next_cursor = cursors.encode({"u": until, "v": last[0], "o": last[1]}) if last else None
    return ChangesPage(
        since=since,
        until=until,
        data=[change_public(c) for c in rows],  # type: ignore[misc]
        next_cursor=next_cursor,
        catalog_version=latest,
    )


@router.get("/sources", dependencies=NO_PARAMS)
def sources(conn: ConnDep, version: VersionDep, settings: SettingsDep) -> list[dict[str, Any]]:
    runs = last_runs(conn)
    known = list_sources(conn)
    schedule = next_runs(
        settings,
        {name: info["schedule"] for name, info in known.items()},
        {name: run["started_at"] for name, run in runs.items()},
    )
    keys = (
        "id",
        "status",
        "reason",
        "started_at",
        "finished_at",
        "seen",
        "added",
        "changed",
        "withdrawn",
        "rejected",
        "unmapped",
    )
    result = []
    for name, info in known.items():
        last = runs.get(name)
        result.append(
            {
                "name": name,
                "provider": info["provider"],
                "kind": info["kind"],
                "schedule": info["schedule"],
                **schedule.get(name, {}),
                "last_run": {k: last[k] for k in keys} if last else None,
            }
        )
    return result
