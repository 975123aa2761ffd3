"""Chat backends, found through the ``localpager.backends`` entry-point group.

Another package adds a backend (say, a client for a llama.cpp server) by declaring
``[project.entry-points."localpager.backends"] name = "module:Factory"``; the factory takes the
keyword arguments ``model_path`` and ``n_ctx`` and returns a ``ChatBackend``.
"""

from __future__ import annotations

import importlib.metadata
import os
from typing import Any

from ..core.choices import unknown
from .base import BackendError, ChatBackend, Generation, Message
from .constraints import Constraint, JsonList, JsonObject, OneOf, Phrase, RecallChoice

GROUP = "localpager.backends"
DEFAULT_BACKEND = "llama-cpp"
BACKEND_ENV = "LOCALPAGER_BACKEND"  # as LOCALPAGER_MODEL names the model, this names the backend
_BUILTIN = {
    "llama-cpp": "localpager.backends.llama:LlamaCppBackend",
    "openai-http": "localpager.backends.openai_http:OpenAIHTTPBackend",
}

__all__ = ["BackendError", "ChatBackend", "Constraint", "Generation", "JsonList", "JsonObject", "Message", "OneOf",
           "Phrase", "RecallChoice", "available_backends", "default_backend", "load_backend"]


def default_backend() -> str:
    """``$LOCALPAGER_BACKEND``, else the built-in llama.cpp backend."""
    return os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND


def available_backends() -> dict[str, str]:
    """Backend name -> ``module:attribute``, the built-in one and every installed plug-in."""
    found = dict(_BUILTIN)
    for ep in importlib.metadata.entry_points(group=GROUP):
        found[ep.name] = ep.value
    return found


def load_backend(name: str | None = None, **options: Any) -> ChatBackend:
    """The backend ``name`` (default: ``default_backend()``) built with ``options``."""
    name = name or default_backend()
    backends = available_backends()
    if name not in backends:
        raise BackendError(str(unknown("backend", name, sorted(backends))))  # the installed ones
    factory = importlib.metadata.EntryPoint(name, backends[name], GROUP).load()  # "module:attribute", imported
    return factory(**options)
