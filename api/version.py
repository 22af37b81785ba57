"""The installed package's version, and the version of the HTTP contract it implements."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Final

__all__ = ["CONTRACT_VERSION", "package_version"]

CONTRACT_VERSION: Final = "1"
"""The version of API_CONTRACT.md the HTTP API implements (OpenAPI `info.x-contract-version`)."""


def package_version() -> str:
    """memledger's version as installed (pyproject.toml's), or "unknown" when it is not."""
    try:
        return version("memledger")
    except PackageNotFoundError:
        return "unknown"
