"""Confirmation tokens for destructive MCP calls: a model cannot erase in one call, and the second call that
erases may come from another ``localpager mcp`` process, so the tokens live in the store."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from typing import Any, Callable

from ...store.base import Store

CONFIRM_SECONDS = 300  # how long a forget's confirmation token stays valid


class Confirmations:
    """Tokens that let a destructive call through, kept in the store (``Store.add_confirmation``), so that the
    call presenting one may come from another process: a client that starts ``localpager mcp`` for each call
    (the MCP Inspector's CLI), or an app that restarted it. A token is issued with a preview; it is bound to
    the action, the conversation, the arguments and that exact preview (its turns and their text); taken once,
    whatever the outcome; and expires after ``ttl`` seconds. 96 random bits each; the store keeps only their
    SHA-256 and HMACs keyed by them (nothing a reader of the store could present, nothing of the text), and
    drops them with the conversation or at any forget in it."""

    def __init__(self, store: Store, ttl: float = CONFIRM_SECONDS, clock: Callable[[], float] = time.time):
        self.store = store
        self.ttl = ttl
        self.clock = clock  # seconds since the epoch: a token crosses processes

    @staticmethod
    def _mac(token: str, *parts: Any) -> str:
        data = json.dumps(parts, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
        return hmac.new(token.encode(), data, hashlib.sha256).hexdigest()

    @staticmethod
    def _digest(token: str) -> str:
        return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()

    @staticmethod
    def _arguments(arguments: dict[str, Any]) -> list:
        return sorted([k, v] for k, v in arguments.items() if v is not None)

    def issue(self, action: str, conversation: str, arguments: dict[str, Any], preview: Any) -> str:
        token = secrets.token_urlsafe(12)
        self.store.add_confirmation(self._digest(token), conversation,
                                    self._mac(token, action, conversation, self._arguments(arguments)),
                                    self._mac(token, preview), self.clock() + self.ttl)
        return token

    def redeem(self, token: str, action: str, conversation: str, arguments: dict[str, Any], preview: Any) -> bool:
        """Whether ``preview`` is exactly what the token was issued with (False: the conversation changed since);
        a ``ValueError`` saying why when the token does not let this call through (unknown, used, dropped by a
        forget since, expired, or issued for another call). The token is spent either way."""
        kept = self.store.take_confirmation(self._digest(token))
        again = f"call {action} again without confirm to get a new preview and token"
        if kept is None:
            raise ValueError(f"unknown or already used confirmation token (a forget in the conversation drops the "
                             f"others): nothing was erased; {again}")
        conv_id, binding, shown, expires = kept
        if self.clock() > expires:
            raise ValueError(f"the confirmation token expired ({self.ttl:.0f} s): nothing was erased; {again}")
        expected = self._mac(token, action, conversation, self._arguments(arguments))
        if conv_id != conversation or not hmac.compare_digest(binding, expected):
            raise ValueError("the confirmation token was issued for another call (other arguments, or another "
                             f"conversation): nothing was erased; {again}")
        return hmac.compare_digest(shown, self._mac(token, preview))

