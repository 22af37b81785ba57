"""One definition per concept: the workspaces and categories are the domain's, everywhere."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import get_args

from api.schemas.memories import Category, WorkspaceType
from domain.model.values import CATEGORIES, WORKSPACES
from memledger_client import models as sdk

SDK_MODELS = "clients/python/src/memledger_client/models.py"
"""The Python SDK imports nothing of the server, so it restates the contract's workspaces."""

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_types_are_the_domain_lists() -> None:
    assert get_args(WorkspaceType) == WORKSPACES
    assert get_args(Category) == CATEGORIES


def test_the_sdk_workspaces_are_the_domain_list() -> None:
    assert get_args(sdk.WorkspaceType) == WORKSPACES


def test_no_other_code_lists_the_workspaces() -> None:
    listed = subprocess.run(
        ["git", "grep", "-l", '"learning", "teaching", "research"', "--", "*.py", ":!tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()

    assert sorted(listed) == sorted(["domain/model/values.py", SDK_MODELS])
