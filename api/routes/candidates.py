"""Routes of API_CONTRACT.md: candidates (being built)."""

from __future__ import annotations

from fastapi import APIRouter

__all__ = ["router"]

router = APIRouter()
