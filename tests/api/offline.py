"""An app over mocked services, for tests whose requests never reach the database."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

from api.app import create_app
from api.metrics import Metrics


def offline_app() -> Any:
    services = MagicMock()
    services.metrics = Metrics()
    # The middlewares read real numbers: a mocked deadline leaves the TestClient portal hanging.
    services.request_deadline = None
    services.max_body_bytes = 64 * 1024
    services.retry_after = 1
    services.max_concurrency = 0  # no cap (a mock's would fail every request)
    return create_app(services)
