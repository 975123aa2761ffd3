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

This module puts the app together from the others: ``routes`` (the handlers), ``guard`` (the checks before
them), ``jobs`` (the model work behind them, in arrival order per conversation), ``namespaces`` (one app per
namespace of a keys file). It imports fastapi: import it only when serving (the CLI does so inside ``serve``).
"""

import asyncio
import dataclasses
import errno
import socket
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI

from ..memory.api import LocalPager
from .errors import ERROR_HANDLERS, failure
from .guard import add_guards, escaping, stderr_log
from .jobs import ModelRunner
from .namespaces import NamespaceRouter
from .options import DEFAULT_HOST, DEFAULT_PORT, LOOPBACK_HOSTS, ServerOptions
from .protocol import check_cors, is_loopback
from .routes import chat, conversations, inspector
from .state import Served


def create_app(lp: LocalPager, options: ServerOptions | None = None, **overrides: Any) -> FastAPI:
    """The FastAPI app serving ``lp``: ``create_app(lp, api_key="k")`` or with a ``ServerOptions``. With
    ``api_keys`` (a keys file) it is a ``NamespaceRouter``; with ``namespace``, the app of that namespace."""
    options = dataclasses.replace(options or ServerOptions(), **overrides)
    if options.api_keys:
        return NamespaceRouter(lp, options, create_app)
    if options.namespace:
        return create_app(lp.namespace(options.namespace), dataclasses.replace(options, namespace=None))
    check_cors(options.cors_origins, options.api_key)
    log = escaping(options.log or stderr_log)
    # as ingest: a turn longer than this fits in no prompt whole
    served = Served(lp, options, ModelRunner(lp, options.budget), log,
                    longest_turn=lp.n_ctx - lp.recall.max_answer_tokens - 64)
    app = FastAPI(title="localpager", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan,
                  exception_handlers=ERROR_HANDLERS)
    app.state.served = served
    app.state.runner = served.runner
    app.state.pending = served.pending
    add_guards(app, options, log)  # logs and guards every request
    for routes in (chat, conversations, inspector):
        app.include_router(routes.router)
    return app


@asynccontextmanager
async def lifespan(app: FastAPI):
    """Start loading the models (``preload``); at shutdown, store the answers being generated first."""
    served: Served = app.state.served
    if served.options.preload:
        app.state.preloading = preload(served)
    yield
    if served.pending:  # answers being generated are stored before the process exits
        await asyncio.wait(list(served.pending), timeout=120)


def preload(served: Served) -> asyncio.Future:
    """The models loading in a worker thread; one log line when they are loaded, or why not."""
    started = time.perf_counter()
    loading = asyncio.ensure_future(anyio.to_thread.run_sync(served.runner.preload))

    def loaded(task: asyncio.Future) -> None:
        error = None if task.cancelled() else task.exception()
        served.log(f"models failed to load: {failure(error).message}" if error else
                   f"models loaded in {time.perf_counter() - started:.1f} s")

    loading.add_done_callback(loaded)
    return loading


def serve(lp: LocalPager, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          options: ServerOptions | None = None) -> None:
    """Run the app on uvicorn until interrupted: the address is bound and listening before the one line to
    stderr that says so (a taken port is a one-line ``OSError``, and nothing says "listening"). Idle
    connections are closed (``KEEP_ALIVE_S`` after a response, ``REQUEST_HEAD_S`` for a request's head)."""
    options = options or ServerOptions()
    if options.allowed_hosts is None and is_loopback(host):
        options = dataclasses.replace(options, allowed_hosts=LOOPBACK_HOSTS)
    server = uvicorn_server(create_app(lp, options), host, port, options)
    sock = listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    port = sock.getsockname()[1]
    stderr_log(f"listening at http://{shown}:{port}/v1 (store {lp.store.path}); memory inspector at "
               f"http://{shown}:{port}/")
    with sock, _exit_on_sigterm():
        server.run(sockets=[sock])


def uvicorn_server(app, host: str, port: int, options: ServerOptions):
    """The uvicorn server ``serve`` runs ``app`` on: closing idle connections (``options.keep_alive_s`` after a
    response, ``options.head_timeout_s`` for a request's head), and giving answers being written up to 120 s
    to be stored at shutdown."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=120, timeout_keep_alive=options.keep_alive_s,
                            http=closing_idle(options.head_timeout_s))
    return uvicorn.Server(config)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening (connections wait in its backlog until the server runs);
    an ``OSError`` saying what went wrong in one line (a port in use names ``--port``)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        hint = ("; another program (another localpager serve?) is using the port: stop it or choose another with "
                "--port") if exc.errno == errno.EADDRINUSE else ""
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None
    sock.set_inheritable(True)
    return sock


def closing_idle(head_timeout: float):
    """uvicorn's HTTP protocol, which closes a connection that has not sent a whole request head within
    ``head_timeout`` seconds of opening or of its last response (uvicorn's own keep-alive timer starts only
    after a response, and stops at the first byte of the next request: a connection that sends nothing, or
    half a head, was held open for ever)."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class ClosingIdle(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._await_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._await_head()

        def connection_lost(self, exc) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(head_timeout, self._head_late, self.cycle)

        def _head_late(self, cycle) -> None:
            """No request began since the timer was set (the same cycle, ended or none): close."""
            if self.cycle is cycle and (cycle is None or cycle.response_complete) and not self.transport.is_closing():
                self.transport.close()

    return ClosingIdle


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
