"""The models one process loads once: the chat model with its side context and side work, and the embedder.

A ``LocalPager`` owns one ``Models``; its namespaces share it (``LocalPager.namespace``), so a server with many
stores still loads each model once. Everything loads on first use, under the process's model lock (a llama.cpp
context is not thread-safe); ``preload`` starts the chat model on a thread of its own, holding no lock, so a new
process reads its memory while the model loads.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..backends import DEFAULT_BACKEND, default_backend, load_backend
from ..backends.base import ChatBackend
from ..core.modelpaths import ModelNotFoundError
from ..backends.tokenizers import BackendTokenCounter, counter_for
from ..core.tokens import TokenCounter
from ..runtime.choices import RecallMode
from ..runtime.recall import Runtime
from ..runtime.settings import RecallSettings

if TYPE_CHECKING:
    from ..retrieval.embedder import Embedder
    from ..runtime.assist import Assistant

log = logging.getLogger("localpager")


@dataclass(frozen=True)
class ModelOptions:
    """How the models load (``LocalPager(options=...)``); each option has a default.

    ``model``: the GGUF chat model (default ``$LOCALPAGER_MODEL``, else the packaged one), or a served model's name.
    ``backend``: a backend's name (default ``$LOCALPAGER_BACKEND``, else ``llama-cpp``) or a ``ChatBackend`` already
    loaded; ``backend_options``: more keyword arguments for its factory (openai-http: ``base_url``, ``api_key``,
    ``tokenizer``, ...). ``n_ctx``: the chat context's size in tokens. ``embedder``: a sentence-transformers model
    directory (default ``$LOCALPAGER_EMBEDDER``), or an embedder object (``encode``, ``dim``, ``name``).
    ``threads`` and ``chat_template`` are llama.cpp's: its threads as ``$LOCALPAGER_THREADS`` sets them (the
    default: that, else the cores other work leaves free), and ``chatml`` or a Jinja file for a GGUF without a chat
    template of its own (default ``$LOCALPAGER_CHAT_TEMPLATE``)."""

    model: str | os.PathLike | None = None
    backend: str | ChatBackend | None = None
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    n_ctx: int = 2048
    embedder: str | os.PathLike | object | None = None
    threads: int | None = None
    chat_template: str | None = None

    @property
    def given(self) -> ChatBackend | None:
        """The backend, if it was given loaded."""
        return None if self.backend is None or isinstance(self.backend, str) else self.backend

    @property
    def backend_name(self) -> str:
        return self.given.name if self.given is not None else self.backend or default_backend()

    def factory_options(self) -> dict[str, Any]:
        """The keyword arguments of the backend's factory beside ``model_path`` and ``n_ctx``: ``backend_options``,
        and llama.cpp's threads and chat template when given (another backend has neither: they are left out)."""
        options = dict(self.backend_options)
        if self.backend_name == DEFAULT_BACKEND:
            from ..backends.llama import loader_options

            options.update(loader_options(self.threads, self.chat_template))
        return options

    def load(self, **extra: Any) -> ChatBackend:
        """The chat backend these options name, loaded (``extra``: more keyword arguments for its factory); the
        backend itself when one is given loaded."""
        if self.given is not None:
            return self.given
        return load_backend(self.backend_name, model_path=self.model, n_ctx=self.n_ctx,
                            **{**self.factory_options(), **extra})


class Models:
    """The chat backend (named, or given loaded), the side context forked from it, the assistant doing the
    model's side work there, the runtime answering with them, and the embedder (a model directory, or an
    embedder object such as a test's)."""

    def __init__(self, options: ModelOptions, recall: RecallSettings, lock: threading.RLock):
        if options.backend in (None, ""):  # $LOCALPAGER_BACKEND or llama-cpp, chosen once
            options = dataclasses.replace(options, backend=default_backend())
        self.options = options
        self.model = options.model
        self.backend_name = options.backend_name
        self._backend: ChatBackend | None = options.given
        self.n_ctx = options.n_ctx
        self.recall = recall
        embedder = options.embedder
        self.embedder_path = embedder if isinstance(embedder, (str, os.PathLike)) or embedder is None else None
        self._embedder: Embedder | None = None if self.embedder_path is not None or embedder is None else embedder
        self.lock = lock
        self._runtime: Runtime | None = None
        self._assistant: Assistant | None = None
        self._side: ChatBackend | None = None
        self._preloading: threading.Thread | None = None  # ``preload`` in flight
        self._preloaded: tuple[ChatBackend, ChatBackend] | None = None  # what it loaded, not yet adopted

    # -- the chat model ---------------------------------------------------------------------------
    @property
    def backend(self) -> ChatBackend:
        with self.lock:
            if self._backend is None:
                self._take_preloaded()
            if self._backend is None:
                self._backend = self._load_backend()
            return self._backend

    @property
    def loaded(self) -> ChatBackend | None:
        """The chat backend if it is loaded (nothing loads)."""
        return self._backend

    def _load_backend(self) -> ChatBackend:
        return self.options.load()

    def preload(self) -> None:
        """Start loading the chat model and forking its side context on a background thread that holds no
        lock; the first use of the model waits for it (and loads it itself if the preload failed, reporting
        why)."""
        with self.lock:
            if self._backend is not None or self._preloading is not None:
                return

            def load() -> None:
                try:
                    backend = self._load_backend()
                    self._preloaded = (backend, backend.fork())
                except Exception as exc:  # noqa: BLE001 - the first real use loads again and reports it
                    log.debug("preloading the chat model: %s", exc)

            self._preloading = threading.Thread(target=load, name="localpager-preload", daemon=True)
            self._preloading.start()

    @property
    def preloading(self) -> bool:
        return self._preloading is not None

    def _take_preloaded(self) -> None:
        """Wait for a preload in flight and adopt what it loaded (called holding the lock; the preload never
        takes it)."""
        thread, self._preloading = self._preloading, None
        if thread is None:
            return
        thread.join()
        loaded, self._preloaded = self._preloaded, None
        if loaded is not None and self._backend is None:
            self._backend = loaded[0]
            if self._side is None:
                self._side = loaded[1]

    @property
    def runtime(self) -> Runtime:
        with self.lock:
            if self._runtime is None:
                recall = self.recall
                asks_model = recall.mode in (RecallMode.AUTO, RecallMode.ALWAYS)
                if self.backend.constraint == "none" and asks_model:
                    # a server that constrains no output cannot make a decision we would trust
                    log.warning("the model server accepts neither a GBNF grammar nor a JSON schema: the selector's "
                                "trigger alone recalls (the model is not asked to decide)")
                    recall = dataclasses.replace(recall, mode=RecallMode.SELECTOR)
                self._runtime = Runtime(self.backend, recall, side=lambda: self.side_backend)
            return self._runtime

    @property
    def side_backend(self) -> ChatBackend:
        """A second context on the same model (the weights are shared): focused recall answers and the
        model's side work run there, so the chat's KV cache survives them. The chat's own context when the
        backend cannot fork."""
        with self.lock:
            if self._side is None and self._backend is None:
                self._take_preloaded()
            if self._side is None:
                self._side = self.backend.fork()
            return self._side

    @property
    def assistant(self) -> Assistant:
        """The model's side work (keywords, eviction advice, worth) on the side context, loaded on first use."""
        with self.lock:
            if self._assistant is None:
                from ..runtime.assist import Assistant

                self._assistant = Assistant(self.side_backend)
            return self._assistant

    def assistant_stats(self) -> dict:
        """What the model's side work cost so far (keywords, eviction advice, worth); empty if it never ran."""
        return self._assistant.stats_dict() if self._assistant is not None else {}

    def counter(self) -> TokenCounter:
        """The loaded model's tokenizer, or a vocabulary-only load of the same model file (a backend other
        than llama.cpp's counts with its own tokenizer: a served model's ``--model`` is no file)."""
        if self._backend is not None or self._preloading is not None or self.backend_name != DEFAULT_BACKEND:
            return BackendTokenCounter(self.backend)  # a preload in flight: its tokenizer, not a second load
        return counter_for(str(self.model) if self.model else None)

    def clear_caches(self) -> None:
        """Empty the KV caches of the chat and side contexts (they may hold erased text)."""
        for backend in (self._backend, self._side):
            if backend is not None:
                backend.clear_cache()

    # -- the embedder -----------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """Made without the model lock (an answer may hold it): one embedder per model directory, loading on
        its first encode."""
        if self._embedder is None:
            from ..retrieval.embedder import default_embedder

            self._embedder = default_embedder(str(self.embedder_path) if self.embedder_path else None)
        return self._embedder

    def warm_embedder(self) -> None:
        """Start loading the embedder in the background (a missing one is said where an embedding is needed)."""
        try:
            embedder = self.embedder
        except ModelNotFoundError:
            return
        embedder.warm()

    def join_preload(self) -> None:
        """Wait for a preload in flight (at close: never adopted, so its empty KV cache is not saved)."""
        if self._preloading is not None:
            self._preloading.join()

    def close(self) -> None:
        """Let go of the side context this object forked, with what it keeps (read-ahead notes: up to 64 MB),
        even while a chat model passed in lives on."""
        self.join_preload()
        with self.lock:
            side, self._side, self._runtime, self._assistant = self._side, None, None, None
        if side is not None and side is not self._backend:
            side.clear_cache()
