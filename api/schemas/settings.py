"""Request and response models of the memory settings API (API_CONTRACT.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

__all__ = ["SettingsOut", "SettingsPatch"]

_SAVED = "Whether the agent tools may use saved memories at all (false denies every tool)."
_EXTRACT = "Whether the agent may propose memories it inferred (false denies propose only)."


class SettingsOut(BaseModel):
    """The caller's memory settings; they govern the agent tools only."""

    saved_memory_enabled: bool = Field(description=_SAVED)
    auto_extract_enabled: bool = Field(description=_EXTRACT)


class SettingsPatch(BaseModel):
    """PATCH /me/memory-settings: at least one switch; the other keeps its value."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"auto_extract_enabled": False}, {"saved_memory_enabled": True}]
        },
    )
    saved_memory_enabled: StrictBool | None = Field(default=None, description=_SAVED)
    auto_extract_enabled: StrictBool | None = Field(default=None, description=_EXTRACT)

    @field_validator("saved_memory_enabled", "auto_extract_enabled", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must be true or false, not null")
        return value

    @model_validator(mode="after")
    def _at_least_one(self) -> SettingsPatch:
        if not self.model_fields_set:
            raise ValueError("give saved_memory_enabled, auto_extract_enabled or both")
        return self
