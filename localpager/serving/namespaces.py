"""The server for a keys file (``--api-keys-file``): a request's bearer key chooses the namespace, a store
of its own, whose app answers it. ``app`` builds the router and hands it ``create_app``, so neither module
imports the other."""

import asyncio
import dataclasses
import hmac
from typing import Any, Callable

from ..memory.api import LocalPager
from .guard import escaping, send_json, stderr_log
from .options import ServerOptions
from .protocol import check_cors, error_body


class NamespaceRouter:
    """The server for a keys file: one app per namespace (``create_app`` over ``lp.namespace(name)``, a store
    of its own), and a request reaches the app of the namespace its key opens. An app holds nothing but its
    own store, so no conversation id, however guessed, reaches another namespace's rows: ``/v1/...`` with
    another namespace's id is a 404 there, as an id that does not exist. ``/v1/`` without a known key is a
    401; the inspector page, its files and ``/health`` are served without one (they hold no memory). Every
    namespace's store is opened (and migrated) at start. The models are ``lp``'s, shared."""

    def __init__(self, lp: LocalPager, options: ServerOptions,
                 create_app: Callable[[LocalPager, ServerOptions], Any]):
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
                return await send_json(send, 401, error_body(
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
