"""The stdio line screen. The SDK's stdio transport hands a line it cannot read (invalid JSON, a JSON array, a
lone surrogate such as ``\\ud800``) to the session as an exception and answers nothing, so the client waits
for ever (SDK 2.3); ``ScreenedLines`` answers each such line with a JSON-RPC error instead."""

from __future__ import annotations

import contextvars
import json
import logging
from typing import Any, Protocol

from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError
from pydantic import ValidationError

log = logging.getLogger("localpager.mcp")

PARSE_ERROR, INVALID_REQUEST = -32700, -32600  # JSON-RPC 2.0's codes


def _request_id(value: Any) -> int | str | None:
    """A JSON-RPC id as a reply may echo it: a string or an integer (not a boolean); None otherwise."""
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def malformed_answers(problem: Exception) -> list[tuple[int | str | None, int, str]]:
    """The JSON-RPC errors, as (id, code, message), that answer a line the SDK could not read (``problem``: its
    validation error). A request's id is echoed when one can be read; a malformed notification or response
    is answered by nothing, as JSON-RPC 2.0 says."""
    errors = problem.errors() if isinstance(problem, ValidationError) else []
    if not errors:
        return [(None, PARSE_ERROR, f"the message could not be read ({type(problem).__name__})")]
    value, unreadable = errors[0].get("input"), errors[0].get("type") == "json_invalid"
    if unreadable:
        try:  # Python's reader takes what the SDK's refuses: a lone surrogate escape such as \ud800
            value = json.loads(value) if isinstance(value, str) else None
        except ValueError:
            return [(None, PARSE_ERROR, "parse error: the line is not valid JSON (one JSON object a line)")]
    if isinstance(value, list):
        why = "batches (a JSON array) are not supported: send one JSON-RPC message a line"
        ids = [i for item in value if isinstance(item, dict) and (i := _request_id(item.get("id"))) is not None]
        return [(i, INVALID_REQUEST, why) for i in ids] or [(None, INVALID_REQUEST, why)]
    if not isinstance(value, dict):
        return [(None, INVALID_REQUEST, "not a JSON-RPC message: one JSON object a line")]
    if "id" not in value and "method" in value or "method" not in value and ("result" in value or "error" in value):
        return []  # a notification or a response: never answered
    why = ("the message is not valid Unicode (a lone surrogate such as \\ud800) or not strict JSON" if unreadable
           else "not a valid JSON-RPC 2.0 request (jsonrpc \"2.0\", an id, a method, params an object)")
    return [(_request_id(value.get("id")), INVALID_REQUEST, f"{why}: nothing was done")]


class LineStream(Protocol):
    """The SDK's stdio read stream, as ``ScreenedLines`` uses it: a message or the exception a line raised, and
    the context its sender sent it in (the stream ``stdio_server`` yields keeps it for the session)."""

    last_context: contextvars.Context | None

    async def receive(self) -> SessionMessage | Exception: ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...


class MessageSink(Protocol):
    """The SDK's stdio write stream: what is sent to it reaches the client as one line."""

    async def send(self, message: SessionMessage) -> None: ...


class ScreenedLines:
    """The SDK's stdio read stream, with every line it could not read answered on the write stream with the
    JSON-RPC errors of ``malformed_answers`` (and logged to stderr) instead of leaving the client waiting;
    everything else passes through as it is."""

    def __init__(self, inner: LineStream, write: MessageSink) -> None:
        self._inner, self._write = inner, write

    @property
    def last_context(self) -> contextvars.Context | None:  # the SDK reads the sender's context from its stream
        return self._inner.last_context

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            answers = malformed_answers(item)
            log.warning("a line that is not a JSON-RPC message (%s): %s", type(item).__name__,
                        "answered with an error" if answers else "ignored (a notification or a response)")
            for request_id, code, message in answers:
                await self._write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id,
                                                                   error=ErrorData(code=code, message=message))))

    def __aiter__(self) -> ScreenedLines:
        return self

    async def __anext__(self) -> SessionMessage:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> ScreenedLines:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

