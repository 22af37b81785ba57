"""A real server and a headless Chromium for the console's browser tests and screenshots.

The browser is Debian's `chromium` (never a downloaded one: no `playwright install`), started with
the networking features that phone home switched off, so a run needs nothing but loopback.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "chromium_available", "launch_chromium", "serving"]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START_TIMEOUT = 30.0


def chromium_available() -> bool:
    return CHROMIUM.exists()


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium, headless, driven by Playwright."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Run `app` under uvicorn on a free loopback port in a thread; yields its base URL."""
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="console-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
