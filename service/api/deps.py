"""Named dependencies: settings, a read connection, strict query parameters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Connection, Engine

from service.api.problems import Problem
from service.config import Settings


def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def get_engine(request: Request) -> Engine:
    return request.app.state.engine  # type: ignore[no-any-return]


def get_conn(engine: Annotated[Engine, Depends(get_engine)]) -> Iterator[Connection]:
    with engine.connect() as conn:
        yield conn


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
ConnDep = Annotated[Connection, Depends(get_conn)]


def reject_unknown_params(allowed: set[str]):  # type: ignore[no-untyped-def]
    """A dependency refusing query parameters the endpoint does not define."""

    def check(request: Request) -> None:
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

    return check
