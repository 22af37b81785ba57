"""The secrets a process runs with, from settings: the token signing secret and the master keys.

Configured (`MEMLEDGER_JWT_SECRET`, `MEMLEDGER_MASTER_KEY` or `MEMLEDGER_MASTER_KEY_FILE`), or
in dev mode generated once under the data folder (`jwt.secret`, `master.key`, mode 0600) and
read back by every command that runs with `--dev` there (`serve`, `mcp`, `token`, the operator
commands). Missing outside dev mode: KeyringError (exit 2, api/cli/common.py).
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

from api.settings import Settings
from domain.ledger.keyring import KeyringError, MasterKeyring, generate_master_key

__all__ = ["MIN_JWT_SECRET_BYTES", "dev_secret", "jwt_secret", "master_keyring"]


MIN_JWT_SECRET_BYTES: Final = 32


def dev_secret(settings: Settings, name: str, make: Callable[[], str]) -> Path:
    """A secret file under the data folder, generated once (local development only)."""
    path = settings.data_dir / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(make() + "\n")
        print(f"memledger: dev mode generated {path}", file=sys.stderr)
    return path


def jwt_secret(settings: Settings) -> str:
    """The token signing secret (at least 32 bytes); in dev mode a generated one."""
    if settings.jwt_secret is not None:
        secret, source = settings.jwt_secret.get_secret_value(), "MEMLEDGER_JWT_SECRET"
    elif settings.dev:
        path = dev_secret(settings, "jwt.secret", lambda: secrets.token_urlsafe(32))
        secret, source = path.read_text().strip(), str(path)
    else:
        raise KeyringError(f"MEMLEDGER_JWT_SECRET is required (or use --dev{_dev_hint(settings)})")
    # HS256 is only as strong as its key: RFC 7518 section 3.2 asks for at least 256 bits.
    if len(secret.encode()) < MIN_JWT_SECRET_BYTES:
        raise KeyringError(
            f"{source} must be at least {MIN_JWT_SECRET_BYTES} bytes "
            f"(it has {len(secret.encode())}); e.g. `openssl rand -base64 32`"
        )
    return secret


def master_keyring(settings: Settings) -> MasterKeyring:
    """The master keys from settings; in dev mode a generated key file under the data folder."""
    if settings.master_key is not None:
        return MasterKeyring.from_base64(settings.master_key.get_secret_value().split(","))
    path = settings.master_key_file
    if path is None and settings.dev:
        path = dev_secret(settings, "master.key", generate_master_key)
    if path is None:
        raise KeyringError(
            "no master key: set MEMLEDGER_MASTER_KEY or MEMLEDGER_MASTER_KEY_FILE"
            f" (or use --dev{_dev_hint(settings)})"
        )
    return MasterKeyring.from_base64(_key_lines(path))


def _dev_hint(settings: Settings) -> str:
    """Where `serve --dev` keeps its secrets, when it ran in this data folder."""
    if (settings.data_dir / "master.key").exists():
        return f": `serve --dev` keeps its secrets in {settings.data_dir}"
    return ""


def _key_lines(path: Path) -> list[str]:
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]
