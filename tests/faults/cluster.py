"""A private PostgreSQL 15 cluster the fault suite may stop, restart and remove.

Never the shared server: initdb into a fresh temporary folder, on a free loopback port, run
as the `postgres` OS user when this runs as root (initdb refuses root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["BIN", "PrivateCluster"]

BIN = Path("/usr/lib/postgresql/15/bin")


class PrivateCluster:
    """`start()`, `stop()`, `restart()` and, at the end, `remove()` (stops it first)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.root = Path(tempfile.mkdtemp(prefix="memledger-faults-"))
        self.data = self.root / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self._as_postgres = os.geteuid() == 0
        try:
            if self._as_postgres:
                shutil.chown(self.root, "postgres", "postgres")
            initdb = (BIN / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres")
            self._run(*initdb, "--no-sync")
            with (self.data / "postgresql.conf").open("a") as conf:
                conf.write(
                    f"port = {port}\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{self.root}'\n"
                    "fsync = off\nfull_page_writes = off\nshared_buffers = 32MB\n"
                    "max_connections = 100\n"
                )
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _run(self, *command: object, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        argv = [str(part) for part in command]
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(argv, capture_output=True, check=check, timeout=60)

    def _ctl(self, *args: str, check: bool = True) -> None:
        log = self.root / "server.log"
        self._run(BIN / "pg_ctl", "-D", self.data, "-l", log, "-w", "-t", "30", *args, check=check)

    def start(self) -> None:
        """Start and wait until it accepts connections."""
        self._ctl("start")

    def stop(self) -> None:
        """Fast shutdown: sessions are ended (AdminShutdown), committed work is kept."""
        self._ctl("stop", "-m", "fast")

    def restart(self) -> None:
        """Fast shutdown, then start again."""
        self._ctl("restart", "-m", "fast")

    def remove(self) -> None:
        """Stop it (whatever state it is in) and delete its folder."""
        self._ctl("stop", "-m", "immediate", check=False)
        shutil.rmtree(self.root, ignore_errors=True)
