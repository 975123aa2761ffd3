"""The library API: what the CLI calls, and what a desktop app embeds.

    from localpager import LocalPager
    lp = LocalPager("memory.db")
    chat = lp.conversation("work", create=True)
    result = chat.ask("What did I say about the budget?")
    print(result.answer, result.injected_page_ids)

Models load once, lazily, on first use; one lock serialises the model, so a ``LocalPager`` can be
shared between threads. Opening and reading a conversation loads no model at all (not even the
tokenizer) and writes nothing.

A ``LocalPager`` is a store (``store``), the models a process loads once (``models.Models``), what the
process holds beside the store (``held.Held``: indexes, caches, open conversations) and its namespaces,
which share its models. ``Conversation`` (``conversation``) is one conversation of the store.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import TYPE_CHECKING, Sequence

from ..backends.base import ChatBackend
from ..core.pager import PagingConfig
from ..core.tokens import TokenCounter
from ..retrieval.rerank import RerankSettings
from ..runtime.recall import Runtime
from ..runtime.settings import RecallSettings
from ..store.base import ConversationInfo, Store, StoreError, UserNotFound, check_user
from ..store.choices import FileFormat
from ..store.exports import find_export
from ..store.kvstate import PrefixStates
from ..store.location import open_store
from . import controls, interchange
from .choices import ImportMode
from .conversation import Answer, Conversation
from .held import Held
from .history import import_history
from .ingest import IngestOptions, IngestReport, ingest_file
from .models import ModelOptions, Models
from .users import User, check_owner

if TYPE_CHECKING:
    from ..retrieval.index import PageIndex
    from ..retrieval.ranking import LexicalIndex
    from ..retrieval.rerank import RerankSelector
    from ..runtime.assist import Assistant
    from .controls import ForgetReport
    from .interchange import ImportReport

__all__ = ["Answer", "Conversation", "IngestReport", "LocalPager", "ModelOptions", "User"]


class LocalPager:
    """A store of paged conversations and the local model that answers over them."""

    def __init__(
        self,
        store: str | os.PathLike | Store | None = None,
        model: str | os.PathLike | None = None,
        *,
        backend: str | ChatBackend | None = None,
        options: ModelOptions | None = None,
        recall: RecallSettings | None = None,
        rerank: RerankSettings | None = None,
        key: str | None = None,
    ):
        """``store``: a SQLite file (default ``$LOCALPAGER_STORE``, else the user's data directory), a
        ``postgresql://USER@HOST:PORT/DB`` URL (extra ``postgres``) or an open store. ``key``: the SQLite
        store is encrypted with SQLCipher under this passphrase (extra ``encrypt``); its FAISS indexes then
        live in memory only, rebuilt from the store when first searched. ``options``: how the models load
        (``ModelOptions``: the backend's options, the context size, the embedder, llama.cpp's threads and chat
        template); ``model`` and ``backend``, when given, take the place of its own (the GGUF chat model, or a
        served model's name; a backend's name, or a ``ChatBackend`` already loaded)."""
        options = options or ModelOptions()
        if model is not None or backend is not None:
            options = dataclasses.replace(options, model=options.model if model is None else model,
                                          backend=options.backend if backend is None else backend)
        store = store if isinstance(store, Store) else open_store(store, key=key)
        self._open(store, Models(options, recall or RecallSettings(), threading.RLock()), rerank, owns_models=True)

    @classmethod
    def sharing(cls, store: Store, models: Models, rerank: RerankSettings | None = None) -> LocalPager:
        """A LocalPager over ``store`` with another's ``models`` (what ``namespace`` makes): their options and
        their lock are its own, and closing it leaves them loaded."""
        lp = cls.__new__(cls)
        lp._open(store, models, rerank, owns_models=False)
        return lp

    def _open(self, store: Store, models: Models, rerank: RerankSettings | None, owns_models: bool) -> None:
        self.store = store
        self.models = models
        self._owns_models = owns_models
        self.lock = models.lock  # the process's model lock: one for the models, the stores and the namespaces
        self.held = Held(store, models, rerank or RerankSettings(), self.lock)
        self._namespaces: dict[str, LocalPager] = {}

    # -- settings and loaded parts, read through ------------------------------------------------
    @property
    def model(self) -> str | os.PathLike | None:
        return self.models.model

    @property
    def n_ctx(self) -> int:
        return self.models.n_ctx

    @property
    def recall(self) -> RecallSettings:
        return self.models.recall

    @property
    def rerank(self) -> RerankSettings:
        return self.held.rerank

    @property
    def backend(self) -> ChatBackend:
        return self.models.backend

    @property
    def runtime(self) -> Runtime:
        return self.models.runtime

    @property
    def side_backend(self) -> ChatBackend:
        return self.models.side_backend

    @property
    def assistant(self) -> Assistant:
        return self.models.assistant

    @property
    def index(self) -> PageIndex:
        return self.held.index

    @property
    def prefix_states(self) -> PrefixStates:
        return self.held.prefix_states

    @property
    def lock_timeout(self) -> float:
        return self.held.lock_timeout

    @lock_timeout.setter
    def lock_timeout(self, seconds: float) -> None:
        self.held.lock_timeout = seconds

    @property
    def closed(self) -> bool:
        return self.held.closed

    def preload(self) -> None:
        """Start loading the chat model on a background thread (``Models.preload``)."""
        self.models.preload()

    def warm_embedder(self) -> None:
        self.models.warm_embedder()

    def counter(self) -> TokenCounter:
        return self.models.counter()

    def lexical(self, conv_id: str) -> LexicalIndex:
        return self.held.lexical(conv_id)

    def selector(self, conv_id: str) -> RerankSelector:
        return self.held.selector(conv_id)

    # -- conversations ----------------------------------------------------------------------------
    def conversations(self, user: str | None = None) -> list[ConversationInfo]:
        """Every stored conversation, or with ``user`` only that user's."""
        return self.store.list_conversations(user)

    def user(self, name: str, create: bool = False) -> User:
        """A person's memory across their conversations (``users.User``); a name no conversation belongs to is a
        ``UserNotFound``, unless ``create``: a new user, who has a conversation once one is made theirs (their first
        ``User.remember`` makes their memory conversation)."""
        from ..core.checks import did_you_mean

        check_user(name)
        if not create and not self.store.list_conversations(name):
            raise UserNotFound(f"no user {name!r} in {self.store.path}: no conversation belongs to them"
                               f"{did_you_mean(name, self.store.users())}")
        return User(self.held, name)

    def ingest(self, path: str | os.PathLike, format: str = FileFormat.AUTO, config: PagingConfig | None = None,
               replace: bool = False, progress=None, on_turns=None, embed: bool = False,
               user: str | None = None, on_conversations=None) -> IngestReport:
        """Read a conversation file and store every conversation in it, each in one transaction.

        The file is validated whole first; an id already in the store is an error unless ``replace``. ``user``:
        whose the conversations are that the file names no user for (a line's ``"user"``); a stored
        conversation of another user is not replaced.
        ``progress`` wraps the conversations (e.g. ``tqdm``); ``on_turns(paged, total)`` is called as turns
        are paged (every 500 and at each conversation's end), for a bar over one long conversation. ``embed``:
        the caller ``prepare``s the conversations next; their evicted turns are embedded meanwhile (in a helper
        process, while the rest are paged).
        With ``format`` ``auto``, a chat history exported from ChatGPT or Claude (its ``.zip``, folder or
        ``conversations.json``) or an OpenAI-style message list is found by content (``history``): it is read as
        a stream, checked whole before anything is stored, and a conversation stored before is continued with
        the turns it lacks rather than refused (``on_conversations(stage, done, total)`` hears its progress)."""
        options = IngestOptions(format, config, replace, progress, on_turns, embed, user, on_conversations)
        if options.format == FileFormat.AUTO and (export := find_export(path)) is not None:
            return import_history(self.held, export, options)
        return ingest_file(self.held, path, options)

    def conversation(self, conv_id: str, create: bool = False, config: PagingConfig | None = None, *,
                     warm: bool = False, user: str | None = None) -> Conversation:
        """An open conversation; ``create`` makes an empty one (with ``config``) if it does not exist.

        Opening reads the conversation's settings only (an unknown id is a ``StoreError``); see
        ``Conversation`` for what loads when. ``warm``: an app about to wait for the user's first message
        starts ``Conversation.warm_up(models=True)``, so that the first answer finds the models, vectors and
        indexes loaded. ``user``: the conversation is that user's (one ``create`` makes is theirs); opening one
        that belongs to nobody or to another user is a ``StoreError``. Without it any conversation opens."""
        if user is not None:
            check_user(user)
        with self.lock:
            if create and not self.store.has_conversation(conv_id):
                config = config or PagingConfig()
                try:
                    self.store.create_conversation(conv_id, settings=config.to_dict(), user=user)
                except StoreError:
                    if not self.store.has_conversation(conv_id):  # not another process creating it first
                        raise
            if user is not None:
                check_owner(self.store, conv_id, user)  # an unknown id fails here
            conv = Conversation(self.held, conv_id)
        if warm:
            conv.warm_up(models=True)
        return conv

    def forget_conversation(self, conv_id: str, dry_run: bool = False) -> ForgetReport:
        """Delete a conversation and erase it from the store's files (``dry_run``: only say what would go)."""
        return controls.forget_conversation(self.held, conv_id, dry_run)

    def export(self, path: str | os.PathLike, conv_ids: list[str] | None = None, vectors: bool = False) -> int:
        """Write conversations (default: all) to a JSONL file, readable by ``import_file`` and ``ingest``;
        returns how many were written. Each line names its conversation's user, if it has one."""
        return interchange.export_conversations(self.store, path, conv_ids, vectors=vectors)

    def import_file(self, path: str | os.PathLike, mode: str = ImportMode.ERROR, progress=None,
                    user: str | None = None) -> ImportReport:
        """Read an export back. A conversation already in the store is an error (``mode``, an ``ImportMode``:
        ``error``), replaced (``replace``) or extended with the turns it lacks (``merge``). ``progress(stage,
        done, total)``: see ``interchange.import_conversations``. ``user``: whose the conversations are that the
        file names no user for; one stored as another user's is neither replaced nor extended (a merge leaves
        the stored conversation's user as it was)."""
        return interchange.import_conversations(
            self.held, path, mode, progress, user=user,
            merge=lambda entry: self.conversation(entry.conversation.id).merge(entry))

    # -- what this process holds beside the store ------------------------------------------------
    def check_erasures(self) -> bool:
        """Drop what this process holds if another process erased text since it was built (``Held``)."""
        return self.held.check_erasures()

    def invalidate(self, conv_ids: Sequence[str] | None = None) -> None:
        """Let go of what this process has loaded of ``conv_ids`` (default: every conversation): their pages
        and turns are read from the store again on next use, their BM25 indexes rebuilt. For a change made to
        the store beside this ``LocalPager``; another process's writes are noticed unasked."""
        self.held.invalidate(conv_ids)

    def drop_held(self, generation: int) -> None:
        self.held.drop_held(generation)

    def after_erase(self) -> None:
        self.held.after_erase()

    def finish_erase(self) -> bool:
        """Finish rewriting the store's files after a forget that could not (another process was reading
        the store; ``ForgetReport.rewrite_pending``). True once nothing forgotten is left in them."""
        return self.held.finish_erase()

    def namespace(self, name: str) -> LocalPager:
        """The same models over namespace ``name``'s own store: a schema of its own on PostgreSQL, a file of
        its own beside a SQLite store (``<store>.namespaces/NAME.db``). Nothing of one namespace can be read,
        changed or forgotten through another's, whatever id a request names. It shares this LocalPager's
        models (and so its lock and its embedder); made on first use, closed with this one."""
        from ..store.location import namespace_store

        with self.lock:
            child = self._namespaces.get(name)
            if child is None:
                child = LocalPager.sharing(namespace_store(self.store, name), self.models, self.rerank)
                child.lock_timeout = self.lock_timeout
                self._namespaces[name] = child
            return child

    def close(self) -> None:
        """Save the chat's KV cache and any FAISS index whose save was deferred for the next process (see
        ``localpager.store.kvstate``, ``retrieval.index.SAVE_NOW_BELOW``) and close the store. Warm-ups still
        running stop at their next step and are waited for; the side context this object forked is let go with
        what it keeps (read-ahead notes: up to 64 MB), even while the chat model passed in lives on."""
        self.held.closed = True
        for child in list(self._namespaces.values()):
            child.close()
        self._namespaces.clear()
        if self._owns_models:
            self.models.join_preload()
        for conv in list(self.held.conversations):
            conv.warmer.join(60)
        self.held.close(self.models.loaded if self._owns_models else None)
        if self._owns_models:
            self.models.close()
        self.store.close()
