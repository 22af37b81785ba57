"""Schemathesis against the app's own OpenAPI schema: no 5xx, no response off its schema, no
undocumented status, invalid data rejected, authentication never ignored.

Bounded for CI (a handful of examples per operation); raise MEMLEDGER_FUZZ_EXAMPLES locally
for a deeper run.
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import CHECKS as REGISTERED
from schemathesis.specs.openapi import checks as openapi_checks  # registers the OpenAPI checks

from api.app import create_app
from api.services import Services
from api.tokens import mint_token

JWT_SECRET = "test-secret-of-at-least-32-bytes-long!"  # as in tests/conftest.py
EXAMPLES = int(os.environ.get("MEMLEDGER_FUZZ_EXAMPLES", "8"))
CHECKS = tuple(c for c in REGISTERED.get_all() if c.__name__ != "positive_data_acceptance")
"""Every check schemathesis has but one: "a schema-valid request is accepted" cannot hold for an
opaque pagination cursor (any string is schema-valid, only ours parse: 422) nor for the domain's
own rules (a content rule or a revision conflict answers 422 / 409 to schema-valid bodies)."""


def test_the_api_keeps_its_own_schema(services: Services) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(services))
    token = mint_token(JWT_SECRET, "fuzzer", workspace="learning", roles=["auditor"])
    headers = {"Authorization": f"Bearer {token}"}
    assert len(CHECKS) >= 12 and openapi_checks.ignored_auth in CHECKS
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
    print(f"schemathesis: {sum(calls.values())} calls, {len(calls)} operations", end=" ")
    print(f"and {len(CHECKS)} checks")
