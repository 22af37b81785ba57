"""Routes of API_CONTRACT.md: audit (being built)."""

from __future__ import annotations

from fastapi import APIRouter

__all__ = ["router"]

router = APIRouter()
