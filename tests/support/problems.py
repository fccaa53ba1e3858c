"""What every error answer of the API must look like (RFC 9457 problem details)."""

from __future__ import annotations


def assert_problem(response, status: int, name: str | None = None) -> dict:  # type: ignore[no-untyped-def,type-arg]
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert {"type", "title", "status"} <= set(body) and body["status"] == status
    if name:
        assert any(p["name"] == name for p in body.get("invalid_params", [])), body
    return body
