"""Where derived model data is kept between starts (MEMLEDGER_CACHE_DIR and its default)."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.settings import Settings


@pytest.fixture(autouse=True)
def no_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLEDGER_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)


def test_the_default_is_the_users_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings().cache_dir == tmp_path / ".cache" / "memledger"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert Settings().cache_dir == tmp_path / "xdg" / "memledger"


def test_an_account_without_a_home_starts_and_keeps_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(homeless))
    assert Settings().cache_dir is None


def test_the_setting_names_a_folder_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_CACHE_DIR", "/srv/memledger-cache")
    assert Settings().cache_dir == Path("/srv/memledger-cache")
    monkeypatch.setenv("MEMLEDGER_CACHE_DIR", "")
    assert Settings().cache_dir is None
