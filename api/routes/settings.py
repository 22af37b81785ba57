"""Management API: the caller's memory settings (API_CONTRACT.md, 'Management API')."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import CurrentIdentity, ServicesDep
from api.schemas.settings import SettingsOut, SettingsPatch
from api.user_route import UserRoute
from domain.model.memory_settings import SettingsState
from service import settings

__all__ = ["router"]

router = APIRouter(prefix="/me/memory-settings", tags=["settings"], route_class=UserRoute)


def _out(view: SettingsState) -> SettingsOut:
    return SettingsOut(
        saved_memory_enabled=view.saved_memory_enabled,
        auto_extract_enabled=view.auto_extract_enabled,
    )


@router.get("", response_model=SettingsOut)
def get_settings(identity: CurrentIdentity, services: ServicesDep) -> SettingsOut:
    """The caller's settings (both true until changed)."""
    return _out(settings.current(services, identity))


@router.patch("", response_model=SettingsOut)
def change_settings(
    body: SettingsPatch, identity: CurrentIdentity, services: ServicesDep
) -> SettingsOut:
    """Turn the agent tools' use of memory, or their proposals, on or off."""
    view = settings.change(
        services,
        identity,
        saved_memory_enabled=body.saved_memory_enabled,
        auto_extract_enabled=body.auto_extract_enabled,
    )
    return _out(view)
