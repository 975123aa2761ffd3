"""The memory inspector (``/`` and its two files) and ``/health``: served without a key, since they hold no
memory (the page calls the memory endpoints with the key the user gives it)."""

import importlib.resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from ..errors import failure
from ..protocol import ApiError
from .conversations import FEATURES

router = APIRouter()
STATIC_FILES = {"inspector.js": "text/javascript", "inspector.css": "text/css"}
# The inspector loads its own script and style sheet, an empty data: icon, and calls this server: nothing
# else, and it is never shown inside another site's frame (clickjacking its forget button).
INSPECTOR_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _static(name: str) -> str:
    return importlib.resources.files("localpager.serving").joinpath("static", name).read_text(encoding="utf-8")


@router.get("/", response_class=HTMLResponse)
async def inspector():
    return HTMLResponse(_static("inspector.html"), headers=INSPECTOR_HEADERS)


@router.get("/static/{name}")
async def static(name: str):
    if name not in STATIC_FILES:
        raise ApiError(404, f"no file {name!r}", code="not_found")
    return Response(_static(name), media_type=STATIC_FILES[name], headers=INSPECTOR_HEADERS)


@router.get("/health")
async def health(request: Request):
    """Up; whether the models loaded at start-up (``preload``) are loaded, or why not; the memory controls."""
    preloading = getattr(request.app.state, "preloading", None)
    done = bool(preloading and preloading.done() and not preloading.cancelled())
    error = preloading.exception() if done else None
    return {"status": "ok", "preloaded": done and error is None,
            "preload_error": failure(error).message if error else None, "features": FEATURES}
