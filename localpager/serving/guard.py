"""The guard every request passes before a route: the Host check (DNS rebinding), no state changed from
a foreign web page (``Origin``), the bearer key compared in constant time, the body size limit and time limit,
and one log line per request with control characters escaped. Pure ASGI, so it never buffers a streamed answer.
"""

import asyncio
import hmac
import json
import sys
import time
from typing import Callable, Sequence

from .options import ServerOptions
from .protocol import (CONVERSATION_HEADERS, error_body, escape_controls, forbidden_origin_message,
                       origin_allowed)

STATE_CHANGING = ("POST", "PUT", "PATCH", "DELETE")


async def send_json(send, status: int, body: dict, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": data})


class GuardMiddleware:
    """Host check (DNS rebinding), no state changed from a foreign web page, bearer key, body size limit,
    and one log line per request."""

    def __init__(self, app, options: ServerOptions, log: Callable[[str], None]):
        self.app = app
        self.options = options
        self.log = log

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = {"code": 0}
        scope.setdefault("state", {})

        async def send_logged(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, send_logged)
        finally:
            if not scope["state"].get("logged_by_job"):
                ms = (time.perf_counter() - start) * 1000
                self.log(f"{scope['method']} {scope['path']} {status['code']} {ms:.0f} ms")

    async def _guarded(self, scope, receive, send):
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.options.allowed_hosts is not None:
            host = headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in self.options.allowed_hosts:
                return await send_json(send, 400, error_body(f"unexpected Host header {host!r}", code="invalid_host"))
        origin = headers.get("origin")
        if (scope["method"] in STATE_CHANGING and origin is not None
                and not origin_allowed(origin, headers.get("host", ""), self.options.cors_origins)):
            # a web page elsewhere may not change memory, whatever content type it sends (no preflight needed)
            return await send_json(send, 403, error_body(forbidden_origin_message(origin), type="permission_error",
                                                         code="forbidden_origin"))
        path = scope["path"]
        if self.options.api_key and path.startswith("/v1/") and scope["method"] != "OPTIONS":
            given = headers.get("authorization", "")
            token = given[7:].strip() if given[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(token.encode(), self.options.api_key.encode()):
                return await send_json(send, 401, error_body(
                    "invalid or missing API key: send Authorization: Bearer <key>", code="invalid_api_key"),
                    [(b"www-authenticate", b"Bearer")])
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        limit = self.options.max_body_bytes
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            return await send_json(send, 413, error_body(f"the request body is over {limit} bytes",
                                                          code="request_too_large"))
        body, more = b"", True
        try:
            async with asyncio.timeout(self.options.body_timeout_s):  # a body sent a byte at a time holds no slot
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    body += message.get("body", b"")
                    more = message.get("more_body", False)
                    if len(body) > limit:
                        return await send_json(send, 413, error_body(f"the request body is over {limit} bytes",
                                                                      code="request_too_large"))
        except TimeoutError:
            return await send_json(send, 408, error_body(
                f"the request body did not arrive within {self.options.body_timeout_s:g} s", code="request_timeout"),
                [(b"connection", b"close")])
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # then the real channel: disconnects still arrive

        await self.app(scope, replay, send)


def stderr_log(line: str) -> None:
    print(f"localpager serve: {line}", file=sys.stderr, flush=True)


def escaping(log: Callable[[str], None]) -> Callable[[str], None]:
    """``log`` with control characters escaped: a line holds request text (paths, ids, errors)."""
    return lambda line: log(escape_controls(line))


def add_guards(app, options: ServerOptions, log: Callable[[str], None]) -> None:
    """The guard on every request and, when ``cors_origins`` asks for it, CORS outside it, so that even a
    401 carries the CORS headers."""
    app.add_middleware(GuardMiddleware, options=options, log=log)
    if options.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(options.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["authorization", "content-type", *CONVERSATION_HEADERS,
                                          *options.user_headers],
                           expose_headers=["x-conversation-id", "x-localpager-history", "x-localpager-appended",
                                           "x-localpager-trace-id", "x-localpager-injected"])
