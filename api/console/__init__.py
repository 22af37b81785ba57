"""The web console: static assets under /console, talking to the public HTTP API only.

`mount_console(app)` serves the bundled assets (no CDN, no build step); `console_link(base_url,
token)` is the ready sign-in link dev mode prints. See docs/console.md.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["ASSETS", "PATH", "console_link", "mount_console"]

PATH = "/console"
ASSETS = Path(__file__).with_name("static")

# The page loads only its own files and calls only its own origin; nothing may frame it.
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",  # revalidate (ETag): an upgrade never mixes old and new modules
}


class _ConsoleFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(_HEADERS)
        return response


def mount_console(app: FastAPI) -> None:
    """Serve the console at /console/ (and redirect /console there); not part of the OpenAPI."""

    @app.get(PATH, include_in_schema=False)
    def console_root() -> RedirectResponse:
        return RedirectResponse(f"{PATH}/", status_code=308)

    app.mount(PATH, _ConsoleFiles(directory=ASSETS, html=True), name="console")


def console_link(base_url: str, token: str) -> str:
    """A sign-in link: the token rides in the fragment (#token=…), which never reaches a server."""
    return f"{base_url.rstrip('/')}{PATH}/#token={quote(token, safe='')}"
