"""The OpenAPI document and its pages: hand-named operationIds, examples, offline /docs.

    app = FastAPI(..., docs_url=None, redoc_url=None, generate_unique_id_function=operation_id)
    document(app)      # app.openapi(): the examples of api.openapi_examples, the contract version
    mount_docs(app)    # /docs and /redoc from local assets, nothing from another origin

Every operation is named here by method and path (`createMemory`, `searchCoreMemories`):
names are part of the contract generated clients compile against, so renaming a Python
function must not rename an operation. A route missing from the table falls back to its
function name in camelCase, and `tests/api/test_openapi.py` fails until it is named here.
The bearer security scheme comes from `api.deps` (every operation that needs a token says so).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from typing import Any, Final

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from api.openapi_examples import OPERATION_EXAMPLES, SCHEMA_EXAMPLES
from api.schemas.errors import ErrorBody
from api.version import CONTRACT_VERSION

__all__ = ["OPERATION_IDS", "document", "mount_docs", "operation_id"]

OPERATION_IDS: Final[dict[tuple[str, str], str]] = {
    ("GET", "/me/core-memories"): "listMemories",
    ("POST", "/me/core-memories"): "createMemory",
    ("GET", "/me/core-memories/{memory_id}"): "getMemory",
    ("GET", "/me/changes"): "listChanges",
    ("PATCH", "/me/core-memories/{memory_id}"): "updateMemory",
    ("DELETE", "/me/core-memories/{memory_id}"): "forgetMemory",
    ("POST", "/me/core-memories/{memory_id}/suppress"): "suppressMemory",
    ("POST", "/me/core-memories/{memory_id}/restore"): "restoreMemory",
    ("GET", "/me/core-memories/{memory_id}/versions"): "listMemoryVersions",
    ("POST", "/me/core-memories/{memory_id}/versions/{revision}/restore"): "restoreMemoryVersion",
    ("GET", "/me/memories"): "listLegacyMemories",
    ("PUT", "/me/memories"): "putLegacyMemory",
    ("DELETE", "/me/memories/{memory_key}"): "forgetLegacyMemory",
    ("GET", "/me/memory-candidates"): "listCandidates",
    ("POST", "/me/memory-candidates/{candidate_id}/accept"): "acceptCandidate",
    ("POST", "/me/memory-candidates/{candidate_id}/reject"): "rejectCandidate",
    ("GET", "/me/memory-settings"): "getMemorySettings",
    ("PATCH", "/me/memory-settings"): "updateMemorySettings",
    ("GET", "/tools"): "listTools",
    ("POST", "/tools/search_core_memories"): "searchCoreMemories",
    ("POST", "/tools/list_core_memories"): "listCoreMemories",
    ("POST", "/tools/save_core_memory"): "saveCoreMemory",
    ("POST", "/tools/update_core_memory"): "updateCoreMemory",
    ("POST", "/tools/forget_core_memory"): "forgetCoreMemory",
    ("POST", "/tools/propose_core_memory"): "proposeCoreMemory",
    ("GET", "/audit/events"): "listAuditEvents",
    ("GET", "/audit/replay"): "replayLedger",
    ("GET", "/audit/users/{user_id}/memories"): "getMemoriesAsOf",
    ("GET", "/healthz"): "getHealth",
    ("GET", "/readyz"): "getReadiness",
    ("GET", "/metrics"): "getMetrics",
}
"""operationId by (method, path template)."""


def operation_id(route: APIRoute) -> str:
    """The route's operationId: its name in OPERATION_IDS, else its function's in camelCase."""
    for method in sorted(route.methods or ()):
        named = OPERATION_IDS.get((method, route.path_format))
        if named:
            return named
    head, *rest = route.name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_ASSETS: Final = Path(fastapi_offline.__file__).parent / "static"
_STATIC: Final = "/docs-assets"
_DOCS_POLICY: Final = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
"""Both pages start their UI from an inline script; nothing may load from another origin."""
_REDOC_BUNDLE: Final = "redoc.standalone.js"
_REDOC_LOGO: Final = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
"""What ReDoc's bundle draws beside "API docs by Redocly": from its vendor's CDN, which the
page's policy blocks (a console error on every load). Served instead as an empty image."""
_EMPTY_SVG: Final = b"data:image/svg+xml,%3Csvg xmlns=%27http://www.w3.org/2000/svg%27/%3E"


def mount_docs(app: FastAPI) -> None:
    """Swagger UI at /docs and ReDoc at /redoc, from the assets `fastapi-offline` ships (ReDoc's
    bundle without its one reference to another origin, `_REDOC_LOGO`)."""

    @app.get(f"{_STATIC}/{_REDOC_BUNDLE}", include_in_schema=False)
    def redoc_bundle() -> Response:
        return Response(_redoc_bundle(), media_type="text/javascript")

    app.mount(_STATIC, StaticFiles(directory=_ASSETS), name="docs-assets")  # after: the rest

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        return _page(
            app,
            request,
            "Swagger UI",
            # no validator badge from elsewhere
            partial(get_swagger_ui_html, swagger_ui_parameters={"validatorUrl": None}),
            swagger_js_url="swagger-ui-bundle.js",
            swagger_css_url="swagger-ui.css",
            swagger_favicon_url="favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        return _page(
            app,
            request,
            "ReDoc",
            partial(get_redoc_html, with_google_fonts=False),
            redoc_js_url=_REDOC_BUNDLE,
            redoc_favicon_url="favicon.png",
        )


@cache
def _redoc_bundle() -> bytes:
    return (_ASSETS / _REDOC_BUNDLE).read_bytes().replace(_REDOC_LOGO, _EMPTY_SVG)


def _page(
    app: FastAPI,
    request: Request,
    ui: str,
    render: Callable[..., HTMLResponse],
    **assets: str,
) -> HTMLResponse:
    """A docs page under the request's root path: `render` gets the schema's URL, the title
    and each of `assets` (a file of the docs assets) as its URL; the page's headers let it
    load nothing from another origin."""
    root = request.scope.get("root_path", "")
    page = render(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} - {ui}",
        **{name: f"{root}{_STATIC}/{file}" for name, file in assets.items()},
    )
    page.headers["Content-Security-Policy"] = _DOCS_POLICY
    page.headers["Referrer-Policy"] = "no-referrer"
    return page


def document(app: FastAPI) -> None:
    """Make `app.openapi()` put the examples on every request body and 2xx response."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _with_examples(_with_error_body(build()))
            info = app.openapi_schema["info"]  # `version` is the package's (app.py)
            info["x-contract-version"] = CONTRACT_VERSION
            info["description"] = (
                f"memledger {info['version']}, implementing version {CONTRACT_VERSION} of the HTTP"
                " contract (API_CONTRACT.md)."
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _with_error_body(spec: dict[str, Any]) -> dict[str, Any]:
    """The ErrorBody schema that every error response refers to (api/schemas/errors.py), among
    the others in name order, as FastAPI writes them."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas["ErrorBody"] = copy.deepcopy(_error_body_schema())
    spec["components"]["schemas"] = dict(sorted(schemas.items()))
    return spec


@cache
def _error_body_schema() -> dict[str, Any]:
    """ErrorBody's schema as FastAPI writes a response model's (a one-route document)."""

    def error() -> None: ...  # pragma: no cover - never served

    route = APIRoute("/", error, response_model=ErrorBody)
    return get_openapi(title="", version="", routes=[route])["components"]["schemas"]["ErrorBody"]


def _with_examples(spec: dict[str, Any]) -> dict[str, Any]:
    schemas = spec.get("components", {}).get("schemas", {})
    for name, example in SCHEMA_EXAMPLES.items():
        if name in schemas:
            schemas[name]["examples"] = [example]
    for path in spec.get("paths", {}).values():
        for operation in path.values():
            for parameter in operation.get("parameters", []):
                _not_null(parameter)
            body = operation.get("requestBody", {}).get("content", {})
            for media in body.values():
                _exemplify(media, schemas)
            for status, response in operation.get("responses", {}).items():
                if status.startswith("2"):
                    _exemplify_response(operation["operationId"], response, schemas)
    return spec


def _not_null(parameter: dict[str, Any]) -> None:
    """An optional parameter is one that may be left out: its value is never null.

    FastAPI describes `int | None = None` as anyOf [integer, null]; a client (or a fuzzer) would
    then send the text "null", which no such parameter accepts.
    """
    schema = parameter.get("schema", {})
    kept = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if len(kept) == 1 and len(kept) < len(schema["anyOf"]):
        del schema["anyOf"]
        schema.update(kept[0])


def _exemplify_response(name: str, response: dict[str, Any], schemas: dict[str, Any]) -> None:
    given = OPERATION_EXAMPLES.get(name, {})
    for media_type, example in given.items():
        media = response.setdefault("content", {}).setdefault(
            media_type, {"schema": {"type": "string"} if media_type.startswith("text/") else {}}
        )
        media["example"] = example
    for media in response.get("content", {}).values():
        _exemplify(media, schemas)


def _exemplify(media: dict[str, Any], schemas: dict[str, Any]) -> None:
    """The media type's example: its schema's own, when the schema is a named component."""
    if "example" in media or "examples" in media:
        return
    schema = media.get("schema", {})
    refs = [s["$ref"] for s in schema.get("anyOf", []) if "$ref" in s]  # an optional body
    ref = schema.get("$ref") or (refs[0] if len(refs) == 1 else "")
    component = schemas.get(ref.rsplit("/", 1)[-1]) if ref else None
    if component and component.get("examples"):
        media["example"] = component["examples"][0]
