"""The library API: what the CLI calls, and what a desktop app embeds.

    from localpager import LocalPager
    lp = LocalPager("memory.db")
    chat = lp.conversation("work", create=True)
    result = chat.ask("What did I say about the budget?")
    print(result.answer, result.injected_page_ids)

Models load once, lazily, on first use; one lock serialises the model, so a ``LocalPager`` can be
shared between threads. Opening and reading a conversation loads no model at all (not even the
tokenizer) and writes nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from ..backends import DEFAULT_BACKEND, default_backend, load_backend
from ..backends.base import BackendError, ChatBackend, TextCallback
from ..backends.modelpaths import ModelNotFoundError
from ..backends.tokenizers import BackendTokenCounter, counter_for
from ..core.checks import check_text
from ..core.dates import now_stamp
from ..core.eviction import Cooperative
from ..core.pager import DEFAULT_BUDGET, Pager, PagingConfig, page_conversation
from ..core.records import Page, Turn
from ..core.tokens import TokenCounter
from ..retrieval.rerank import RerankSettings
from ..runtime.choices import RecallMode
from ..runtime.recall import ContextOverflowError, PageSelector, RecallSettings, Runtime
from ..runtime.trace import Trace
from ..store.kvstate import PrefixStates
from ..store.choices import FileFormat
from ..store.loaders import load_conversations
from ..store.locks import LockTimeout, conversation_lock
from ..store.location import open_store
from ..store.sqlite import ConversationBusy, ConversationChanged, ConversationInfo, Store, StoreError
from .choices import ImportMode

log = logging.getLogger("localpager")
LOCK_TIMEOUT = 60.0  # seconds; env LOCALPAGER_LOCK_TIMEOUT
# Evicted turns a warmed chat reads ahead into the side context (``Runtime.read_ahead``): the newest that tell
# something, about 1 MB and 100 ms on a core each with SmolLM2-135M.
READ_AHEAD = 32

if TYPE_CHECKING:
    from ..retrieval.index import PageIndex
    from ..retrieval.ranking import LexicalIndex
    from ..runtime.assist import Assistant
    from .controls import ForgetReport, Recall, SearchHit
    from .interchange import ImportReport


@dataclass
class IngestReport:
    conversations: int = 0
    turns: int = 0
    pages: int = 0
    evicted: int = 0
    probes: int = 0
    ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class LocalPager:
    """A store of paged conversations and the local model that answers over them."""

    def __init__(
        self,
        store: str | os.PathLike | Store | None = None,
        model: str | os.PathLike | None = None,
        *,
        backend: str | ChatBackend | None = None,
        backend_options: dict | None = None,
        n_ctx: int = 2048,
        recall: RecallSettings | None = None,
        rerank: RerankSettings | None = None,
        embedder: str | os.PathLike | None = None,
        key: str | None = None,
    ):
        """``store``: a SQLite file (default ``$LOCALPAGER_STORE``, else the user's data directory), a
        ``postgresql://USER@HOST:PORT/DB`` URL (extra ``postgres``) or an open store. ``key``: the SQLite
        store is encrypted with SQLCipher under this passphrase (extra ``encrypt``); its FAISS indexes then
        live in memory only, rebuilt from the store when first searched."""
        self.store = store if isinstance(store, Store) else open_store(store, key=key)
        self.model = model
        backend = backend if backend is not None else default_backend()  # $LOCALPAGER_BACKEND or llama-cpp
        # more options for the backend's factory (openai-http: base_url, api_key, tokenizer, constraint, ...)
        self.backend_options = dict(backend_options or {})
        self.backend_name = backend if isinstance(backend, str) else backend.name
        self._backend: ChatBackend | None = None if isinstance(backend, str) else backend
        self.n_ctx = n_ctx
        self.recall = recall or RecallSettings()
        self.rerank = rerank or RerankSettings()
        self.embedder_path = embedder
        self._index: PageIndex | None = None
        self._runtime: Runtime | None = None
        self._assistant: Assistant | None = None
        self._side: ChatBackend | None = None
        self._preloading: threading.Thread | None = None  # ``preload`` in flight
        self._preloaded: tuple[ChatBackend, ChatBackend] | None = None  # what it loaded, not yet adopted
        self._lexical: dict[str, LexicalIndex] = {}  # BM25 over each conversation's turns, rebuilt as it grows
        # the chat's KV cache per conversation, beside the store; never for an encrypted or read-only store, nor
        # a database server's (nothing is kept beside it)
        self.prefix_states = PrefixStates(self.store.path, erasures=self.store.erase_generation,
                                          enabled=self.store.local and not (self.store.encrypted or self.store.read_only))
        self.lock = threading.RLock()
        self._parent: LocalPager | None = None  # a namespace's LocalPager shares its parent's models (``namespace``)
        self._namespaces: dict[str, LocalPager] = {}
        self._open_conversations: weakref.WeakSet[Conversation] = weakref.WeakSet()  # dropped after an erase
        self.closed = False  # close() was called: warm-ups stop, and what it forked is let go
        # how long a change to a conversation waits for another process's (an ask holds it while the model runs)
        self.lock_timeout = float(os.environ.get("LOCALPAGER_LOCK_TIMEOUT", LOCK_TIMEOUT))

    # -- models, loaded on first use --------------------------------------------------------------
    @property
    def backend(self) -> ChatBackend:
        if self._parent is not None:
            return self._parent.backend
        with self.lock:
            if self._backend is None:
                self._take_preloaded()
            if self._backend is None:
                self._backend = self._load_backend()
            return self._backend

    def _load_backend(self) -> ChatBackend:
        return load_backend(self.backend_name, model_path=self.model, n_ctx=self.n_ctx, **self.backend_options)

    def preload(self) -> None:
        """Start loading the chat model and forking its side context on a background thread that holds no
        lock, so that a new process reads its memory (vectors, indexes, turns) while the model loads; the
        first use of the model waits for it (and loads it itself if the preload failed, reporting why)."""
        if self._parent is not None:
            return self._parent.preload()
        with self.lock:
            if self._backend is not None or self._preloading is not None:
                return

            def load() -> None:
                try:
                    backend = self._load_backend()
                    fork = getattr(backend, "fork", None)
                    self._preloaded = (backend, fork() if fork is not None else backend)
                except Exception as exc:  # noqa: BLE001 - the first real use loads again and reports it
                    log.debug("preloading the chat model: %s", exc)

            self._preloading = threading.Thread(target=load, name="localpager-preload", daemon=True)
            self._preloading.start()

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
        if self._parent is not None:
            return self._parent.runtime
        with self.lock:
            if self._runtime is None:
                recall = self.recall
                asks_model = recall.mode in (RecallMode.AUTO, RecallMode.ALWAYS)
                if getattr(self.backend, "constraint", None) == "none" and asks_model:
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
        if self._parent is not None:
            return self._parent.side_backend
        with self.lock:
            if self._side is None and self._backend is None:
                self._take_preloaded()
            if self._side is None:
                fork = getattr(self.backend, "fork", None)
                self._side = fork() if fork is not None else self.backend
            return self._side

    @property
    def assistant(self) -> Assistant:
        """The model's side work (keywords, eviction advice, worth) on the side context, loaded on first use."""
        if self._parent is not None:
            return self._parent.assistant
        with self.lock:
            if self._assistant is None:
                from ..runtime.assist import Assistant

                self._assistant = Assistant(self.side_backend)
            return self._assistant

    @property
    def index(self) -> PageIndex:
        """The page embeddings and their FAISS indexes (the embedder loads on first search)."""
        with self.lock:
            if self._index is None and self._parent is not None:  # a namespace: its own vectors, the same embedder
                from ..retrieval.index import PageIndex

                self._index = PageIndex(self.store, self._parent.index.embedder)
            if self._index is None:
                from ..retrieval.embedder import default_embedder
                from ..retrieval.index import PageIndex

                self._index = PageIndex(self.store, default_embedder(
                    str(self.embedder_path) if self.embedder_path else None))
            return self._index

    def warm_embedder(self) -> None:
        """Start loading the embedder in the background, unless an index (and so an embedder) is set up."""
        if self._parent is not None:
            return self._parent.warm_embedder()
        if self._index is None:
            from ..retrieval.embedder import default_embedder

            try:
                embedder = default_embedder(str(self.embedder_path) if self.embedder_path else None)
            except ModelNotFoundError:  # said where an embedding is needed, if one is
                return
            warm = getattr(embedder, "warm", None)
            if warm is not None:
                warm()

    def lexical(self, conv_id: str) -> LexicalIndex:
        """The BM25 index of a conversation's turns, kept across questions (turns are appended to it), and
        saved beside a local store that is neither encrypted nor read-only, for the next process."""
        from ..retrieval import lexfile
        from ..retrieval.ranking import LexicalIndex

        with self.lock:
            if conv_id not in self._lexical:
                saved = self.store.local and not (self.store.encrypted or self.store.read_only)
                self._lexical[conv_id] = LexicalIndex(conv_id, file=lexfile.path_for(self.store.path, conv_id)
                                                      if saved else None, erasures=self.store.erase_generation)
            return self._lexical[conv_id]

    def selector(self, conv_id: str) -> PageSelector:
        from ..retrieval.rerank import RerankSelector

        return RerankSelector(self.index, conv_id, self.rerank, self.lexical(conv_id))

    def counter(self) -> TokenCounter:
        """The loaded model's tokenizer, or a vocabulary-only load of the same model file (a backend other
        than llama.cpp's counts with its own tokenizer: a served model's ``--model`` is no file)."""
        if self._parent is not None:
            return self._parent.counter()
        if self._backend is not None or self._preloading is not None or self.backend_name != DEFAULT_BACKEND:
            return BackendTokenCounter(self.backend)  # a preload in flight: its tokenizer, not a second load
        return counter_for(str(self.model) if self.model else None)

    # -- conversations ----------------------------------------------------------------------------
    def conversations(self) -> list[ConversationInfo]:
        return self.store.list_conversations()

    def ingest(self, path: str | os.PathLike, format: str = FileFormat.AUTO, config: PagingConfig | None = None,
               replace: bool = False, progress=None, on_turns=None) -> IngestReport:
        """Read a conversation file and store every conversation in it, each in one transaction.

        The file is validated whole first; an id already in the store is an error unless ``replace``.
        ``progress`` wraps the conversations (e.g. ``tqdm``); ``on_turns(paged, total)`` is called as turns
        are paged (every 500 and at each conversation's end), for a bar over one long conversation."""
        config = config or PagingConfig()
        loaded = load_conversations(path, format)
        if not replace:
            taken = [c.id for c in loaded.conversations if self.store.has_conversation(c.id)]
            if taken:
                raise ValueError(f"already in the store: {', '.join(taken)} (use replace to overwrite)")
        counter = self.counter()
        report = IngestReport(warnings=list(loaded.warnings))
        longest = self.n_ctx - self.recall.max_answer_tokens - 64  # a turn past this fits in no prompt whole
        total, paged = sum(len(c.turns) for c in loaded.conversations), 0
        for conv in loaded.conversations if progress is None else progress(loaded.conversations):
            pager = page_conversation(conv.turns if on_turns is None else _counted(conv.turns, paged, total, on_turns),
                                      counter, config)
            paged += len(conv.turns)
            for turn in conv.turns:
                if len(turn.render().encode()) + config.turn_overhead <= longest:  # a token is a byte or more
                    continue
                size = pager.turn_tokens(turn)
                if size > longest:
                    report.warnings.append(
                        f"{conv.id}: turn {turn.index} is {size} tokens, longer than a {self.n_ctx}-token context "
                        "can show: it is stored and searchable, but no prompt holds it whole (split it, or use a model with a larger context)")
            if pager.pending_keywords() or pager.pending_worth():  # model strategies: one batch per conversation
                from ..runtime.assist import maintain

                maintain(pager, self.assistant)
            settings = {**config.to_dict(), "tokenizer": counter.name}
            # replacing a conversation another process is writing to waits for it, as every writer does
            with conversation_lock(self.store, conv.id, self.lock_timeout):
                self.store.save_conversation(conv.id, conv.turns, pager.pages, conv.probes, settings,
                                             source=str(path), meta=conv.meta, replace=replace)
            report.conversations += 1
            report.turns += len(conv.turns)
            report.pages += len(pager.pages)
            report.evicted += len(pager.evicted)
            report.probes += len(conv.probes)
            report.ids.append(conv.id)
        return report

    def conversation(self, conv_id: str, create: bool = False, config: PagingConfig | None = None, *,
                     warm: bool = False) -> "Conversation":
        """An open conversation; ``create`` makes an empty one (with ``config``) if it does not exist.

        Opening reads the conversation's settings only (an unknown id is a ``StoreError``); see
        ``Conversation`` for what loads when. ``warm``: an app about to wait for the user's first message
        starts ``Conversation.warm_up(models=True)``, so that the first answer finds the models, vectors and
        indexes loaded."""
        with self.lock:
            if create and not self.store.has_conversation(conv_id):
                config = config or PagingConfig()
                try:
                    self.store.create_conversation(conv_id, settings=config.to_dict())
                except StoreError:
                    if not self.store.has_conversation(conv_id):  # not another process creating it first
                        raise
            conv = Conversation(self, conv_id)
        if warm:
            conv.warm_up(models=True)
        return conv

    def forget_conversation(self, conv_id: str, dry_run: bool = False) -> "ForgetReport":
        """Delete a conversation and erase it from the store's files (``dry_run``: only say what would go)."""
        from .controls import forget_conversation

        return forget_conversation(self, conv_id, dry_run)

    def export(self, path: str | os.PathLike, conv_ids: list[str] | None = None, vectors: bool = False) -> int:
        """Write conversations (default: all) to a JSONL file, readable by ``import_file`` and ``ingest``;
        returns how many were written."""
        from .interchange import export_conversations

        return export_conversations(self.store, path, conv_ids, vectors=vectors)

    def import_file(self, path: str | os.PathLike, mode: str = ImportMode.ERROR, progress=None) -> "ImportReport":
        """Read an export back. A conversation already in the store is an error (``mode``, an ``ImportMode``:
        ``error``), replaced (``replace``) or extended with the turns it lacks (``merge``). ``progress(stage,
        done, total)``: see ``interchange.import_conversations``."""
        from .interchange import import_conversations

        return import_conversations(self, path, mode, progress)

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
        """Let go of what this process has loaded of ``conv_ids`` (default: every conversation): their pages
        and turns are read from the store again on next use, their BM25 indexes rebuilt. For a change made to
        the store beside this ``LocalPager`` (an import); another process's writes are noticed unasked."""
        with self.lock:
            wanted = None if conv_ids is None else set(conv_ids)
            for conv in list(self._open_conversations):
                if (wanted is None or conv.id in wanted) and not conv._writing_depth:
                    conv.reload()
            for conv_id in list(self._lexical) if wanted is None else wanted:
                self._lexical.pop(conv_id, None)

    def drop_held(self, generation: int) -> None:
        """Drop everything this process holds that may repeat erased text: loaded pages (read again on next
        use), BM25 indexes, loaded FAISS indexes and the embedder's text cache, and the live KV caches of the
        chat and side contexts; ``generation`` is the store's erase generation what is held from now on is
        built under. A conversation in the middle of a change in this thread keeps its pages (its own lock
        kept the erase away from it)."""
        from ..retrieval import lexfile

        with self.lock:
            self.invalidate()
            if self.store.local:
                lexfile.remove_all(self.store.path)  # saved BM25 postings hold the conversation's words
            if self._index is not None:
                self._index.unload()  # loaded again from the rewritten files, or rebuilt
            self.prefix_states.forget(self._backend, generation)
            for backend in (self._backend, self._side):
                if backend is not None and hasattr(backend, "clear_cache"):
                    backend.clear_cache()

    def after_erase(self) -> None:
        """What lives outside SQLite follows an erase made by this process: FAISS files rewritten (a loaded
        index rebuilt), saved model states beside the store deleted, and what this process holds dropped."""
        from ..retrieval.index import rewrite_indexes

        with self.lock:
            generation = self.store.erase_generation()  # read first: what is held from here on is built under it
            rewrite_indexes(self.store, self._index)
            if self.store.local:
                self.prefix_states.remove_saved()  # saved KV caches (store.kvstate) may hold the erased text
            self.drop_held(generation)

    def finish_erase(self) -> bool:
        """Finish rewriting the store's files after a forget that could not (another process was reading
        the store; ``ForgetReport.rewrite_pending``). True once nothing forgotten is left in them."""
        from .controls import finish_erase

        return finish_erase(self)

    def namespace(self, name: str) -> "LocalPager":
        """The same models over namespace ``name``'s own store: a schema of its own on PostgreSQL, a file of its
        own beside a SQLite store (``<store>.namespaces/NAME.db``). Nothing of one namespace can be read,
        changed or forgotten through another's, whatever id a request names. It shares this LocalPager's
        model, its lock and its embedder; made on first use, closed with this one."""
        from ..store.location import namespace_store

        with self.lock:
            child = self._namespaces.get(name)
            if child is None:
                child = LocalPager(namespace_store(self.store, name), self.model, backend=self.backend_name,
                                   backend_options=self.backend_options, n_ctx=self.n_ctx, recall=self.recall,
                                   rerank=self.rerank, embedder=self.embedder_path)
                child._parent, child.lock, child.lock_timeout = self, self.lock, self.lock_timeout
                self._namespaces[name] = child
            return child

    def close(self) -> None:
        """Save the chat's KV cache and any FAISS index whose save was deferred for the next process (see
        ``localpager.store.kvstate``, ``retrieval.index.SAVE_NOW_BELOW``) and close the store. Warm-ups still
        running stop at their next step and are waited for; the side context this object forked is let go with
        what it keeps (read-ahead notes: up to 64 MB), even while the chat model passed in lives on."""
        self.closed = True
        for child in list(self._namespaces.values()):
            child.close()
        self._namespaces.clear()
        if self._preloading is not None:  # never used: not adopted (its empty KV cache is not saved)
            self._preloading.join()
        for conv in list(self._open_conversations):
            thread = conv._warming
            if thread is not None and thread is not threading.current_thread():
                thread.join(60)
        if self._backend is not None:
            with self.lock:
                self.prefix_states.save(self._backend)
        if self._index is not None:
            with self.lock:
                self._index.flush()  # a large FAISS index changed since it was saved
        with self.lock:
            side, self._side, self._runtime, self._assistant = self._side, None, None, None
        if self._parent is None and side is not None and side is not self._backend and hasattr(side, "clear_cache"):
            side.clear_cache()
        self.store.close()


@dataclass
class Answer:
    """What ``ask`` returns: the answer and the trace of how it was produced."""

    answer: str
    trace: Trace

    @property
    def decision(self) -> str:
        return self.trace.decision

    @property
    def injected_page_ids(self) -> list[int]:
        return self.trace.injected_page_ids

    @property
    def citations(self) -> list:
        """The recalled turns shown to the model (page, turn, time, text), for "from memory: …" in an app."""
        return self.trace.citations

    def to_dict(self) -> dict:
        return self.trace.to_dict()


class Conversation:
    """One stored conversation, paged. Every change is written to the store as it happens.

    Opening one reads its settings only. Its turns and pages load on first use, and the token counter
    (the model's tokenizer) only when something needs token counts: ``add_turn``, ``ask`` and
    ``set_budget``. So reading (``pages``, ``turns``, ``bookmarks``, ``traces``) and ``pin`` load no
    model and write nothing but what they are asked to change. Pages counted by another model's
    tokenizer are recounted under this one, and the recount stored, the first time counts are needed.

    Budgets: ``set_budget(n)`` stores a new memory budget; ``set_budget(n, save=False)`` applies it to
    this open conversation only (a chat session), and ``ask(..., budget=n)`` to that one question only.
    Either way pages evicted under it stay evicted, as any evicted page does, and the stored budget is
    unchanged.
    """

    def __init__(self, lp: LocalPager, conv_id: str):
        self.lp = lp
        self.id = conv_id
        self.store = lp.store
        settings = self.store.settings(conv_id)  # an unknown id fails here
        self._settings_problem: str | None = None  # a stored setting no command can work with
        self.config = self._config_from(settings)  # as stored
        self._tokenizer = settings.get("tokenizer")  # whose tokens the stored counts are
        self._session_budget: int | None = None  # set_budget(..., save=False)
        self._pager: Pager | None = None
        self._counting = False  # the pager counts with a loaded tokenizer
        self._seen = 0  # the store's generation of the conversation the loaded pager reflects
        self._lock = conversation_lock(self.store, conv_id, lp.lock_timeout)
        self._writing_depth = 0
        self._keep_warm = False  # warm_up: pages a later turn evicts are embedded in the background
        self._warming: threading.Thread | None = None
        self._warm_again = False
        self._warm_models = False  # warm_up(models=True): the chat's prompt is read into its KV cache too
        self._asking = 0  # questions being answered: the read-ahead gives way to them
        self._asking_lock = threading.Lock()
        lp._open_conversations.add(self)

    def _config_from(self, settings: dict) -> PagingConfig:
        """The stored paging settings. A budget below 1 (stored by an older localpager) still opens the
        conversation for reading, under the default budget; any change is refused with the command
        that fixes it."""
        try:
            return PagingConfig.from_dict(settings)
        except ValueError as exc:
            budget = settings.get("budget")
            if isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1:
                raise StoreError(f"conversation {self.id!r} in {self.store.path} has a bad stored setting: {exc}") from None
            self._settings_problem = (
                f"conversation {self.id!r} has a stored budget of {budget!r}, not a positive number of tokens "
                f"(saved by an older localpager); fix it with: localpager --store {shlex.quote(str(self.store.path))} "
                f"budget {shlex.quote(self.id)} {DEFAULT_BUDGET}")
            return PagingConfig.from_dict({**settings, "budget": DEFAULT_BUDGET})

    @contextmanager
    def _writing(self, *, settle: bool = False, fixing_budget: bool = False):
        """Hold the conversation for a change: this process's model lock, then the conversation's file lock
        (another process's ``ask`` on it is waited for, up to ``LocalPager.lock_timeout`` seconds; then
        ``ConversationBusy``). On entry the pager is read again if another process changed the
        conversation; with ``settle``, questions left unanswered by a process that died are marked.
        Re-entrant."""
        with self.lp.lock:
            if self._writing_depth:
                self._writing_depth += 1
                try:
                    yield
                finally:
                    self._writing_depth -= 1
                return
            if self.store.read_only:
                raise StoreError(f"store {self.store.path} is read-only (no write permission on it or its folder)")
            if self._settings_problem and not fixing_budget:
                raise StoreError(self._settings_problem)
            try:
                self._lock.acquire(self.lp.lock_timeout)
            except LockTimeout as exc:
                raise ConversationBusy(str(exc)) from None
            self._writing_depth = 1
            try:
                self.lp.check_erasures()  # another process's forget: what this one holds goes first
                self._sync()
                if settle:
                    self._settle_unanswered()
                yield
            finally:
                self._writing_depth = 0
                try:
                    if self._pager is not None:
                        self._seen = self.store.generation(self.id)  # our own writes: nobody else held it
                finally:
                    self._lock.release()

    def _sync(self) -> None:
        """Drop the loaded pager if the store's copy moved on (another process wrote to the conversation)."""
        if self._pager is not None and self.store.generation(self.id) != self._seen:
            settings = self.store.settings(self.id)
            self.config = self._config_from(settings)
            self._tokenizer = settings.get("tokenizer")
            self._pager = None
            self._counting = False

    def _settle_unanswered(self) -> None:
        """Questions stored with no answer, seen while holding the conversation, were being answered by a
        process that died (or whose model failed): each is marked ``interrupted`` in its trace, and if the
        conversation ends with one, an assistant turn says so, so the next prompt shows it went unanswered."""
        if self.store.unanswered(self.id):
            self._mark_interrupted("the process answering it stopped before the answer was stored")

    def _mark_interrupted(self, reason: str) -> None:
        pending = set(self.store.unanswered(self.id))
        if not pending:
            return
        pager = self.pager
        note = None
        changed: list[Page] = []
        if pager.turns and pager.turns[-1].role == "user" and pager.turns[-1].index in pending:
            note = Turn(role="assistant", text=NO_ANSWER, index=len(pager.turns))
            changed = self._count_with().add_turn(note).changed
        try:
            self.store.mark_interrupted(self.id, reason, note, changed)
        except BaseException:
            self._pager, self._counting = None, False  # the note is not stored: read the pages again
            raise

    @property
    def budget(self) -> int:
        """The memory budget in force: a per-call or session budget if one is set, else the stored one."""
        if self._pager is not None:
            return self._pager.config.budget
        return self._session_budget or self.config.budget

    @property
    def pager(self) -> Pager:
        """The conversation's pages and turns, read from the store on first use. Until something needs
        token counts it counts with a stand-in that loads the tokenizer on its first count."""
        with self.lp.lock:
            if not self._writing_depth:
                self.lp.check_erasures()  # nothing another process erased is served from memory
            if self._pager is not None and not self._writing_depth:
                self._sync()  # a reader sees what another process wrote since
            if self._pager is None:
                self._seen = self.store.generation(self.id)  # before the turns: never newer than what is read
                self._pager = self._new_pager(_DeferredCounter(self))
            return self._pager

    def _new_pager(self, counter: TokenCounter) -> Pager:
        turns = self.store.turns(self.id)
        config = dataclasses.replace(self.config, budget=self._session_budget or self.config.budget)
        pager = Pager(counter, config, turns, self.store.pages(self.id, turns))
        if isinstance(pager.eviction, Cooperative):  # the model advises, on first need
            pager.eviction.advisor = self._advise_eviction
        return pager

    def _count_with(self, counter: TokenCounter | None = None) -> Pager:
        """The pager, counting with ``counter`` (default: the model's tokenizer, loaded now if it is not
        yet). Pages counted by another model's tokenizer are recounted under this one, and the counts and
        the tokenizer's name stored."""
        with self.lp.lock:
            if counter is None:
                if self._counting:
                    return self.pager
                counter = self.lp.counter()
            pager = self.pager
            if counter.name != self._tokenizer:  # another model's tokens: recount under this one
                pager = self._pager = self._new_pager(counter)
                turns = pager.turns
                for page in pager.pages:
                    page.token_count = sum(pager.turn_tokens(turns[i]) for i in page.turn_range)
                self._tokenizer = counter.name
                self.store.update_settings(self.id, self._stored_settings())
                self.store.update_pages(self.id, pager.pages)
            pager.counter = counter
            self._counting = True
            return pager

    def _stored_settings(self) -> dict:
        return {**self.config.to_dict(), "tokenizer": self._tokenizer}

    def _advise_eviction(self, candidates, message: str) -> list[int]:
        """The model's eviction advice; if the model fails, none (the rule and FIFO decide), so that adding
        a turn never fails half-way because of it."""
        try:
            return self.lp.assistant.advise_eviction(candidates, message)
        except BackendError as exc:
            log.warning("eviction advice failed, evicting in FIFO order: %s", exc)
            return []

    # -- reading ----------------------------------------------------------------------------------
    @property
    def pages(self) -> list[Page]:
        return self.pager.pages

    @property
    def turns(self) -> list[Turn]:
        return self.pager.turns

    def bookmarks(self, fmt: str | None = None) -> list[str]:
        from ..core.bookmarks import render_bookmark

        return [render_bookmark(p, fmt or self.config.bookmark_format) for p in self.pager.pages]

    def traces(self) -> list[dict]:
        return self.store.traces(self.id)

    def search(self, query: str, limit: int = 10) -> list["SearchHit"]:
        """What is remembered about ``query``: turns ranked as a recall ranks them, with page, time, score;
        a turn corrected later is labelled ``changed``. Loads the embedder, not the chat model."""
        from .controls import search

        return search(self, query, limit)

    def recall(self, question: str, max_turns: int | None = None) -> "Recall":
        """What localpager remembers for ``question``, without its model: whether the recall gate thinks
        memory is relevant, and the turns a recall would inject (then the ranking's next best, up to
        ``max_turns``), each with page, turn, time, resolved dates, speaker, text and score. For an app whose
        own model answers (the MCP server's ``recall`` tool). Loads the embedder, never the chat model."""
        from .controls import recall

        return recall(self, question, max_turns)

    def prepare(self, progress=None, chunk: int = 64) -> int:
        """Build now what a first recall would otherwise build while the user waits: the evicted pages'
        turn vectors (embedded ``chunk`` pages at a time; ``progress(done_turns, total_turns)`` after each
        chunk, e.g. a tqdm bar's update) and the BM25 index. Returns how many vectors were computed.

        Each chunk reads the pages and turns again under the lock, after checking for another process's
        erase, so text forgotten meanwhile is never embedded."""
        from ..retrieval.choices import Signal

        with self.lp.lock:
            ids = [p.page_id for p in self.pager.evicted]
            index, lexical = self.lp.index, self.lp.lexical(self.id)
            total = sum(len(p.turn_range) for p in self.pager.evicted)
        done = computed = 0
        for start in range(0, len(ids), chunk):
            wanted = set(ids[start:start + chunk])
            with self.lp.lock:  # a question asked meanwhile waits for one chunk at most
                self.lp.check_erasures()
                pager = self.pager
                pages = [p for p in pager.evicted if p.page_id in wanted]
                computed += index.update(self.id, pages, pager.turns, pager.bookmark, (Signal.TURN,))
            done += sum(len(p.turn_range) for p in pages)
            if progress is not None:
                progress(done, total)
        with self.lp.lock:
            if ids:
                index.signal(Signal.TURN, self.id)  # read (or rebuilt) now, not at the first question
            lexical.update(self.pager.turns)
            lexical.warm()
        return computed

    def warm_up(self, models: bool = False) -> threading.Thread:
        """``prepare`` on a background thread (with the embedder loading beside it, and with ``models`` the chat
        model too, then the chat's prompt evaluated into its KV cache), and again whenever a turn added later
        evicts pages: call it when the conversation opens for a session that waits for input (a chat), so that
        answers find it done. A question asked meanwhile waits for the lock; an error is left for the first
        real use to report."""
        self._keep_warm = True
        self._warm_models = self._warm_models or models
        self.lp.warm_embedder()
        if models:
            self.lp.preload()  # the chat model loads beside the rest, holding no lock
        return self._start_warming()

    def _warm_once(self) -> None:
        if self.lp.closed:
            return
        try:
            self.prepare()
            self._embed_resident()
            if self._warm_models:
                self._prefill_chat()
                self.lp.runtime.prime_answer()
                self._read_ahead()
        except Exception as exc:  # noqa: BLE001 - a warm-up: the first real use reports a real problem
            log.debug("warm-up of %r: %s", self.id, exc)

    def _start_warming(self) -> threading.Thread:
        """The conversation's warm-up thread: started, or told to go round once more if it is running."""
        with self.lp.lock:
            if self._warming is not None and self._warming.is_alive():
                self._warm_again = True
                return self._warming

            def loop() -> None:
                try:
                    while True:
                        self._warm_once()
                        with self.lp.lock:  # done, unless more was asked meanwhile (one decision, under the lock)
                            if not self._warm_again:
                                self._warming = None
                                return
                            self._warm_again = False
                except BaseException:
                    with self.lp.lock:
                        self._warming = None
                    raise

            self._warm_again = False
            self._warming = threading.Thread(target=loop, name=f"localpager-warm-up-{self.id}", daemon=True)
            self._warming.start()
            return self._warming

    def _embed_resident(self) -> None:
        """Embed the resident turns into the embedder's cache: a question ranks them beside the evicted ones, and
        its first ranking otherwise embeds them all while the user waits (about 250 ms for 30 turns on a core)."""
        if self.lp.recall.mode == RecallMode.NEVER:
            return
        with self.lp.lock:
            self.lp.check_erasures()  # another process's forget: its text is not embedded again
            pager = self.pager
            texts = [pager.turns[i].text for p in pager.resident for i in p.turn_range if pager.turns[i].text]
            embedder = self.lp.index.embedder
        if texts:
            embedder.encode(texts)

    def _read_ahead(self, limit: int = READ_AHEAD) -> int:
        """Read the likeliest recalls ahead into the side context (``Runtime.read_ahead``): the turns of evicted
        pages that tell something (``ranking.tells``), newest first, up to ``limit`` or until the side context's
        kept prefixes have no room (a bigger model's notes take more memory, and fewer fit); a question asked
        meanwhile stops it. Each under the store's lock, after checking for another process's erase, so text
        forgotten meanwhile is never read. Returns how many are kept."""
        from ..retrieval.ranking import tells

        if self.lp.recall.mode == RecallMode.NEVER:
            return 0
        with self.lp.lock:
            pager = self.pager
            wanted = [i for p in reversed(pager.evicted) for i in reversed(p.turn_range)
                      if pager.turns[i].text and tells(pager.turns[i])][:limit]
        kept: list[tuple[int, ...]] = []
        for i in wanted:
            if self._asking or self.lp.closed:
                break
            with self.lp.lock:
                self.lp.check_erasures()
                pager = self.pager
                if i >= len(pager.turns) or not pager.turns[i].text or not pager.page_of_turn(i).evicted:
                    continue
                tokens = self.lp.runtime.read_ahead(pager, i)
                if tokens is None:  # no room left (or nothing to keep: the same for every turn)
                    break
                kept.append(tokens)
        return len(kept)

    def _prefill_chat(self) -> None:
        """Evaluate the chat's prompt (system message, bookmarks, resident turns) into the model's KV cache, so
        that the first answer reads its question and little more: a first plain answer otherwise reads the
        whole memory from scratch (2-3 s for 1,500 tokens on 2 cores). Skipped when the cache holds it already
        (a state saved by the previous process, ``store.kvstate``) or the backend keeps no cache of its own."""
        with self._writing():  # the pages may be recounted under the model's tokenizer: a change
            runtime = self.lp.runtime
            backend = runtime.backend
            if not hasattr(backend, "cached_prefix"):
                return
            pager = self._count_with(self.lp.counter())
            pager.fixed_overhead = runtime.system_tokens()
            self.lp.prefix_states.switch_to(self.id, backend)  # this conversation's saved cache, if any
            _, tokens = runtime.fit(runtime.messages(pager, None))
            if len(tokens) + 1 <= backend.n_ctx and backend.cached_prefix(tokens) < len(tokens) - 1:
                backend.generate(tokens, max_tokens=1)

    def warmed(self, timeout: float | None = None) -> bool:
        """Wait (up to ``timeout`` seconds) for the warm-up's work to be done, as a user's typing would; True
        when nothing is left running."""
        while True:
            with self.lp.lock:
                thread = self._warming
            if thread is None or not thread.is_alive():
                return True
            thread.join(timeout)
            if thread.is_alive():
                return False

    # -- what the user controls -------------------------------------------------------------------
    def forget(self, turn: int | None = None, page: int | None = None, match: str | None = None,
               dry_run: bool = False) -> "ForgetReport":
        """Forget one turn, one page's turns, or every turn containing ``match`` (case-insensitive): text,
        vectors, bookmark words, and traces and probes that repeat them, erased from the store's files.
        Turn indices stay as they were. ``dry_run`` lists what would go and changes nothing."""
        from .controls import forget

        return forget(self, turn, page, match, dry_run)

    def correct(self, turn: int, text: str) -> Turn:
        """Record ``text`` as the corrected statement of turn ``turn`` (appended as a new turn, same speaker);
        the old turn is marked superseded: recall shows the new one, search labels the old one ``changed``."""
        from .controls import correct

        return correct(self, turn, text)

    def supersede(self, turn: int, by: int) -> None:
        """Mark turn ``turn`` as corrected by the later turn ``by`` (already in the conversation)."""
        from .controls import supersede

        supersede(self, turn, by)

    def reload(self) -> None:
        """Read the turns and pages from the store again on next use (after a change made beside the pager)."""
        with self.lp.lock:
            self._pager = None
            self._counting = False

    # -- changing ---------------------------------------------------------------------------------
    def maintain(self) -> list[Page]:
        """Do the model work that waits: keywords of closed pages under a model keyword strategy, and
        worth verdicts when ``worth`` is on. ``ask`` calls it after storing its answer; an app may also
        call it when idle. Runs on the assistant's own context: the chat's KV cache is kept."""
        with self._writing():
            if not (self.pager.pending_keywords() or self.pager.pending_worth()):
                return []
            from ..runtime.assist import maintain

            changed = maintain(self.pager, self.lp.assistant)
            self.store.update_pages(self.id, changed)
            return changed

    def set_budget(self, budget: int, *, save: bool = True) -> None:
        """A new memory budget in tokens; evicts at once if the memory is now over it (the evicted pages
        are stored, as every eviction is).

        ``save`` stores the budget with the conversation; ``save=False`` applies it to this open
        ``Conversation`` only (a chat session): the stored budget stays as it was, and the conversation
        opened again pages under the stored one."""
        _check_budget(budget)
        with self._writing(fixing_budget=save):
            self._count_with()
            if save:
                self.config.budget = budget
                self._session_budget = None
                self.store.update_settings(self.id, self._stored_settings())
                self._settings_problem = None
            else:
                self._session_budget = budget
            self._apply_budget(budget)

    def _apply_budget(self, budget: int) -> list[Page]:
        """Page under ``budget`` from now on, evicting at once (and storing it) if the memory is over it."""
        pager = self._count_with()
        pager.config.budget = budget
        evicted = pager.enforce_budget()
        if evicted:
            self.store.update_pages(self.id, evicted)
        return evicted

    @contextmanager
    def _budget_for_call(self, budget: int | None):
        """``budget`` in force inside the block (none: the budget in force stays), then the one before."""
        if budget is None:
            yield
            return
        before = self._count_with().config.budget
        self._apply_budget(budget)
        try:
            yield
        finally:
            self._apply_budget(before)

    def pin(self, page_id: int, pinned: bool = True) -> Page:
        """Keep a page in the prompt (a pinned page is never evicted); an evicted page stays evicted."""
        with self._writing():
            page = self.pager.page(page_id)
            page.pinned = pinned
            self.store.update_pages(self.id, [page])
            return page

    def add_turn(self, role: str, text: str, time: str | None = None, speaker: str | None = None, *,
                 stamp: bool = True) -> Turn:
        """Append a turn and make it durable (with the paging it caused) before returning.

        A turn without a ``time`` is stamped with the present moment (``stamp``), so that what it says
        about time ("yesterday", "next Friday") can be resolved later (``localpager.core.dates``); replaying a
        transcript that has no times, pass ``stamp=False``."""
        if role not in ("user", "assistant"):
            raise ValueError(f"role must be 'user' or 'assistant', got {role!r}")
        if not text.strip():
            raise ValueError("a turn needs some text")
        check_text(text)
        with self._writing(settle=True):
            return self._append(role, text, time or (now_stamp() if stamp else None), speaker)

    def _append(self, role: str, text: str, time: str | None = None, speaker: str | None = None, *,
                unanswered: bool = False, answers: tuple[int, dict] | None = None,
                touch: Sequence[int] = ()) -> Turn:
        """Page a new turn and store it with every page it changed (and ``touch``'s uses) in one transaction.
        If the store refuses it, the pager is read again, so memory never holds a turn the store lacks; if
        another writer that does not take the conversation's lock got there first, it is tried once more
        on the conversation as it now is."""
        for attempt in (1, 2):
            pager = self._count_with()
            turn = Turn(role=role, text=text, index=len(pager.turns), time=time, speaker=speaker)
            try:
                paged = pager.add_turn(turn)
                changed = {p.page_id: p for p in paged.changed}
                changed.update({p.page_id: p for p in pager.touch(touch, turn.index)})
                self._seen = self.store.append_turn(self.id, turn, list(changed.values()),
                                                    unanswered=unanswered, answers=answers)
                if self._keep_warm and paged.evicted:
                    self._start_warming()  # the newly evicted pages embedded meanwhile (and the prompt read)
                return turn
            except ConversationChanged:
                self._pager, self._counting = None, False
                if attempt == 2:
                    raise
            except BaseException:
                self._pager, self._counting = None, False
                raise
        raise AssertionError("unreachable")

    def ask(self, question: str, *, remember: bool = True, on_text: TextCallback | None = None,
            selector: PageSelector | None = None, mode: str | None = None, layout: str | None = None,
            budget: int | None = None) -> Answer:
        """Answer ``question`` with the local model, recalling evicted pages as needed.

        With ``remember`` the question and the answer become turns of the conversation (the question
        is durable before the model runs); without it nothing is stored (evaluation probes).
        ``selector`` overrides what a recall injects (default: reranking by embedding similarity) and
        ``mode`` the recall mode and ``layout`` the answer layout (see ``RecallSettings``) for this question only.
        ``budget`` is a memory budget for this question only: the conversation is paged under it while
        the question is answered (pages it evicts stay evicted) and the budget in force before comes back
        after; the stored budget is unchanged (``set_budget`` changes it)."""
        if budget is not None:
            _check_budget(budget)
        check_text(question, "the question")
        with self._asking_lock:
            self._asking += 1
        try:
            return self._ask(question, remember=remember, on_text=on_text, selector=selector, mode=mode,
                             layout=layout, budget=budget)
        finally:
            with self._asking_lock:
                self._asking -= 1

    def _ask(self, question: str, *, remember: bool, on_text: TextCallback | None, selector: PageSelector | None,
             mode: str | None, layout: str | None, budget: int | None) -> Answer:
        if (mode or self.lp.recall.mode) != RecallMode.NEVER and self.pager.evicted:
            self.lp.warm_embedder()  # recall may need it: it loads beside the chat model
        with self._writing(settle=True):
            runtime = self.lp.runtime
            pager = self._count_with(self.lp.counter())  # the loaded model's own tokenizer from here on
            pager.fixed_overhead = runtime.system_tokens()
            in_force = budget or pager.config.budget
            limit = runtime.max_turn_tokens(in_force)
            if limit < 16:
                raise ValueError(
                    f"a memory budget of {in_force} tokens leaves no room for a question and an answer "
                    f"in the model's context of {runtime.backend.n_ctx}; lower --budget or raise --n-ctx"
                )
            size = pager.counter.count(question)
            if size > limit:
                raise ContextOverflowError(
                    f"the question is {size} tokens; with a memory budget of {in_force} the "
                    f"context of {runtime.backend.n_ctx} leaves room for {limit}"
                )
            with self._budget_for_call(budget):
                if remember:  # durable before the model runs, marked unanswered until the answer is stored
                    self._append("user", question, now_stamp(), unanswered=True)
                self.lp.prefix_states.switch_to(self.id, runtime.backend)  # resume this chat's KV cache if saved
                try:
                    trace = runtime.answer(self.pager, question, pending=not remember, on_text=on_text,
                                           selector=selector or self.lp.selector(self.id), mode=mode, layout=layout)
                except BaseException as exc:
                    if remember:
                        self._mark_interrupted(f"no answer: {(str(exc) or type(exc).__name__).splitlines()[0]}")
                    raise
                if getattr(runtime.backend, "estimated", False):  # token counts are an estimate: say so
                    trace.tokens["estimated"] = 1
                if remember:  # the answer, the pages it used and its trace: one transaction
                    self._append("assistant", trace.answer or "…", now_stamp(), answers=(trace.turn, trace.to_dict()),
                                 touch=trace.injected_page_ids)
            if remember:
                try:
                    self.maintain()
                except BackendError as exc:  # the answer is stored; the pages stay pending for the next try
                    log.warning("model side work failed, will retry after the next answer: %s", exc)
                if self._keep_warm:
                    # the question and its answer embedded for the next ranking; after a recall answered on the side
                    # context (with models warm) also read into the chat's cache, which has not read them and the next
                    # turn would (50-70 tokens against 15-25): while the user types
                    self._start_warming()
            return Answer(trace.answer, trace)


NO_ANSWER = "(no answer: it was interrupted before it was stored)"


def _counted(turns: Sequence[Turn], before: int, total: int, report, every: int = 500):
    """``turns`` one by one, calling ``report(before + n, total)`` every ``every`` turns and at the end."""
    n = 0
    for n, turn in enumerate(turns, start=1):
        yield turn
        if n % every == 0:
            report(before + n, total)
    report(before + n, total)


def _check_budget(budget: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive number of tokens, got {budget!r}")


class _DeferredCounter:
    """The pager's counter until something needs a count: the first count loads the model's tokenizer
    (through the conversation, which recounts pages counted by another model's tokenizer) and the
    pager counts with that from then on."""

    def __init__(self, conversation: Conversation):
        self.conversation = conversation

    @property
    def name(self) -> str | None:
        return self.conversation._tokenizer

    def count(self, text: str) -> int:
        return self.conversation._count_with().counter.count(text)
