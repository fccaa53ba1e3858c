"""Schemathesis against the app's own OpenAPI document: no 5xx, responses conform.

Bounded (a few examples per operation) so it runs in the suite, on SQLite and PostgreSQL.
Read endpoints only (writes need API keys and belong to their own tests).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)
from sqlalchemy import Engine

from service.api.main import create_app
from service.core.config import Settings
from tests.api.test_api_query import seed

EXAMPLES = 20
# Operations owned elsewhere with a bug this fuzzer found, reported to their owner; remove an
# entry once fixed. /v1/subscriptions/{id}/feed.atom: an id above 2**63 reaches SQLite (500).
KNOWN_ISSUES: set[str] = set()
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


@pytest.mark.slow
def test_no_server_errors_and_responses_conform(
    engine: Engine, settings: Settings, reference_data: None
) -> None:
    seed(engine, settings)
    app = create_app(settings.model_copy(update={"scheduler_enabled": False}))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    tested = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.method.upper() != "GET" or operation.path in KNOWN_ISSUES:
            continue

        @given(case=operation.as_strategy())
        @hypothesis_settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=CHECKS)

        run()
        tested += 1
    assert tested >= 15
