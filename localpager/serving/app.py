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
from .options import DEFAULT_HOST, DEFAULT_PORT, LOOPBACK_HOSTS, SHUTDOWN_GRACE_S, ServerOptions
from .protocol import check_cors, is_loopback
from .routes import chat, conversations, inspector, users
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
    for routes in (chat, conversations, users, inspector):
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
        await asyncio.wait(list(served.pending), timeout=SHUTDOWN_GRACE_S)


def preload(served: Served) -> asyncio.Future:
    """The models loading in a worker thread; one log line when they are loaded ("ready": ``/health`` says
    ``preloaded`` from then on), or why not; none when the server stopped first."""
    started = time.perf_counter()
    loading = asyncio.ensure_future(anyio.to_thread.run_sync(served.runner.preload))

    def loaded(task: asyncio.Future) -> None:
        if task.cancelled() or served.lp.closed:  # stopped while loading: nothing was loaded to say so of
            return
        error = task.exception()
        served.log(f"models failed to load: {failure(error).message} (the first request loads them again)" if error
                   else f"ready: models loaded in {time.perf_counter() - started:.1f} s")

    loading.add_done_callback(loaded)
    return loading


def serve(lp: LocalPager, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          options: ServerOptions | None = None) -> int | None:
    """Run the app on uvicorn until SIGTERM or SIGINT (Ctrl-C): the address is bound and listening before the
    one line to stderr that says so (a taken port is a one-line ``OSError``, and nothing says "listening"), and
    "ready" follows once the models are loaded (at once with ``preload`` off: they load on the first request).
    Idle connections are closed (``KEEP_ALIVE_S`` after a response, ``REQUEST_HEAD_S`` for a request's head).
    Stopping, it finishes the requests in flight and stores their answers first. Returns the signal that
    stopped it (None: none did); the caller closes ``lp`` (``cli.serve`` then says "stopped")."""
    options = options or ServerOptions()
    if options.allowed_hosts is None and is_loopback(host):
        options = dataclasses.replace(options, allowed_hosts=LOOPBACK_HOSTS)
    server = uvicorn_server(create_app(lp, options), host, port, options)
    sock = listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    port = sock.getsockname()[1]
    user = f", user {options.user!r} unless a request names another" if options.user else ""
    stderr_log(f"listening at http://{shown}:{port}/v1 (store {lp.store.path}{user}); memory inspector at "
               f"http://{shown}:{port}/")
    if not options.preload:
        stderr_log("ready (the models load on the first request)")
    with sock, _stop_signals(server) as stopped_by:
        server.run(sockets=[sock])
    return stopped_by[0] if stopped_by else None


def uvicorn_server(app, host: str, port: int, options: ServerOptions):
    """The uvicorn server ``serve`` runs ``app`` on: closing idle connections (``options.keep_alive_s`` after a
    response, ``options.head_timeout_s`` for a request's head), and giving answers being written up to 120 s
    to be stored at shutdown."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            """The first SIGTERM or SIGINT: one line saying which answers the server finishes first, if any."""
            if not self.should_exit and (busy := answers_in_flight(app)):
                stderr_log(f"stopping: {busy} answer{'s' if busy > 1 else ''} in progress, finished and stored first")
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_S, timeout_keep_alive=options.keep_alive_s,
                            http=closing_idle(options.head_timeout_s))
    return Server(config)


def answers_in_flight(app) -> int:
    """The chat answers ``app`` is writing (a keys file's router: its namespaces' too)."""
    apps = app.apps.values() if isinstance(app, NamespaceRouter) else [app]
    return sum(len(a.state.pending) for a in apps)


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
def _stop_signals(server):
    """SIGTERM and SIGINT stop ``server`` and are yielded (a list: the signals received), not raised: uvicorn
    catches them, shuts down gracefully, then raises each again under the handler it found, which would end the
    process there (SIGTERM's default) or raise ``KeyboardInterrupt`` through the caller's clean-up (SIGINT's). A
    signal before uvicorn installs its own handlers stops it as well."""
    import signal

    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def stop(signum, frame):
        received.append(signum)
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
