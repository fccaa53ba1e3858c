"""RFC 9457 problem details: the one error shape of every endpoint."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_TYPE = "https://gpuatlas.dev/problems/"
RETRY_AFTER_SECONDS = 2
"""What a 503 asks clients to wait: the pool reconnects on the next request."""


class Problem(Exception):
    def __init__(
        self,
        status: int,
        title: str,
        detail: str | None = None,
        *,
        kind: str | None = None,
        invalid_params: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(detail or title)
        self.status, self.title, self.detail = status, title, detail
        self.kind = kind or title.lower().replace(" ", "-")
        self.invalid_params = invalid_params


def problem_response(
    request: Request,
    status: int,
    title: str,
    detail: str | None,
    kind: str,
    invalid_params: list[dict[str, str]] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE + kind,
        "title": title,
        "status": status,
        "instance": request.url.path,
    }
    if detail:
        body["detail"] = detail
    if invalid_params:
        body["invalid_params"] = invalid_params
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def _wants_page(request: Request) -> bool:
    """A browser asking for a page outside the API (``/gpus/a/b``): the pages' HTML 404,
    not a problem document (``/v1/...`` answers problems whatever it is asked)."""
    path = request.url.path
    accept = request.headers.get("accept", "")
    return not path.startswith("/v1/") and path != "/v1" and "text/html" in accept


def install(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(
            request, exc.status, exc.title, exc.detail, exc.kind, exc.invalid_params
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        params = []
        for error in exc.errors()[:20]:
            location = [str(p) for p in error.get("loc", ()) if p not in ("query", "path", "body")]
            params.append(
                {
                    "name": ".".join(location) or "request",
                    "reason": str(error.get("msg", "invalid")),
                }
            )
        names = ", ".join(p["name"] for p in params)
        return problem_response(
            request, 422, "Invalid parameter", f"invalid: {names}", "invalid-parameter", params
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        page = getattr(request.app.state, "html_not_found", None)
        if exc.status_code == 404 and page is not None and _wants_page(request):
            return page(f"No page at {request.url.path}")  # type: ignore[no-any-return]
        title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "HTTP error")
        detail = exc.detail if isinstance(exc.detail, str) else None
        response = problem_response(
            request, exc.status_code, title, detail, title.lower().replace(" ", "-")
        )
        response.headers.update(exc.headers or {})  # a 405's Allow
        return response

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
        # The database is unreachable, restarting or was cut mid-request (the pool pings
        # and reconnects on the next checkout): a temporary condition, not a server bug.
        response = problem_response(
            request,
            503,
            "Database unavailable",
            "the catalog database did not answer; retry shortly",
            "database-unavailable",
        )
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        return problem_response(request, 500, "Internal error", None, "internal-error")


PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "type": "object",
    "description": "RFC 9457 problem details: the one error shape of every endpoint.",
    "required": ["type", "title", "status"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "instance": {"type": "string"},
        "detail": {"type": "string"},
        "invalid_params": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "reason"],
                "properties": {"name": {"type": "string"}, "reason": {"type": "string"}},
            },
        },
    },
}
ERRORS = {
    "400": "Bad request: an unknown parameter, a cursor this server did not issue",
    "404": "Not found",
    "422": "Invalid parameter (named in invalid_params)",
    "503": "Database unavailable (temporary; see Retry-After)",
}


def document(app: FastAPI) -> None:
    """Publish the problem shape in the OpenAPI document for every operation's errors."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        spec = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas = spec.setdefault("components", {}).setdefault("schemas", {})
        schemas["Problem"] = PROBLEM_SCHEMA
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        body = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
        for path in spec.get("paths", {}).values():
            for method, operation in path.items():
                responses = operation.setdefault("responses", {})
                for status, description in ERRORS.items():
                    responses[status] = {"description": description, "content": body}
                if method == "get":
                    responses.setdefault(
                        "304", {"description": "Not modified (If-None-Match matched the ETag)"}
                    )
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
