"""What one process holds of one store beside it: vectors and their FAISS indexes, BM25 indexes, the chat's
saved KV caches, and the conversations it has open.

All of it is derived from the store and may repeat text the store has since erased, in this process or
another. So every use first checks the store's erase generation (``check_erasures``): if it moved on, what is
held is dropped and built again from the store (``drop_held``); an erase made here rewrites the files beside
the store too (``after_erase``). A ``LocalPager`` has one ``Held`` for its store, and each namespace its own.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from ..core.facts import StandingFact
from ..store.base import Store
from ..store.kvstate import PrefixStates
from .models import Models

if TYPE_CHECKING:
    from ..retrieval.index import PageIndex
    from ..retrieval.ranking import LexicalIndex
    from ..retrieval.rerank import RerankSelector, RerankSettings

LOCK_TIMEOUT = 60.0  # seconds; env LOCALPAGER_LOCK_TIMEOUT


class Reloadable(Protocol):
    """An open conversation, as far as dropping what it holds goes."""

    id: str

    @property
    def writing(self) -> bool: ...

    def reload(self) -> None: ...


class Held:
    """The derived state of ``store`` in this process, built with ``models``' embedder, under ``lock`` (the
    process's model lock: an answer reads all of it)."""

    def __init__(self, store: Store, models: Models, rerank: RerankSettings, lock: threading.RLock):
        self.store = store
        self.models = models
        self.rerank = rerank
        self.lock = lock
        self._index: PageIndex | None = None
        self._lexical: dict[str, LexicalIndex] = {}  # BM25 over each conversation's turns, rebuilt as it grows
        # the chat's KV cache per conversation, beside the store; never for an encrypted or read-only store, nor
        # a database server's (nothing is kept beside it)
        self.prefix_states = PrefixStates(store.path, erasures=store.erase_generation, enabled=self.saves_beside)
        self.conversations: weakref.WeakSet[Reloadable] = weakref.WeakSet()  # open ones: dropped after an erase
        self.closed = False  # close() was called: warm-ups stop, and what was forked is let go
        # a user's other conversations whose every turn is embedded, with their turn count then (``user_recall``)
        self.user_embedded: dict[str, int] = {}
        # other conversations of a user opened to recall from, the most recent few (``Conversation._opened``): a
        # question in a new chat reads their pages from memory, not the store (each still syncs with the store)
        self.opened: OrderedDict[str, Any] = OrderedDict()
        # how long a change to a conversation waits for another process's (an ask holds it while the model runs)
        self.lock_timeout = float(os.environ.get("LOCALPAGER_LOCK_TIMEOUT", LOCK_TIMEOUT))

    @property
    def saves_beside(self) -> bool:
        """Whether derived files are kept beside the store: a local file, neither encrypted nor read-only."""
        return self.store.local and not (self.store.encrypted or self.store.read_only)

    # -- the indexes ------------------------------------------------------------------------------
    @property
    def index(self) -> PageIndex:
        """The page embeddings and their FAISS indexes (the embedder loads on first search)."""
        with self.lock:
            if self._index is None:
                from ..retrieval.index import PageIndex

                self._index = PageIndex(self.store, self.models.embedder)
            return self._index

    def lexical(self, conv_id: str) -> LexicalIndex:
        """The BM25 index of a conversation's turns, kept across questions (turns are appended to it), and
        saved beside a local store that is neither encrypted nor read-only, for the next process."""
        from ..retrieval import lexfile
        from ..retrieval.ranking import LexicalIndex, LexiconFile

        with self.lock:
            if conv_id not in self._lexical:
                file = lexfile.path_for(self.store.path, conv_id) if self.saves_beside else None
                # saved only while nothing is erased after the generation what this process holds was read under
                self._lexical[conv_id] = LexicalIndex(conv_id, file=LexiconFile(
                    file, self.store.erase_generation, self.prefix_states.generation))
            return self._lexical[conv_id]

    def selector(self, conv_id: str, facts: Sequence[StandingFact] = ()) -> RerankSelector:
        """The reranking selector of a conversation, scoring ``facts`` (its standing facts) too."""
        from ..retrieval.rerank import RerankSelector

        return RerankSelector(self.index, conv_id, self.rerank, self.lexical(conv_id), facts)

    # -- erasures ---------------------------------------------------------------------------------
    def check_erasures(self) -> bool:
        """If another process erased text since what this one holds was built (the store's erase generation
        moved on), drop it all rather than serve or save it (``drop_held``). True if it did."""
        with self.lock:
            current = self.store.erase_generation()
            if current == self.prefix_states.generation:
                return False
            self.drop_held(current)
            return True

    def invalidate(self, conv_ids: Sequence[str] | None = None) -> None:
        """Let go of what is loaded of ``conv_ids`` (default: every conversation): their pages and turns are
        read from the store again on next use, their BM25 indexes rebuilt."""
        with self.lock:
            wanted = None if conv_ids is None else set(conv_ids)
            for conv in list(self.conversations):
                if (wanted is None or conv.id in wanted) and not conv.writing:
                    conv.reload()
            for conv_id in list(self._lexical) if wanted is None else wanted:
                self._lexical.pop(conv_id, None)

    def drop_held(self, generation: int) -> None:
        """Drop everything held that may repeat erased text: loaded pages (read again on next use), BM25
        indexes, loaded FAISS indexes and the embedder's text cache, and the live KV caches of the chat and
        side contexts; ``generation`` is the store's erase generation what is held from now on is built under.
        A conversation in the middle of a change in this thread keeps its pages (its own lock kept the erase
        away from it)."""
        from ..retrieval import lexfile

        with self.lock:
            self.invalidate()
            self.opened.clear()  # a user's other conversations opened to recall from: opened again on next use
            self.user_embedded.clear()
            if self.store.local:
                lexfile.remove_all(self.store.path)  # saved BM25 postings hold the conversation's words
            if self._index is not None:
                self._index.unload()  # loaded again from the rewritten files, or rebuilt
            self.prefix_states.forget(self.models.loaded, generation)
            self.models.clear_caches()

    def after_erase(self) -> None:
        """What lives outside the store follows an erase made by this process: FAISS files rewritten (a loaded
        index rebuilt), saved model states beside the store deleted, and what this process holds dropped."""
        from ..retrieval.index import rewrite_indexes

        with self.lock:
            generation = self.store.erase_generation()  # read first: what is held from here on is built under it
            rewrite_indexes(self.store, self._index)
            if self.store.local:
                self.prefix_states.remove_saved()  # saved KV caches (store.kvstate) may hold the erased text
            self.drop_held(generation)

    def finish_erase(self) -> bool:
        """Rewrite the store's files again, and the indexes and caches beside them: what a forget could not
        finish (another process was reading the store, or the forgetting process died). True once nothing
        erased is left in them."""
        with self.lock:
            rewritten = self.store.erase()
            self.after_erase()
            return rewritten

    def close(self, backend=None) -> None:
        """Save the chat's KV cache (``backend``'s, when this process owns the model) and any FAISS index whose
        save was deferred, for the next process (see ``store.kvstate``, ``retrieval.index.SAVE_NOW_BELOW``)."""
        self.closed = True
        with self.lock:
            if backend is not None:
                self.prefix_states.save(backend)
            if self._index is not None:
                self._index.flush()  # a large FAISS index changed since it was saved
