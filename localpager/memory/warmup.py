"""Work done before a question, so that its answer does not wait for it: a conversation's warm-up.

While the user types, a warmed conversation embeds its evicted and resident turns, builds its BM25 index,
and (with the models warm) reads its chat prompt into the model's KV cache, the focused answer's fixed part
and the likeliest recalls into the side context. It runs on a thread of its own, again whenever a turn
evicts pages or an answer is stored; a question asked meanwhile waits for the lock, and the read-ahead gives
way to it. Each step checks the store's erase generation under the lock first, so nothing another process
forgot meanwhile is embedded or read.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager
from typing import Protocol

from ..core.pager import Pager
from ..core.syntax import warm as warm_parser
from ..core.tokens import TokenCounter
from ..runtime.choices import RecallMode
from ..runtime.answering import FactContext
from .held import Held

log = logging.getLogger("localpager")
# Evicted turns a warmed chat reads ahead into the side context (``Runtime.read_ahead``): the newest that tell
# something, about 1 MB and 100 ms on a core each with SmolLM2-135M.
READ_AHEAD = 32


class Warmable(Protocol):
    """An open conversation, as its warm-up sees it."""

    id: str
    held: Held

    @property
    def pager(self) -> Pager: ...

    @property
    def asking(self) -> bool: ...

    def changing(self) -> AbstractContextManager[None]: ...

    def counted(self, counter: TokenCounter | None = None) -> Pager: ...

    def fact_context(self, pager: Pager) -> FactContext: ...


class Warmer:
    """One conversation's warm-up: ``prepare`` now, or ``start`` on a thread."""

    def __init__(self, conv: Warmable):
        self.conv = conv
        self.held = conv.held
        self.keep_warm = False  # pages a later turn evicts are embedded in the background
        self.models_too = False  # the chat's prompt is read into its KV cache too
        self.thread: threading.Thread | None = None
        self._again = False

    def prepare(self, progress=None, chunk: int = 64) -> int:
        """Embed the evicted pages' turns (``chunk`` pages at a time; ``progress(done_turns, total_turns)``
        after each) and build the BM25 index. Returns how many vectors were computed. Each chunk reads the
        pages again under the lock, after checking for another process's erase."""
        from ..retrieval.choices import Signal
        from ..retrieval.fact_pairs import shipped_bank

        held, conv = self.held, self.conv
        shipped_bank()  # the pair bank's files (``retrieval.fact_pairs``), read once a process, not at a question
        with held.lock:
            ids = [p.page_id for p in conv.pager.evicted]
            index, lexical = held.index, held.lexical(conv.id)
            total = sum(len(p.turn_range) for p in conv.pager.evicted)
        done = computed = 0
        for start in range(0, len(ids), chunk):
            wanted = set(ids[start:start + chunk])
            with held.lock:  # a question asked meanwhile waits for one chunk at most
                held.check_erasures()
                pager = conv.pager
                pages = [p for p in pager.evicted if p.page_id in wanted]
                computed += index.update(conv.id, pages, pager.turns, pager.bookmark, (Signal.TURN,))
            done += sum(len(p.turn_range) for p in pages)
            if progress is not None:
                progress(done, total)
        with held.lock:
            if ids:
                index.signal(Signal.TURN, conv.id)  # read (or rebuilt) now, not at the first question
            lexical.update(conv.pager.turns)
            lexical.warm()
        return computed

    def warm_up(self, models: bool = False) -> threading.Thread:
        """``prepare`` on a background thread (with the embedder loading beside it, and with ``models`` the chat
        model too, then the prompts read), and again whenever ``again`` is called."""
        self.keep_warm = True
        self.models_too = self.models_too or models
        self.held.models.warm_embedder()
        if models:
            self.held.models.preload()  # the chat model loads beside the rest, holding no lock
        return self.start()

    def again(self) -> None:
        """A turn evicted pages, or an answer was stored: warm once more if this conversation is kept warm."""
        if self.keep_warm:
            self.start()

    def start(self) -> threading.Thread:
        """The warm-up thread: started, or told to go round once more if it is running."""
        with self.held.lock:
            if self.thread is not None and self.thread.is_alive():
                self._again = True
                return self.thread

            def loop() -> None:
                try:
                    while True:
                        self._once()
                        with self.held.lock:  # done, unless more was asked meanwhile (one decision, under the lock)
                            if not self._again:
                                self.thread = None
                                return
                            self._again = False
                except BaseException:
                    with self.held.lock:
                        self.thread = None
                    raise

            self._again = False
            self.thread = threading.Thread(target=loop, name=f"localpager-warm-up-{self.conv.id}", daemon=True)
            self.thread.start()
            return self.thread

    def _once(self) -> None:
        if self.held.closed:
            return
        try:
            warm_parser()  # once a process: the user's first request or fact does not wait for its load
        except Exception as exc:  # noqa: BLE001 - a parser missing leaves the rest to warm; a fact needing it reports it
            log.debug("warm-up of the parser: %s", exc)
        try:
            self.prepare()
            self.embed_resident()
            if self.models_too:
                self.prefill_chat()
                self.held.models.runtime.prime_answer()
                self.read_ahead()
        except Exception as exc:  # noqa: BLE001 - a warm-up: the first real use reports a real problem
            log.debug("warm-up of %r: %s", self.conv.id, exc)

    def embed_resident(self) -> None:
        """Embed the resident turns into the embedder's cache: a question ranks them beside the evicted ones, and
        its first ranking otherwise embeds them all while the user waits (about 250 ms for 30 turns on a core)."""
        if self.held.models.recall.mode == RecallMode.NEVER:
            return
        with self.held.lock:
            self.held.check_erasures()  # another process's forget: its text is not embedded again
            pager = self.conv.pager
            texts = [pager.turns[i].text for p in pager.resident for i in p.turn_range if pager.turns[i].text]
            embedder = self.held.index.embedder
        if texts:
            embedder.encode(texts)

    def read_ahead(self, limit: int = READ_AHEAD) -> int:
        """Read the likeliest recalls ahead into the side context (``Runtime.read_ahead``): the turns of evicted
        pages that tell something (``ranking.tells``), newest first, up to ``limit`` or until the side context's
        kept prefixes have no room (a bigger model's notes take more memory, and fewer fit); a question asked
        meanwhile stops it. Returns how many are kept."""
        from ..retrieval.ranking import tells

        held, conv = self.held, self.conv
        if held.models.recall.mode == RecallMode.NEVER:
            return 0
        with held.lock:
            pager = conv.pager
            wanted = [i for p in reversed(pager.evicted) for i in reversed(p.turn_range)
                      if pager.turns[i].text and tells(pager.turns[i])][:limit]
        kept = 0
        for i in wanted:
            if conv.asking or held.closed:
                break
            with held.lock:
                held.check_erasures()
                pager = conv.pager
                if i >= len(pager.turns) or not pager.turns[i].text or not pager.page_of_turn(i).evicted:
                    continue
                if held.models.runtime.read_ahead(pager, i) is None:  # no room left (the same for every turn)
                    break
                kept += 1
        return kept

    def prefill_chat(self) -> None:
        """Evaluate the chat's prompt (system message, bookmarks, resident turns) into the model's KV cache, so
        that the first answer reads its question and little more: a first plain answer otherwise reads the
        whole memory from scratch (2-3 s for 1,500 tokens on 2 cores). Skipped when the cache holds it already
        (a state saved by the previous process, ``store.kvstate``) or the backend keeps no cache of its own."""
        held, conv = self.held, self.conv
        with conv.changing():  # the pages may be recounted under the model's tokenizer: a change
            runtime = held.models.runtime
            backend = runtime.backend
            if not hasattr(backend, "cached_prefix"):
                return
            pager = conv.counted(held.models.counter())
            facts = conv.fact_context(pager)  # the standing facts the prompt's prefix shows, as an answer's will
            pager.fixed_overhead = runtime.system_tokens(facts.shown)
            held.prefix_states.switch_to(conv.id, backend)  # this conversation's saved cache, if any
            _, tokens = runtime.fit(runtime.messages(pager, None, facts=facts.shown))
            if len(tokens) + 1 <= backend.n_ctx and backend.cached_prefix(tokens) < len(tokens) - 1:
                backend.generate(tokens, max_tokens=1)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (up to ``timeout`` seconds) for the warm-up's work to be done; True when nothing is left running."""
        while True:
            with self.held.lock:
                thread = self.thread
            if thread is None or not thread.is_alive():
                return True
            thread.join(timeout)
            if thread.is_alive():
                return False

    def join(self, timeout: float = 60) -> None:
        """At close: wait for a warm-up still running (it stops at its next step)."""
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
