"""Every failure answered in OpenAI's error shape: a failed model job, an invalid body, an unknown route.
One place, so the chat, the memory endpoints and the health check word the same error the same way."""

import sys
import traceback
from typing import Mapping

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..backends.base import BackendError
from ..core.modelpaths import ModelNotFoundError
from ..runtime.recall import ContextOverflowError
from ..store.base import StoreError
from .protocol import ApiError


def failure(exc: BaseException) -> ApiError:
    """A failed model job as an API error (one line; a bug also leaves its traceback on stderr)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ContextOverflowError):
        return ApiError(400, str(exc), code="context_length_exceeded", param="messages")
    if isinstance(exc, (BackendError, ModelNotFoundError)):
        return ApiError(503, f"the model is unavailable: {exc}", type="server_error", code="model_unavailable")
    if isinstance(exc, ValueError):
        return ApiError(400, str(exc))
    if isinstance(exc, StoreError):
        return ApiError(500, str(exc), type="server_error", code="store_error")
    traceback.print_exception(exc, file=sys.stderr)
    return ApiError(500, f"internal error: {type(exc).__name__}", type="server_error")


def error_response(exc: ApiError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=dict(headers or {}))


def first_validation_error(exc: RequestValidationError) -> ApiError:
    errors = exc.errors()
    if not errors:
        return ApiError(400, "invalid request body")
    e = errors[0]
    where = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
    if e.get("type") == "json_invalid":
        return ApiError(400, "the request body is not valid JSON", code="invalid_json")
    message = f"{where}: {e.get('msg', 'invalid')}" if where else str(e.get("msg", "invalid request body"))
    return ApiError(400, message, param=where or None)


async def api_error(request: Request, exc: ApiError) -> JSONResponse:
    return error_response(exc)


async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    return error_response(first_validation_error(exc))


async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    return error_response(ApiError(exc.status_code, str(exc.detail), code=code))


# the app's exception handlers: errors as OpenAI's JSON, never FastAPI's own shape
ERROR_HANDLERS = {ApiError: api_error, RequestValidationError: invalid_request, StarletteHTTPException: http_error}
