"""Schemathesis against the app's own OpenAPI schema: no 5xx, no response off its schema.

Bounded for CI (a handful of examples per operation); raise MEMLEDGER_FUZZ_EXAMPLES locally
for a deeper run.
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from api.deps import Services, mint_token

JWT_SECRET = "test-secret-of-at-least-32-bytes-long!"  # as in tests/conftest.py
EXAMPLES = int(os.environ.get("MEMLEDGER_FUZZ_EXAMPLES", "8"))
CHECKS = (
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
)


def test_the_api_keeps_its_own_schema(services: Services) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(services))
    token = mint_token(JWT_SECRET, "fuzzer", workspace="learning", roles=["auditor"])
    headers = {"Authorization": f"Bearer {token}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20  # every endpoint of the contract is in the schema

    calls: dict[str, int] = {}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def keeps_schema(case: Any) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)
            calls[case.operation.label] = calls.get(case.operation.label, 0) + 1

        keeps_schema()
    assert len(calls) == len(operations)  # every operation was called, and passed every check
    print(f"schemathesis: {sum(calls.values())} calls over {len(calls)} operations, all checks")
