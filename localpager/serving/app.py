"""`localpager serve`: an OpenAI-compatible chat server whose answers come from localpager's memory.

Any app that speaks the OpenAI chat API (Open WebUI, LibreChat, Jan, Continue, the ``openai`` client)
points its base URL at ``http://127.0.0.1:8765/v1`` and names the conversation in a header
(``X-Conversation-Id``). Clients resend the whole history on every request; the store is the truth, so
the server appends only the turns it has not stored yet (``reconcile``) and answers with
``Conversation.ask`` (paged prompt, recall, rerank, injection). Memory endpoints and an inspector page
(``/``) show what is in and out of the prompt and why a page was recalled.

Safety by default: loopback only (a remote bind needs ``allow_remote``), an optional bearer key compared in
constant time, a Host check against DNS rebinding, no CORS unless asked, no state changed from a foreign
web page (``Origin``), a body size limit, a ``max_tokens`` cap, log lines with control characters escaped,
and an inspector that cannot be framed. Ids of any script travel percent-encoded in headers.

Concurrency: one model, many clients. Requests on one conversation run in arrival order (a ticket
turnstile per conversation); the model work runs in a worker thread under the ``LocalPager``'s own lock,
so llama.cpp is never re-entered, and it runs to completion even when the client goes away, so no stored
turn is lost. A request that resends the question the store ends with, answered, is a retry: it gets the
stored answer (``serving.retried``), so no retry stores a turn twice.

This module imports fastapi: import it only when serving (the CLI does so inside ``serve``).
"""

import asyncio
import dataclasses
import hmac
import importlib.resources
import json
import sys
import threading
import time
import traceback
import uuid
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import quote

import anyio
import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette.sse import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..backends.base import BackendError
from ..backends.modelpaths import ModelNotFoundError
from ..memory.api import LocalPager
from ..memory.conversation import NO_ANSWER, Answer, Conversation
from ..runtime.recall import ContextOverflowError
from ..store.base import StoreError
from .protocol import (
    CONVERSATION_HEADERS,
    ApiError,
    Msg,
    Reconciliation,
    check_cors,
    content_disposition,
    error_body,
    escape_controls,
    finish_reason,
    header_value,
    is_loopback,
    message_text,
    origin_allowed,
    reconcile,
    resolve_conversation_id,
    retried,
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_BODY_BYTES = 1_000_000
MAX_TOKENS_CAP = 512
MODEL_ID = "localpager"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
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
STATE_CHANGING = ("POST", "PUT", "PATCH", "DELETE")
MISSING_EXTRA = "localpager serve needs the server extra: pip install 'localpager[server]'"


# =====================================================================================================
# Requests
# =====================================================================================================
class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1, max_length=100_000)
    stream: bool = False
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int | None = None
    user: str | None = None
    metadata: dict[str, Any] | None = None
    stream_options: dict[str, Any] | None = None


class PinRequest(BaseModel):
    pinned: bool = True


class ForgetRequest(BaseModel):
    turn: int | None = Field(default=None, ge=0)
    page: int | None = Field(default=None, ge=1)
    match: str | None = Field(default=None, min_length=1)
    dry_run: bool = False


class CorrectRequest(BaseModel):
    turn: int = Field(ge=0)
    text: str = Field(min_length=1)


@dataclass
class ServerOptions:
    """How the app behaves; the CLI fills it from its flags."""

    api_key: str | None = None
    cors_origins: Sequence[str] = ()
    allowed_hosts: Sequence[str] | None = None  # Host header check (DNS rebinding); None: any host
    max_body_bytes: int = MAX_BODY_BYTES
    max_tokens_cap: int = MAX_TOKENS_CAP
    default_conversation: str | None = None
    budget: int | None = None  # memory budget for the conversations it answers, while it runs (not stored)
    model_id: str = MODEL_ID
    preload: bool = False  # load the chat model and the embedder at start-up, not on the first request
    log: Callable[[str], None] | None = None  # one line per request; default: stderr
    # a keys file: {key: namespace}. A request's key chooses the namespace (a store of its own) it can reach
    api_keys: Mapping[str, str] | None = None
    namespace: str | None = None  # the whole server in this namespace (one user's --api-key)


# =====================================================================================================
# The model work: ordered per conversation, one model lock, run in a worker thread
# =====================================================================================================
class Turnstile:
    """First come, first served: tickets are taken in arrival order and served in that order (a plain
    lock would let a later request on the same conversation overtake an earlier one)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0
        self._serving = 0

    def ticket(self) -> int:
        with self._cond:
            self._next += 1
            return self._next - 1

    def wait(self, ticket: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._serving == ticket)

    def done(self, ticket: int) -> None:
        with self._cond:
            self._serving = ticket + 1
            self._cond.notify_all()


_END = object()


@dataclass
class Reply:
    """A chat answer as the server sends it: the text stored as the assistant's turn and the trace of how
    it was made (``Trace.to_dict``); ``replayed`` when it is the stored answer to a retried question."""

    text: str
    trace: dict[str, Any]
    replayed: bool = False

    @classmethod
    def of(cls, answer: Answer) -> "Reply":
        return cls(answer.answer or "…", answer.to_dict())


@dataclass
class Job:
    """One chat completion: reconcile the history, then ask, in a worker thread. Text pieces and the
    moment the history is reconciled reach the event loop through ``pieces`` and ``ready``."""

    conv_id: str
    history: list[Msg]
    question: str
    max_tokens: int | None
    loop: asyncio.AbstractEventLoop
    ready: asyncio.Future
    pieces: asyncio.Queue | None = None  # streaming only
    rec: Reconciliation | None = None
    question_turn: int = -1
    started: float = field(default_factory=time.perf_counter)
    client_gone: bool = False

    def _to_loop(self, fn, *args) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed (server shutting down): nobody is listening
            pass

    def _resolve(self, value: Any = None, error: BaseException | None = None) -> None:
        def settle() -> None:
            if not self.ready.done():
                self.ready.set_exception(error) if error else self.ready.set_result(value)
        self._to_loop(settle)

    def on_text(self, piece: str) -> None:
        if self.pieces is not None:
            self._to_loop(self.pieces.put_nowait, piece)


class ModelRunner:
    """Runs jobs against one ``LocalPager``: one ``Conversation`` object per id (its pager is the live
    state, so there must be one), a turnstile per conversation, and the pager's model lock around the
    whole of each job."""

    def __init__(self, lp: LocalPager, budget: int | None = None):
        self.lp = lp
        self.budget = budget
        self._conversations: dict[str, Conversation] = {}
        self._turnstiles: dict[str, Turnstile] = {}
        self._lock = threading.Lock()

    def conversation(self, conv_id: str, create: bool = False) -> Conversation:
        with self._lock:
            conv = self._conversations.get(conv_id)
            if conv is not None and not self.lp.store.has_conversation(conv_id):
                conv = None  # forgotten whole by another process: a request on it starts afresh
            if conv is None:
                conv = self._conversations[conv_id] = self.lp.conversation(conv_id, create=create)
            return conv

    def drop(self, conv_id: str) -> None:
        """Forget the open ``Conversation`` of a conversation deleted from the store."""
        with self._lock:
            self._conversations.pop(conv_id, None)

    def ticket(self, conv_id: str) -> tuple[Turnstile, int]:
        """Taken on the event loop when the request arrives, so the order is the arrival order."""
        with self._lock:
            turnstile = self._turnstiles.setdefault(conv_id, Turnstile())
        return turnstile, turnstile.ticket()

    def run(self, job: Job, turnstile: Turnstile, ticket: int) -> Reply:
        turnstile.wait(ticket)
        try:
            with self.lp.lock, ExitStack() as held:  # the model lock: llama.cpp is not re-entrant
                created = not self.lp.store.has_conversation(job.conv_id)
                try:
                    try:
                        conv = self.conversation(job.conv_id, create=True)
                        # the conversation's lock from the history to the stored answer: a request on it at
                        # another replica (any process on the store) waits, then reads what this one stored
                        held.enter_context(conv.changing(settle=True))
                        if (replay := self._replay(conv, job)) is not None:
                            return replay
                        self._apply_budget(conv)
                        job.rec = reconcile([Msg(t.role, t.text) for t in conv.turns], job.history)
                        for m in job.rec.new:
                            conv.add_turn(m.role, m.text)
                        job.question_turn = len(conv.turns)
                    except BaseException as exc:
                        job._resolve(error=exc)
                        raise
                    job._resolve(job.rec)
                    with self._answer_tokens(job.max_tokens):
                        return Reply.of(conv.ask(job.question, on_text=job.on_text))
                except BaseException:
                    held.close()  # the conversation's lock goes first: discarding may delete the conversation
                    if created:
                        self._discard_if_empty(job.conv_id)
                    raise
        finally:
            turnstile.done(ticket)
            if job.pieces is not None:
                job._to_loop(job.pieces.put_nowait, _END)

    def _replay(self, conv: Conversation, job: Job) -> Reply | None:
        """The stored answer, when the request is a retry of the question the store ends with (see
        ``retried``); nothing is stored and the model does not run. A question whose answer is missing
        (the model failed: the store holds a no-answer note) is asked again."""
        turns = conv.turns
        stored = [Msg(t.role, t.text) for t in turns]
        question = retried(stored, job.history, job.question)
        if question is None or turns[-1].text.strip() in ("", NO_ANSWER):
            return None
        trace = next((t for t in reversed(self.lp.store.traces(job.conv_id)) if t.get("turn") == question), {})
        job.rec = Reconciliation("retry", matched=len(job.history))
        job.question_turn = question
        job._resolve(job.rec)
        job.on_text(turns[-1].text)
        return Reply(turns[-1].text, trace, replayed=True)

    def _apply_budget(self, conv: Conversation) -> None:
        """The server's ``budget`` on a conversation it answers, for this process only (as ``chat --budget``)."""
        if self.budget is not None and conv.budget != self.budget:
            conv.set_budget(self.budget, save=False)

    def _discard_if_empty(self, conv_id: str) -> None:
        """A conversation this request created and left without a turn (its first question was refused)
        is deleted: a refused request leaves nothing behind."""
        try:
            if self.lp.store.has_conversation(conv_id) and not self.lp.store.turns(conv_id):
                self.lp.store.delete_conversation(conv_id)
        except StoreError:
            return
        self.drop(conv_id)

    @contextmanager
    def _answer_tokens(self, max_tokens: int | None):
        """``max_tokens`` for this answer only (under the model lock, which the caller holds)."""
        runtime = self.lp.runtime
        before = runtime.settings
        if max_tokens is None or max_tokens == before.max_answer_tokens:
            yield
            return
        runtime.settings = dataclasses.replace(before, max_answer_tokens=max_tokens)
        try:
            yield
        finally:
            runtime.settings = before

    def preload(self) -> None:
        """Load the chat model, its side context and the embedder now, so the first request does not."""
        with self.lp.lock:
            self.lp.runtime  # noqa: B018 - loads the backend
            self.lp.side_backend  # noqa: B018
            self.lp.index.embedder.encode(["warm up"])


# =====================================================================================================
# Responses
# =====================================================================================================
def memory_info(job: Job, reply: Reply | None) -> dict[str, Any]:
    """The ``localpager`` field of a completion: where the trace is and what memory did."""
    info: dict[str, Any] = {
        "conversation_id": job.conv_id,
        "history": job.rec.status if job.rec else None,
        "appended_turns": len(job.rec.new) if job.rec else 0,
        "trace_id": f"{job.conv_id}:{job.question_turn}",
        "turn": job.question_turn,
        "log": f"/v1/conversations/{quote(job.conv_id, safe='')}/log?turn={job.question_turn}",
    }
    if reply is not None:
        t = reply.trace
        info.update(decision=t.get("decision"), trigger=t.get("trigger"),
                    injected_page_ids=t.get("injected_page_ids", []), injected_turns=t.get("injected_turns", []),
                    citations=t.get("citations", []), tokens=t.get("tokens", {}), timings_ms=t.get("timings_ms", {}),
                    replayed=reply.replayed)
    return info


def memory_headers(job: Job, reply: Reply | None = None) -> dict[str, str]:
    """The memory headers; the ids in them percent-encoded (``header_value``): a header holds Latin-1 only."""
    headers = {"X-Conversation-Id": header_value(job.conv_id),
               "X-Localpager-Trace-Id": header_value(f"{job.conv_id}:{job.question_turn}")}
    if job.rec is not None:
        headers["X-Localpager-History"] = job.rec.status
        headers["X-Localpager-Appended"] = str(len(job.rec.new))
    if reply is not None:
        headers["X-Localpager-Injected"] = ",".join(map(str, reply.trace.get("injected_page_ids", [])))
    return headers


def usage(reply: Reply) -> dict[str, int]:
    tokens = reply.trace.get("tokens", {})
    prompt = int(tokens.get("answer_prompt") or tokens.get("prompt", 0))
    completion = int(tokens.get("generated", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


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


def forget_body(report) -> dict[str, Any]:
    """A forget's report as JSON; a dry run erased nothing, and never says it did."""
    body = report.to_dict()
    if body.get("dry_run"):
        body["erased"] = False
    return body


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


# =====================================================================================================
# Middleware (pure ASGI: it must not buffer streamed responses)
# =====================================================================================================
async def _send_json(send, status: int, body: dict, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
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
                return await _send_json(send, 400, error_body(f"unexpected Host header {host!r}", code="invalid_host"))
        origin = headers.get("origin")
        if (scope["method"] in STATE_CHANGING and origin is not None
                and not origin_allowed(origin, headers.get("host", ""), self.options.cors_origins)):
            # a web page elsewhere may not change memory, whatever content type it sends (no preflight needed)
            return await _send_json(send, 403, error_body(
                f"requests from the web page at {origin!r} may not change anything here; start the server with "
                f"--cors-origin {origin} to allow it", type="permission_error", code="forbidden_origin"))
        path = scope["path"]
        if self.options.api_key and path.startswith("/v1/") and scope["method"] != "OPTIONS":
            given = headers.get("authorization", "")
            token = given[7:].strip() if given[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(token.encode(), self.options.api_key.encode()):
                return await _send_json(send, 401, error_body(
                    "invalid or missing API key: send Authorization: Bearer <key>", code="invalid_api_key"),
                    [(b"www-authenticate", b"Bearer")])
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        limit = self.options.max_body_bytes
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            return await _send_json(send, 413, error_body(f"the request body is over {limit} bytes",
                                                          code="request_too_large"))
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > limit:
                return await _send_json(send, 413, error_body(f"the request body is over {limit} bytes",
                                                              code="request_too_large"))
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


# =====================================================================================================
# The app
# =====================================================================================================
def _static(name: str) -> str:
    return importlib.resources.files("localpager.serving").joinpath("static", name).read_text(encoding="utf-8")


def create_app(lp: LocalPager, options: ServerOptions | None = None, **overrides: Any) -> FastAPI:
    """The FastAPI app serving ``lp``: ``create_app(lp, api_key="k")`` or with a ``ServerOptions``. With
    ``api_keys`` (a keys file) it is a ``NamespaceRouter``; with ``namespace``, the app of that namespace."""
    options = dataclasses.replace(options or ServerOptions(), **overrides)
    if options.api_keys:
        return NamespaceRouter(lp, options)
    if options.namespace:
        return create_app(lp.namespace(options.namespace), dataclasses.replace(options, namespace=None))
    check_cors(options.cors_origins, options.api_key)
    log = escaping(options.log or stderr_log)
    runner = ModelRunner(lp, options.budget)
    pending: set[asyncio.Task] = set()
    # Jobs wait for their turn in worker threads; their own pool keeps the reads (memory endpoints) answering.
    # FIFO, and tickets are taken in the same order, so a queued job never holds a thread its predecessor needs.
    job_threads = anyio.CapacityLimiter(64)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if options.preload:
            started = time.perf_counter()
            app.state.preloading = asyncio.ensure_future(anyio.to_thread.run_sync(runner.preload))

            def loaded(task: asyncio.Future) -> None:
                error = None if task.cancelled() else task.exception()
                log(f"models failed to load: {failure(error).message}" if error else
                    f"models loaded in {time.perf_counter() - started:.1f} s")

            app.state.preloading.add_done_callback(loaded)
        yield
        if pending:  # answers being generated are stored before the process exits
            await asyncio.wait(list(pending), timeout=120)

    app = FastAPI(title="localpager", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.runner = runner
    app.state.pending = pending
    app.add_middleware(GuardMiddleware, options=options, log=log)  # logs and guards every request
    if options.cors_origins:  # outermost, so that even a 401 carries the CORS headers
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(options.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["authorization", "content-type", *CONVERSATION_HEADERS],
                           expose_headers=["x-conversation-id", "x-localpager-history", "x-localpager-appended",
                                           "x-localpager-trace-id", "x-localpager-injected"])

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        return error_response(first_validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return error_response(ApiError(exc.status_code, str(exc.detail), code=code))

    # -- the OpenAI API ---------------------------------------------------------------------------
    @app.get("/v1/models")
    async def models():
        model = str(lp.model) if lp.model else "default (SmolLM2-135M-Instruct)"
        return {"object": "list", "data": [{"id": options.model_id, "object": "model", "created": 0,
                                            "owned_by": "localpager", "localpager": {"model": model}}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatRequest, request: Request):
        conv_id = resolve_conversation_id(request.headers, body.model_dump(), options.default_conversation)
        if body.n not in (None, 1):
            raise ApiError(400, "n must be 1: one answer per request", param="n")
        messages = [Msg(m.role, message_text(m.content)) for m in body.messages]
        if messages[-1].role != "user" or not messages[-1].text.strip():
            raise ApiError(400, "the last message must be the user's, with some text", param="messages")
        history = [m for m in messages[:-1] if m.role in ("user", "assistant") and m.text.strip()]
        requested = body.max_completion_tokens or body.max_tokens
        max_tokens = min(requested, options.max_tokens_cap) if requested else None

        loop = asyncio.get_running_loop()
        job = Job(conv_id, history, messages[-1].text, max_tokens, loop, loop.create_future(),
                  asyncio.Queue() if body.stream else None)
        turnstile, ticket = runner.ticket(conv_id)
        task = asyncio.ensure_future(anyio.to_thread.run_sync(runner.run, job, turnstile, ticket,
                                                             limiter=job_threads))
        pending.add(task)
        task.add_done_callback(pending.discard)
        task.add_done_callback(lambda t: log_job(job, t))
        request.scope["state"]["logged_by_job"] = True
        try:
            await asyncio.shield(job.ready)  # the history is reconciled and the question is about to be asked
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            return error_response(failure(exc))
        if body.stream:
            include_usage = bool((body.stream_options or {}).get("include_usage"))
            return EventSourceResponse(stream(job, task, include_usage), headers=memory_headers(job),
                                       ping=10, sep="\n")
        try:
            reply = await asyncio.shield(task)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            return error_response(failure(exc), memory_headers(job))
        return JSONResponse(completion(job, reply), headers=memory_headers(job, reply))

    def completion(job: Job, reply: Reply) -> dict:
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
                "model": options.model_id,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                             "finish_reason": finish_reason(reply.trace.get("stopped"))}],
                "usage": usage(reply), "localpager": memory_info(job, reply)}

    async def stream(job: Job, task: asyncio.Future, include_usage: bool):
        """SSE chunks as the model writes; the last carries the ``localpager`` field; then ``[DONE]``.
        A client that leaves cancels only this generator: the job runs on and stores the answer."""
        cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

        def chunk(delta: dict, finish: str | None = None, **extra) -> dict:
            data = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": options.model_id,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
            return {"data": json.dumps(data, ensure_ascii=False)}

        try:
            yield chunk({"role": "assistant", "content": ""})
            sent = ""
            while (piece := await job.pieces.get()) is not _END:
                sent += piece
                yield chunk({"content": piece})
            try:
                reply = await asyncio.shield(task)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                yield {"data": json.dumps(failure(exc).body())}
                yield {"data": "[DONE]"}
                return
            final = reply.text  # what the store holds: the client's copy should match it
            if " ".join(sent.split()) != " ".join(final.split()) and final.startswith(sent.strip()):
                yield chunk({"content": final[len(sent.strip()):] if sent.strip() else final})
            yield chunk({}, finish_reason(reply.trace.get("stopped")), localpager=memory_info(job, reply))
            if include_usage:
                yield {"data": json.dumps({"id": cid, "object": "chat.completion.chunk", "created": created,
                                           "model": options.model_id, "choices": [], "usage": usage(reply)})}
            yield {"data": "[DONE]"}
        except (asyncio.CancelledError, GeneratorExit):  # the client left (noted when seen before the answer ends)
            job.client_gone = True
            raise

    def log_job(job: Job, task: asyncio.Future) -> None:
        ms = (time.perf_counter() - job.started) * 1000
        exc = task.exception() if not task.cancelled() else None
        if exc is not None or task.cancelled():
            log(f"chat conv={job.conv_id} error={failure(exc).message if exc else 'cancelled'} {ms:.0f} ms")
            return
        reply: Reply = task.result()
        t, tokens = reply.trace, reply.trace.get("tokens", {})
        injected = t.get("injected_page_ids") or []
        recall = f"recall p{','.join(map(str, injected))} ({t.get('trigger')})" if injected else "no recall"
        if reply.replayed:
            recall = "retry: the stored answer, nothing stored"
        log(f"chat conv={job.conv_id} turn={job.question_turn} history={job.rec.status if job.rec else '-'}"
            f"+{len(job.rec.new) if job.rec else 0} tokens prompt={tokens.get('prompt', 0)} "
            f"generated={tokens.get('generated', 0)} {ms:.0f} ms {recall}"
            f"{' (client left; answer stored)' if job.client_gone else ''}")

    # -- memory: read straight from the store (no model lock, so they answer while the model works) --
    def require(conv_id: str) -> None:
        if not lp.store.has_conversation(conv_id):
            raise ApiError(404, f"no conversation {conv_id!r}", code="conversation_not_found")

    @app.get("/v1/conversations")
    async def conversations():
        infos = await anyio.to_thread.run_sync(lp.store.list_conversations)
        return {"object": "list", "data": [{"id": i.id, "turns": i.turns, "pages": i.pages, "evicted": i.evicted,
                                            "source": i.source} for i in infos]}

    longest_turn = lp.n_ctx - lp.recall.max_answer_tokens - 64  # as ingest: a longer turn fits in no prompt whole
    turn_sizes: dict[tuple[str, int, int], int] = {}

    def too_long(conv_id: str, page, turns) -> list[int]:
        """The turns of ``page`` longer than any prompt can hold: stored and searchable, but neither in the
        prompt nor recalled whole. Counted only on a page whose stored count is over that, once a turn."""
        if page.token_count <= longest_turn:
            return []
        found = []
        for i in page.turn_range:
            if i >= len(turns) or not turns[i].text:
                continue
            key = (conv_id, i, len(turns[i].text))
            if key not in turn_sizes:
                with lp.lock:  # the tokenizer is the model's: not while it runs
                    turn_sizes[key] = lp.counter().count(turns[i].render())
            if turn_sizes[key] > longest_turn:
                found.append(i)
        return found

    def page_rows(conv_id: str) -> list[dict]:
        from ..core.bookmarks import render_bookmark
        from ..core.choices import DEFAULT_BOOKMARK_FORMAT

        require(conv_id)
        fmt = lp.store.settings(conv_id).get("bookmark_format") or DEFAULT_BOOKMARK_FORMAT
        turns = lp.store.turns(conv_id)
        rows = []
        for p in lp.store.pages(conv_id, turns):
            oversized = too_long(conv_id, p, turns)
            rows.append({"page_id": p.page_id, "first_turn": p.first_turn, "last_turn": p.last_turn,
                         "token_count": p.token_count, "keywords": p.keywords, "evicted": p.evicted,
                         "in_prompt": not p.evicted and not oversized, "too_long_turns": oversized,
                         "state": "too long" if oversized else "evicted" if p.evicted else "in prompt",
                         "pinned": p.pinned, "access_count": p.access_count,
                         "last_access": p.last_access, "worth": p.worth, "bookmark": render_bookmark(p, fmt),
                         "preview": " / ".join(turns[i].text[:80] for i in p.turn_range if i < len(turns))[:240]})
        return rows

    @app.get("/v1/conversations/{conv_id:path}/pages")
    async def pages(conv_id: str):
        return {"object": "list", "data": await anyio.to_thread.run_sync(page_rows, conv_id)}

    @app.get("/v1/conversations/{conv_id:path}/bookmarks")
    async def bookmarks(conv_id: str):
        rows = await anyio.to_thread.run_sync(page_rows, conv_id)
        return {"object": "list", "data": [{"page_id": r["page_id"], "evicted": r["evicted"],
                                            "bookmark": r["bookmark"]} for r in rows]}

    @app.get("/v1/conversations/{conv_id:path}/turns")
    async def turns(conv_id: str, offset: int = 0, limit: int = 200):
        def read():
            require(conv_id)
            return lp.store.turns(conv_id)

        rows = await anyio.to_thread.run_sync(read)
        total = len(rows)
        start = max(0, offset if offset >= 0 else total + offset)
        return {"object": "list", "total": total, "data": [
            {"index": t.index, "role": t.role, "text": t.text, "time": t.time, "speaker": t.speaker}
            for t in rows[start:start + max(0, min(limit, 1000))]]}

    @app.get("/v1/conversations/{conv_id:path}/log")
    async def trace_log(conv_id: str, turn: int | None = None, last: int | None = None):
        def read():
            require(conv_id)
            return lp.store.traces(conv_id)

        traces = await anyio.to_thread.run_sync(read)
        if turn is not None:
            traces = [t for t in traces if t.get("turn") == turn]
        if last is not None:
            traces = traces[-last:] if last > 0 else []
        for t in traces:
            t["trace_id"] = f"{conv_id}:{t.get('turn')}"
        return {"object": "list", "data": traces}

    async def in_turn(conv_id: str, fn: Callable[[], Any]) -> Any:
        """``fn`` in a worker thread, in the conversation's turn: after the requests on it that came before
        (a chat answer being written is never changed under it). Its own task, so the turn is always
        taken and given back even if the client leaves."""
        turnstile, ticket = runner.ticket(conv_id)

        def run():
            turnstile.wait(ticket)
            try:
                require(conv_id)
                return fn()
            except KeyError as exc:
                raise ApiError(404, exc.args[0] if exc.args else "not found", code="not_found") from None
            except ApiError:
                raise
            except Exception as exc:
                raise failure(exc) from None
            finally:
                turnstile.done(ticket)

        return await asyncio.shield(asyncio.ensure_future(anyio.to_thread.run_sync(run, limiter=job_threads)))

    @app.post("/v1/conversations/{conv_id:path}/pages/{page_id}/pin")
    async def pin(conv_id: str, page_id: int, body: PinRequest):
        def change():
            try:
                page = runner.conversation(conv_id).pin(page_id, body.pinned)
            except KeyError:
                raise ApiError(404, f"conversation {conv_id!r} has no page {page_id}", code="page_not_found") from None
            return {"page_id": page.page_id, "pinned": page.pinned, "evicted": page.evicted}

        return await in_turn(conv_id, change)

    @app.get("/v1/conversations/{conv_id:path}/search")
    async def search(conv_id: str, q: str, limit: int = 10):
        """What is remembered about ``q``, ranked as a recall ranks it (loads the embedder, not the chat model)."""
        hits = await in_turn(conv_id, lambda: runner.conversation(conv_id).search(q, limit=max(1, min(limit, 100))))
        return {"object": "list", "data": [h.to_dict() for h in hits]}

    @app.post("/v1/conversations/{conv_id:path}/forget")
    async def forget(conv_id: str, body: ForgetRequest):
        """Forget a turn, a page's turns or every turn containing ``match`` (``dry_run``: only list them)."""
        chosen = [k for k in ("turn", "page", "match") if getattr(body, k) is not None]
        if len(chosen) != 1:
            raise ApiError(400, "give exactly one of turn, page or match", param="turn")
        report = await in_turn(conv_id, lambda: runner.conversation(conv_id).forget(
            **{chosen[0]: getattr(body, chosen[0])}, dry_run=body.dry_run))
        return forget_body(report)

    @app.post("/v1/conversations/{conv_id:path}/correct")
    async def correct(conv_id: str, body: CorrectRequest):
        """Record ``text`` as the corrected statement of turn ``turn`` (a new turn; the old one superseded)."""
        turn = await in_turn(conv_id, lambda: runner.conversation(conv_id).correct(body.turn, body.text))
        return {"index": turn.index, "role": turn.role, "text": turn.text, "corrects": body.turn}

    @app.delete("/v1/conversations/{conv_id:path}")
    async def forget_conversation(conv_id: str, dry_run: bool = False):
        """Forget a whole conversation, erased from the store's files."""
        def erase():
            report = lp.forget_conversation(conv_id, dry_run=dry_run)
            if not dry_run:
                runner.drop(conv_id)
            return report

        return forget_body(await in_turn(conv_id, erase))

    @app.get("/v1/conversations/{conv_id:path}/export")
    async def export(conv_id: str):
        """The conversation as one line of localpager's export format (``localpager import`` reads it)."""
        from ..memory.interchange import conversation_line

        def read():
            require(conv_id)
            return conversation_line(lp.store, conv_id)

        line = await anyio.to_thread.run_sync(read)
        return Response(json.dumps(line, ensure_ascii=False) + "\n", media_type="application/x-ndjson",
                        headers={"Content-Disposition": content_disposition(f"{conv_id}.jsonl")})

    features = ["pin", "search", "forget", "correct", "export"]

    # -- the inspector ----------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse)
    async def inspector():
        return HTMLResponse(_static("inspector.html"), headers=INSPECTOR_HEADERS)

    @app.get("/static/{name}")
    async def static(name: str):
        if name not in STATIC_FILES:
            raise ApiError(404, f"no file {name!r}", code="not_found")
        return Response(_static(name), media_type=STATIC_FILES[name], headers=INSPECTOR_HEADERS)

    @app.get("/health")
    async def health():
        preloading = getattr(app.state, "preloading", None)
        done = bool(preloading and preloading.done() and not preloading.cancelled())
        error = preloading.exception() if done else None
        return {"status": "ok", "preloaded": done and error is None,
                "preload_error": failure(error).message if error else None, "features": features}

    return app


class NamespaceRouter:
    """The server for a keys file: one app per namespace (``create_app`` over ``lp.namespace(name)``, a store
    of its own), and a request reaches the app of the namespace its key opens. An app holds nothing but its
    own store, so no conversation id, however guessed, reaches another namespace's rows: ``/v1/...`` with
    another namespace's id is a 404 there, as an id that does not exist. ``/v1/`` without a known key is a
    401; the inspector page, its files and ``/health`` are served without one (they hold no memory). Every
    namespace's store is opened (and migrated) at start. The models are ``lp``'s, shared."""

    def __init__(self, lp: LocalPager, options: ServerOptions):
        self.lp = lp
        self.options = options
        self.keys = [(key.encode(), namespace) for key, namespace in options.api_keys.items()]
        self.log = escaping(options.log or stderr_log)
        inner = dataclasses.replace(options, api_key=None, api_keys=None, namespace=None)
        check_cors(options.cors_origins, "keys file")
        self.public = create_app(lp, dataclasses.replace(inner, log=self.log))  # pages and health only
        self.apps = {}
        for namespace in sorted(set(options.api_keys.values())):
            tagged = (lambda ns: lambda line: self.log(f"[{ns}] {line}"))(namespace)
            self.apps[namespace] = create_app(lp.namespace(namespace),
                                              dataclasses.replace(inner, preload=False, log=tagged))
        self.state = self.public.state

    def namespace_of(self, scope) -> str | None:
        """The namespace the request's bearer key opens (every key compared, in constant time), or None."""
        given = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"authorization"), "")
        token = given[7:].strip().encode() if given[:7].lower() == "bearer " else b""
        found = None
        for key, namespace in self.keys:
            if hmac.compare_digest(token, key):
                found = namespace
        return found

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.public(scope, self._shutdown_waits(receive), send)
        if scope["type"] == "http" and scope["path"].startswith("/v1/") and scope["method"] != "OPTIONS":
            namespace = self.namespace_of(scope)
            if namespace is None:
                self.log(f"{scope['method']} {scope['path']} 401")
                return await _send_json(send, 401, error_body(
                    "invalid or missing API key: send Authorization: Bearer <key>", code="invalid_api_key"),
                    [(b"www-authenticate", b"Bearer")])
            return await self.apps[namespace](scope, receive, send)
        return await self.public(scope, receive, send)

    def _shutdown_waits(self, receive):
        """``receive`` for the public app's lifespan: at shutdown, the namespaces' answers being generated
        are stored first (as each app's own lifespan does for its own)."""
        async def wrapped():
            message = await receive()
            if message.get("type") == "lifespan.shutdown":
                pending = [t for app in self.apps.values() for t in app.state.pending]
                if pending:
                    await asyncio.wait(pending, timeout=120)
            return message
        return wrapped


def serve(lp: LocalPager, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          options: ServerOptions | None = None) -> None:
    """Run the app on uvicorn until interrupted (one line to stderr when listening)."""
    import uvicorn

    options = options or ServerOptions()
    if options.allowed_hosts is None and is_loopback(host):
        options = dataclasses.replace(options, allowed_hosts=LOOPBACK_HOSTS)
    app = create_app(lp, options)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=120)
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    stderr_log(f"http://{shown}:{port}/v1 (store {lp.store.path}); memory inspector at http://{shown}:{port}/")
    with _exit_on_sigterm():
        server.run()


@contextmanager
def _exit_on_sigterm():
    """uvicorn catches SIGTERM, shuts down gracefully, then raises the signal again under the handler it found:
    with Python's default one the process dies there, before its caller closes the store (saving the KV cache
    and deferred FAISS indexes for the next process). Under this handler it leaves as ``SystemExit(143)``."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
