"""One stored conversation, paged: what ``LocalPager.conversation`` opens.

Every change is written to the store as it happens, holding the process's model lock and then the
conversation's cross-process lock (``changing``); a reader sees what another process wrote since, and nothing
another process erased is served from memory (``Held.check_erasures``).
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ..backends.base import BackendError, TextCallback
from ..core.checks import check_text
from ..core.dates import now_stamp
from ..core.eviction import Cooperative
from ..core.facts import FACTS_VERSION, StandingFact
from ..core.pager import DEFAULT_BUDGET, Pager, PagingConfig
from ..core.records import Page, Turn
from ..core.tokens import TokenCounter
from ..runtime.choices import RecallMode
from ..retrieval.facts import prompt_facts
from ..retrieval.user_recall import UserRecall
from ..runtime.answering import FactContext
from ..runtime.recall import ContextOverflowError
from ..runtime.selector import PageSelector
from ..runtime.trace import Trace
from ..store.base import ConversationBusy, ConversationChanged, ConversationInfo, PinRoom, StoreError
from ..store.locks import LockTimeout, conversation_lock
from . import controls, fact_edits, interchange
from .held import Held
from .fact_edits import FactChange
from .interchange import FORGOTTEN_TEXT, Entry
from .user_facts import across
from .warmup import Warmer

if TYPE_CHECKING:
    from .controls import ForgetReport, Recall, SearchHit

log = logging.getLogger("localpager")
NO_ANSWER = "(no answer: it was interrupted before it was stored)"
OPENED_OTHERS = 4  # a user's other conversations kept open to recall from (``_opened``)
# Turns of a user's other conversations embedded for one answer, about (``_embed_others``: a page at a time): an
# imported history of thousands of turns is embedded a share per answer, newest conversations first, instead of
# blocking the first answer for minutes (4,440 imported turns took 2 min 10 s on two cores); ``ingest --embed``
# embeds it all ahead, and ``serve`` embeds the rest between requests (``embed_history``).
USER_EMBED_PER_ANSWER = 128


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


@dataclass(frozen=True)
class AnswerRecord:
    """What an answer turn is stored with (``Store.append_turn``): ``answers``, its question's turn and the trace
    that replaces the question's; ``touch``, the pages it used (their uses counted); ``asked``, the ids of the
    standing facts it was given."""

    answers: tuple[int, dict]
    touch: Sequence[int] = ()
    asked: Sequence[int] = ()


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

    def __init__(self, held: Held, conv_id: str):
        self.held = held
        self.id = conv_id
        self.store = held.store
        settings = self.store.settings(conv_id)  # an unknown id fails here
        self._settings_problem: str | None = None  # a stored setting no command can work with
        self.config = self._config_from(settings)  # as stored
        self._tokenizer = settings.get("tokenizer")  # whose tokens the stored counts are
        self._session_budget: int | None = None  # set_budget(..., save=False)
        self._pager: Pager | None = None
        self._counting = False  # the pager counts with a loaded tokenizer
        self._seen = 0  # the store's generation of the conversation the loaded pager reflects
        self._lock = conversation_lock(self.store, conv_id, held.lock_timeout)
        self._writing_depth = 0
        self._asking = 0  # questions being answered: the read-ahead gives way to them
        self._asking_lock = threading.Lock()
        self.warmer = Warmer(self)
        held.conversations.add(self)

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

    @property
    def user(self) -> str | None:
        """Whose conversation this is (None: nobody's), as the store says."""
        return self.store.conversation_user(self.id)

    @property
    def writing(self) -> bool:
        """Held for a change in this process right now (``changing``)."""
        return bool(self._writing_depth)

    @property
    def asking(self) -> bool:
        """A question is being answered."""
        return bool(self._asking)

    @contextmanager
    def changing(self, *, settle: bool = False, fixing_budget: bool = False):
        """Hold the conversation for a change: this process's model lock, then the conversation's file lock
        (another process's ``ask`` on it is waited for, up to ``Held.lock_timeout`` seconds; then
        ``ConversationBusy``). On entry the pager is read again if another process changed the
        conversation; with ``settle``, questions left unanswered by a process that died are marked.
        Re-entrant."""
        with self.held.lock:
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
                self._lock.acquire(self.held.lock_timeout)
            except LockTimeout as exc:
                raise ConversationBusy(str(exc)) from None
            self._writing_depth = 1
            try:
                self.held.check_erasures()  # another process's forget: what this one holds goes first
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
            changed = self.counted().add_turn(note).changed
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
        with self.held.lock:
            if not self._writing_depth:
                self.held.check_erasures()  # nothing another process erased is served from memory
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

    def counted(self, counter: TokenCounter | None = None) -> Pager:
        """The pager, counting with ``counter`` (default: the model's tokenizer, loaded now if it is not
        yet). Pages counted by another model's tokenizer are recounted under this one, and the counts and
        the tokenizer's name stored."""
        with self.held.lock:
            if counter is None:
                if self._counting:
                    return self.pager
                counter = self.held.models.counter()
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
            return self.held.models.assistant.advise_eviction(candidates, message)
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

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """What is remembered about ``query``: turns ranked as a recall ranks them, with page, time, score;
        a turn corrected later is labelled ``changed``. Loads the embedder, not the chat model."""
        with self.held.lock:
            pager = self.pager  # first: another process's forget drops what this one holds (its BM25 index too)
            return controls.search(self.held.selector(self.id), pager, query, limit)

    def recall(self, question: str, max_turns: int | None = None) -> Recall:
        """What localpager remembers for ``question``, without its model: whether the recall gate thinks
        memory is relevant, and the turns a recall would inject (then the ranking's next best, up to
        ``max_turns``), each with page, turn, time, resolved dates, speaker, text and score. For an app whose
        own model answers (the MCP server's ``recall`` tool). Loads the embedder, never the chat model.

        In a conversation of a user, the facts are all of theirs, and the turns are those of another conversation
        of theirs when its best turn matches the question better than this one's (``Recall.conversation`` names
        it), recalled there by its own selector, as an answer here would (``runtime.recall``)."""
        with self.held.lock:
            pager = self.pager  # first: another process's forget drops what this one holds (its BM25 index too)
            user = self.user
            if user is None:
                return controls.recall(self.held.selector(self.id, self.facts(all=True)), pager, question, max_turns)
            selector = self._selector(self._user_facts(user))  # with their other conversations to recall from
            other = selector.foreign(question, pager) if question.strip() else None
            if other is None:
                return controls.recall(selector, pager, question, max_turns)
            found = controls.recall(other.selector, other.pager, question, max_turns)
            found.conversation = other.conversation
            return found

    # -- the long-term layer -----------------------------------------------------------------------
    def facts(self, all: bool = False) -> list[StandingFact]:
        """The standing facts of this conversation (``core.facts``): the durable facts its turns state, each with
        its source turn, kind and day; the current ones, or with ``all`` the superseded and corrected ones too.
        Loads no model and writes nothing (a conversation stored before them gets them derived here; they are
        stored at its next change)."""
        with self.held.lock:
            if self.store.facts_version(self.id) == FACTS_VERSION:
                facts = self.store.facts(self.id)
            else:
                facts = self.store.remade_facts(self.id, self.pager.turns)
        return facts if all else [f for f in facts if f.current]

    def _selector(self, facts: Sequence[StandingFact],
                  listed: Sequence[ConversationInfo] | None = None) -> PageSelector:
        """The reranking selector of this conversation; for a conversation of a user, with their other
        conversations to recall from too (``retrieval.user_recall``; ``listed``: the user's conversations, when
        the caller has just read them)."""
        selector = self.held.selector(self.id, facts)
        user = self.user
        if user is not None:
            listed = self.store.list_conversations(user) if listed is None else listed
            others = [info for info in listed if info.id != self.id]
            self._embed_others(others)
            # only those embedded whole: ranking one opened would embed the rest of its turns at once
            ready = [info.id for info in others if self.held.user_embedded.get(info.id) == info.turns]
            selector.user_recall = UserRecall(self.held.index, ready,
                                              open=lambda conv_id: self._opened(conv_id, facts))
        return selector

    def _embed_others(self, others: Sequence[ConversationInfo], turns: int | None = None) -> int:
        """Embed every turn of the user's other conversations (the resident ones too), for the recall across
        them, once and again after a change: until about ``turns`` are embedded, newest conversations first (one
        begun is finished, unless it alone lacks more than ``turns``: that one page by page); the rest wait for the
        next call, and a conversation not embedded whole is not searched. Each is counted first, so that a new
        process opens none whose every turn has its vector already (a forgotten turn has none: such a conversation
        is opened and checked page by page). Returns how many vectors it computed (a page that gets none is left
        for later, so a caller looping until 0 stops). ``turns``: ``USER_EMBED_PER_ANSWER`` unless given."""
        turns = USER_EMBED_PER_ANSWER if turns is None else turns
        index, left, computed = self.held.index, turns, 0
        for info in reversed(others):
            if self.held.user_embedded.get(info.id) == info.turns:
                continue
            counts = self.store.embedded_turn_counts(info.id, index.embedder.name)  # by page
            if sum(counts.values()) < info.turns:
                if left <= 0:
                    continue
                pager = Conversation(self.held, info.id).pager
                todo = [(page, sum(1 for i in page.turn_range if pager.turns[i].text) - counts.get(page.page_id, 0))
                        for page in pager.pages]
                whole = sum(max(0, missing) for _, missing in todo) <= turns  # begun, finished: it is searched then
                for page, missing in todo:
                    if missing <= 0:
                        continue
                    if left <= 0 and not whole:
                        break
                    made = index.update(info.id, [page], pager.turns, pager.bookmark)
                    computed += made
                    left -= missing
                    if not made:
                        break
                else:
                    self.held.user_embedded[info.id] = info.turns
                continue
            self.held.user_embedded[info.id] = info.turns
        return computed

    def embed_history(self, turns: int | None = None) -> int:
        """Embed about ``turns`` more turns of this user's other conversations, as an answer does, for a caller
        with time between answers (``serve`` after a request: an imported history is then embedded while the user
        reads, not a share per question). Returns how many vectors it computed: 0 once every one has its vectors
        (and for a conversation of no user)."""
        if self.user is None:
            return 0
        with self.held.lock:
            others = [info for info in self.store.list_conversations(self.user) if info.id != self.id]
            return self._embed_others(others, turns)

    def _opened(self, conv_id: str, facts: Sequence[StandingFact]) -> tuple[Pager, PageSelector]:
        """Another conversation of this one's user, to recall from: its pages and turns (kept open among the last
        ``OPENED_OTHERS``, as each syncs with the store on use) and its selector, scoring the user's ``facts`` (its
        relevance floor reads how near the best of them came, as this conversation's does)."""
        opened = self.held.opened
        conv = opened.pop(conv_id, None) or Conversation(self.held, conv_id)
        opened[conv_id] = conv
        while len(opened) > OPENED_OTHERS:
            opened.popitem(last=False)
        return conv.pager, self.held.selector(conv_id, facts)

    def _user_facts(self, user: str, listed: Sequence[ConversationInfo] | None = None) -> list[StandingFact]:
        """The standing facts of this conversation's user across all of their conversations (``users.User.facts``:
        the newest value wins across them), in the order they were said; this conversation's own name no
        conversation (``conv_id`` None), as one conversation's facts do, so that they cite its pages."""
        def here(conv_id: str | None) -> str | None:
            return None if conv_id == self.id else conv_id

        with self.held.lock:
            facts, _ = across(self.store, user, listed)
        return [dataclasses.replace(f, conv_id=here(f.conv_id), superseded_in=here(f.superseded_in)) for f in facts]

    def pin_fact(self, fact_id: int, pinned: bool = True) -> StandingFact:
        """Keep standing fact ``fact_id`` in the prompt's prefix (``pinned=False``: chosen again). The pinned
        facts together must fit ``RecallSettings.fact_share`` of the budget in force, counted by the model's
        tokenizer (loaded for it): a pin past that is refused with ``PinRefused`` (a ``ValueError``) naming the
        pinned ones."""
        with self.changing():
            self._ensure_facts()
            room = self._pin_room() if pinned and any(f.fact_id == fact_id for f in self.store.facts(self.id)) else None
            self.store.pin_fact(self.id, fact_id, pinned, room)
            return next(f for f in self.store.facts(self.id) if f.fact_id == fact_id)

    def _pin_room(self) -> PinRoom:
        """The room pinned standing facts may take: the facts' share of the budget in force, in the model's tokens."""
        share = self.held.models.recall.fact_share
        counter = self.counted().counter
        budget = self.budget
        return PinRoom(int(share * budget), counter.count, f"{share:.0%} of the memory budget of {budget} tokens")

    def _ensure_facts(self) -> None:
        """Standing facts made by an older extractor (or by none: a store that predates them) are made again
        (a change: the caller holds the conversation)."""
        if self.store.facts_version(self.id) != FACTS_VERSION:
            self.store.rebuild_facts(self.id)

    def fact_context(self, pager: Pager, listed: Sequence[ConversationInfo] | None = None) -> FactContext:
        """What an answer sees of the long-term layer: the current standing facts, the ones the prompt's prefix
        shows (those that fit ``RecallSettings.fact_share`` of the budget, by ``prompt_facts``) and the
        keywords of the latest evicted pages."""
        settings = self.held.models.recall
        if not settings.facts:
            return FactContext()
        user = self.user
        every = self.facts(all=True) if user is None else self._user_facts(user, listed)
        current = [f for f in every if f.current]
        room = int(settings.fact_share * pager.config.budget)
        shown = prompt_facts(current, room, pager.counter.count)
        return FactContext(shown, current, every)

    # -- before the user asks ---------------------------------------------------------------------
    def prepare(self, progress=None, chunk: int = 64) -> int:
        """Build now what a first recall would otherwise build while the user waits: the evicted pages'
        turn vectors (embedded ``chunk`` pages at a time; ``progress(done_turns, total_turns)`` after each
        chunk, e.g. a tqdm bar's update) and the BM25 index. Returns how many vectors were computed."""
        return self.warmer.prepare(progress, chunk)

    def warm_up(self, models: bool = False) -> threading.Thread:
        """``prepare`` on a background thread (with the embedder loading beside it, and with ``models`` the chat
        model too, then the chat's prompt evaluated into its KV cache), and again whenever a turn added later
        evicts pages: call it when the conversation opens for a session that waits for input (a chat), so that
        answers find it done. A question asked meanwhile waits for the lock; an error is left for the first
        real use to report (``memory.warmup``)."""
        return self.warmer.warm_up(models)

    def warmed(self, timeout: float | None = None) -> bool:
        """Wait (up to ``timeout`` seconds) for the warm-up's work to be done, as a user's typing would; True
        when nothing is left running."""
        return self.warmer.wait(timeout)

    # -- what the user controls -------------------------------------------------------------------
    def forget(self, turn: int | None = None, page: int | None = None, match: str | None = None,
               dry_run: bool = False) -> ForgetReport:
        """Forget one turn, one page's turns, or every turn containing ``match`` (case-insensitive): text,
        vectors, bookmark words, and traces and probes that repeat them, erased from the store's files.
        Turn indices stay as they were. ``dry_run`` lists what would go and changes nothing."""
        with self.held.lock:
            turns = controls.select_turns(self.pager, turn, page, match)
            report = controls.plan_forget(self.store, self.id, self.pager, turns, match).report
            report.dry_run = dry_run
            if dry_run:
                return report
            if not turns and not (report.probes or report.traces or report.meta_scrubbed):
                # nothing new, but an earlier forget's rewrite may wait: "forget again" finishes it
                return controls.finish_pending(self.held, report)
        with self.changing():  # the plan again, under the conversation's lock: another process may have written
            turns = controls.select_turns(self.pager, turn, page, match)
            report = controls.forget_turns(self.held, self.id, self.pager, turns, match)
            self.reload()
            return report

    def correct(self, turn: int, text: str) -> Turn:
        """Record ``text`` as the corrected statement of turn ``turn`` (appended as a new turn, same speaker);
        the old turn is marked superseded: recall shows the new one, search labels the old one ``changed``."""
        with self.changing():
            old = controls.check_correctable(self.pager, turn)
            new = self.add_turn(old.role, text, speaker=old.speaker)
            self.supersede(turn, new.index)
            return new

    def remember(self, text: str) -> list[StandingFact]:
        """Keep ``text`` as the user's own statement, without a reply: it is stored as a user turn marked
        ``remembered`` (no model is asked, no assistant turn follows) and becomes standing facts as any turn does;
        when the extractor finds none in it, it is one fact of kind ``stated``, the words as one line (at most
        ``core.facts.MAX_FACT_CHARS``). Returns the facts it made. The next question follows it as any turn."""
        fact_edits.check_words(text, "nothing to remember")
        with self.changing(settle=True):
            self._ensure_facts()
            turn = self._append("user", text, now_stamp(), remembered=True)
            return [f for f in self.store.facts(self.id) if f.turn == turn.index]

    def edit_fact(self, fact_id: int, text: str, dry_run: bool = False) -> FactChange:
        """Replace standing fact ``fact_id`` with ``text``: its old words are erased as ``forget`` erases text
        (its source turn forgotten whole, and every turn that repeats its words, such as an answer that quoted it:
        in this conversation and, for a user's, in their others), then ``text`` is remembered (``remember``). The
        source turn's other standing facts that still stand are stated again, each as a remembered turn at its old
        time; what else that turn said goes with it. ``dry_run`` says what would go and changes nothing."""
        return self._change_fact(fact_id, text, dry_run)

    def delete_fact(self, fact_id: int, dry_run: bool = False) -> FactChange:
        """Erase standing fact ``fact_id`` as ``edit_fact`` erases the old words, with nothing in its place (the
        source turn's other standing facts that still stand are stated again; what else it said goes)."""
        return self._change_fact(fact_id, None, dry_run)

    def _change_fact(self, fact_id: int, text: str | None, dry_run: bool) -> FactChange:
        """Delete standing fact ``fact_id`` (``text`` None) or replace it with ``text`` (``fact_edits``)."""
        if text is not None:
            fact_edits.check_words(text, "a fact needs some words")
        with self.changing() if not dry_run else self.held.lock:
            if not dry_run:
                self._ensure_facts()
            plan = fact_edits.erasure(self.facts(all=True), self.pager, fact_id, self.id)
            done = FactChange(self.id, plan.fact, text, kept=plan.kept, dry_run=dry_run)
            if dry_run:
                report = controls.plan_forget(self.store, self.id, self.pager, plan.turns, plan.words).report
                report.dry_run = True
                done.reports.append(report)
            else:
                done.reports.append(controls.forget_turns(self.held, self.id, self.pager, plan.turns, plan.words))
                self.reload()
                source = self.pager.turns[plan.fact.turn]  # its role and speaker (its text is gone)
                again = [self._append(source.role, f.text, f.time, source.speaker, remembered=True).index
                         for f in plan.kept]
                new = ([self._append(source.role, text, now_stamp(), source.speaker, remembered=True).index]
                       if text is not None else [])
                made = self.store.facts(self.id)
                done.kept = [f for f in made if f.turn in again]
                done.facts = [f for f in made if f.turn in new]
        done.reports += self._erase_elsewhere(plan.words, dry_run)
        return done

    def _erase_elsewhere(self, words: str, dry_run: bool) -> list[ForgetReport]:
        """A fact's ``words`` erased from this user's other conversations, where an answer may have quoted them:
        each one's own erasure, one at a time (never two conversations' locks held together)."""
        if self.user is None:
            return []
        reports = []
        for info in self.store.list_conversations(self.user):
            if info.id == self.id:
                continue
            other = Conversation(self.held, info.id)
            with self.held.lock:
                turns = fact_edits.holding(other.pager, words)
                plan = controls.plan_forget(self.store, other.id, other.pager, turns, words).report
            if not (plan.turns or plan.traces or plan.probes or plan.meta_scrubbed):
                continue
            if dry_run:
                plan.dry_run = True
                reports.append(plan)
                continue
            with other.changing():  # planned again under its lock: another process may have written
                turns = fact_edits.holding(other.pager, words)
                reports.append(controls.forget_turns(self.held, other.id, other.pager, turns, words))
                other.reload()
        return reports

    def supersede(self, turn: int, by: int) -> None:
        """Mark turn ``turn`` as corrected by the later turn ``by`` (already in the conversation)."""
        with self.changing():
            controls.supersede(self.store, self.id, self.pager, turn, by)

    def reload(self) -> None:
        """Read the turns and pages from the store again on next use (after a change made beside the pager)."""
        with self.held.lock:
            self._pager = None
            self._counting = False

    def export(self, path, vectors: bool = False) -> None:
        """Write this conversation to a JSONL file (``LocalPager.export`` writes several)."""
        interchange.export_conversations(self.store, path, [self.id], vectors=vectors)

    def merge(self, entry: Entry) -> int:
        """Append the turns of an export's ``entry`` this conversation lacks (paged as new turns are), then its
        superseded marks and pins on pages that cover the same turns; returns how many turns were appended.
        Nothing stored is deleted or rewritten."""
        incoming = entry.conversation.turns
        added = 0
        for t in incoming[len(self.turns):]:
            if t.text:
                self.add_turn(t.role, t.text, t.time, t.speaker, stamp=False, remembered=t.remembered)
            else:  # forgotten in the file: keep its place, without text
                self.add_turn(t.role, FORGOTTEN_TEXT, t.time, t.speaker, stamp=False)
                self.forget(turn=t.index)
            added += 1
        self.reload()
        for t in incoming:
            if t.superseded_by is not None and self.turns[t.index].superseded_by is None and self.turns[t.index].text:
                self.supersede(t.index, t.superseded_by)
        by_range = {(p.first_turn, p.last_turn): p for p in self.pages}
        pinned = [by_range[(p.first_turn, p.last_turn)] for p in entry.state["pages"] or []
                  if p.pinned and (p.first_turn, p.last_turn) in by_range]
        for page in pinned:
            self.pin(page.page_id)
        return added

    # -- changing ---------------------------------------------------------------------------------
    def maintain(self) -> list[Page]:
        """Do the model work that waits: keywords of closed pages under a model keyword strategy, and
        worth verdicts when ``worth`` is on. ``ask`` calls it after storing its answer; an app may also
        call it when idle. Runs on the assistant's own context: the chat's KV cache is kept."""
        with self.changing():
            if not (self.pager.pending_keywords() or self.pager.pending_worth()):
                return []
            from ..runtime.assist import maintain

            changed = maintain(self.pager, self.held.models.assistant)
            self.store.update_pages(self.id, changed)
            return changed

    def set_budget(self, budget: int, *, save: bool = True) -> None:
        """A new memory budget in tokens; evicts at once if the memory is now over it (the evicted pages
        are stored, as every eviction is).

        ``save`` stores the budget with the conversation; ``save=False`` applies it to this open
        ``Conversation`` only (a chat session): the stored budget stays as it was, and the conversation
        opened again pages under the stored one."""
        _check_budget(budget)
        with self.changing(fixing_budget=save):
            self.counted()
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
        pager = self.counted()
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
        before = self.counted().config.budget
        self._apply_budget(budget)
        try:
            yield
        finally:
            self._apply_budget(before)

    def pin(self, page_id: int, pinned: bool = True) -> Page:
        """Keep a page in the prompt (a pinned page is never evicted); an evicted page stays evicted."""
        with self.changing():
            page = self.pager.page(page_id)
            page.pinned = pinned
            self.store.update_pages(self.id, [page])
            return page

    def add_turn(self, role: str, text: str, time: str | None = None, speaker: str | None = None, *,
                 stamp: bool = True, remembered: bool = False) -> Turn:
        """Append a turn and make it durable (with the paging it caused) before returning.

        A turn without a ``time`` is stamped with the present moment (``stamp``), so that what it says
        about time ("yesterday", "next Friday") can be resolved later (``localpager.core.dates``); replaying a
        transcript that has no times, pass ``stamp=False``. ``remembered``: the turn is one the speaker asked
        to be kept (``remember``; an import restoring one)."""
        if role not in ("user", "assistant"):
            raise ValueError(f"role must be 'user' or 'assistant', got {role!r}")
        if not text.strip():
            raise ValueError("a turn needs some text")
        check_text(text)
        with self.changing(settle=True):
            return self._append(role, text, time or (now_stamp() if stamp else None), speaker, remembered=remembered)

    def _append(self, role: str, text: str, time: str | None = None, speaker: str | None = None, *,
                unanswered: bool = False, answer: AnswerRecord | None = None, remembered: bool = False) -> Turn:
        """Page a new turn and store it with every page it changed (and the uses of the pages ``answer`` used)
        in one transaction. If the store refuses it, the pager is read again, so memory never holds a turn the
        store lacks; if another writer that does not take the conversation's lock got there first, it is tried
        once more on the conversation as it now is."""
        answers, touch, asked = (answer.answers, answer.touch, answer.asked) if answer else (None, (), ())
        for attempt in (1, 2):
            pager = self.counted()
            turn = Turn(role=role, text=text, index=len(pager.turns), time=time, speaker=speaker, remembered=remembered)
            try:
                paged = pager.add_turn(turn)
                changed = {p.page_id: p for p in paged.changed}
                changed.update({p.page_id: p for p in pager.touch(touch, turn.index)})
                self._seen = self.store.append_turn(self.id, turn, list(changed.values()),
                                                    unanswered=unanswered, answers=answers, asked=asked)
                if paged.evicted:
                    self.warmer.again()  # the newly evicted pages embedded meanwhile (and the prompt read)
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
        models = self.held.models
        if (mode or models.recall.mode) != RecallMode.NEVER and self.pager.evicted:
            models.warm_embedder()  # recall may need it: it loads beside the chat model
        with self.changing(settle=True):
            runtime = models.runtime
            self._ensure_facts()
            pager = self.counted(models.counter())  # the loaded model's own tokenizer from here on
            user = self.user
            listed = self.store.list_conversations(user) if user is not None else None  # read once for both
            facts = self.fact_context(pager, listed)
            pager.fixed_overhead = runtime.system_tokens(facts.shown)
            _check_question_fits(runtime, pager, question, budget or pager.config.budget)
            with self._budget_for_call(budget):
                if remember:  # durable before the model runs, marked unanswered until the answer is stored
                    self._append("user", question, now_stamp(), unanswered=True)
                self.held.prefix_states.switch_to(self.id, runtime.backend)  # resume this chat's KV cache if saved
                try:
                    trace = runtime.answer(self.pager, question, pending=not remember, on_text=on_text,
                                           selector=selector or self._selector(facts.every, listed),
                                           settings=runtime.settings_with(mode, layout), facts=facts)
                except BaseException as exc:
                    if remember:
                        self._mark_interrupted(f"no answer: {(str(exc) or type(exc).__name__).splitlines()[0]}")
                    raise
                if runtime.backend.estimated:  # token counts are an estimate: say so
                    trace.tokens["estimated"] = 1
                if remember:  # the answer, the pages it used and its trace: one transaction
                    self._append("assistant", trace.answer or "…", now_stamp(), answer=AnswerRecord(
                        (trace.turn, trace.to_dict()), trace.injected_page_ids,
                        [f["fact_id"] for f in trace.facts if trace.decision == "fact" and "conversation" not in f]))
            if remember:
                try:
                    self.maintain()
                except BackendError as exc:  # the answer is stored; the pages stay pending for the next try
                    log.warning("model side work failed, will retry after the next answer: %s", exc)
                # the question and its answer embedded for the next ranking; after a recall answered on the side
                # context (with models warm) also read into the chat's cache, which has not read them and the next
                # turn would (50-70 tokens against 15-25): while the user types
                self.warmer.again()
            return Answer(trace.answer, trace)


def _check_question_fits(runtime, pager: Pager, question: str, in_force: int) -> None:
    """A question and its answer must fit in the model's context beside a memory of ``in_force`` tokens."""
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
        return self.conversation.counted().counter.count(text)
