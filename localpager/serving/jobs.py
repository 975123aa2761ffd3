"""The model work: one model, many clients. Requests on one conversation run in arrival order (a ticket
turnstile per conversation); the model work runs in a worker thread under the ``LocalPager``'s own lock, so
llama.cpp is never re-entered, and it runs to completion even when the client goes away, so no stored turn
is lost. A request's history is matched with the store before that lock (``Matched``), in time about linear
in both, so a long history costs its own request's time only. A request that resends the question the store
ends with, answered, is a retry: it gets the stored answer (``protocol.retried``), so no retry stores a turn
twice. Kept apart from the routes: it needs no web framework.
"""

import asyncio
import dataclasses
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ..memory.api import LocalPager
from ..memory.conversation import NO_ANSWER, Answer, Conversation
from ..store.base import ConversationNotFound, StoreError
from .protocol import USER_HEADER, Msg, Reconciliation, header_value, not_theirs, reconcile, retried


class Turnstile:
    """First come, first served: tickets are taken in arrival order and served in that order (a plain
    lock would let a later request on the same conversation overtake an earlier one)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0
        self._serving = 0

    def ticket(self) -> int:
        with self._cond:
            self._next += 1
            return self._next - 1

    def wait(self, ticket: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._serving == ticket)

    def done(self, ticket: int) -> None:
        with self._cond:
            self._serving = ticket + 1
            self._cond.notify_all()


END = object()  # the last of a job's text pieces
# Between requests, a user's history (an import of thousands of turns) is embedded this many turns a step, under
# the model lock (a request waits for one step at most: about a second on two cores), a pause between steps
IDLE_EMBED_TURNS = 32
IDLE_EMBED_PAUSE_S = 0.05


@dataclass
class Reply:
    """A chat answer as the server sends it: the text stored as the assistant's turn and the trace of how
    it was made (``Trace.to_dict``); ``replayed`` when it is the stored answer to a retried question."""

    text: str
    trace: dict[str, Any]
    replayed: bool = False

    @classmethod
    def of(cls, answer: Answer) -> "Reply":
        return cls(answer.answer or "…", answer.to_dict())


@dataclass
class Job:
    """One chat completion: reconcile the history, then ask, in a worker thread. Text pieces and the
    moment the history is reconciled reach the event loop through ``pieces`` and ``ready``."""

    conv_id: str
    history: list[Msg]
    question: str
    max_tokens: int | None
    loop: asyncio.AbstractEventLoop
    ready: asyncio.Future
    pieces: asyncio.Queue | None = None  # streaming only
    rec: Reconciliation | None = None
    question_turn: int = -1
    started: float = field(default_factory=time.perf_counter)
    client_gone: bool = False
    match_ms: float = 0.0  # matching the history with the store (``ModelRunner._match``), before the model lock
    user: str | None = None  # whose request it is: a new conversation is theirs, another's is refused
    user_header: str = USER_HEADER  # the header that said so (a 403 names it)

    def _to_loop(self, fn, *args) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed (server shutting down): nobody is listening
            pass

    def _resolve(self, value: Any = None, error: BaseException | None = None) -> None:
        def settle() -> None:
            if not self.ready.done():
                self.ready.set_exception(error) if error else self.ready.set_result(value)
        self._to_loop(settle)

    def on_text(self, piece: str) -> None:
        if self.pieces is not None:
            self._to_loop(self.pieces.put_nowait, piece)


@dataclass
class Matched:
    """A request's history matched against the stored conversation at ``generation`` (None: no conversation)."""

    generation: int | None
    rec: Reconciliation
    retry: int | None  # the stored question this request asks again (``retried``), answered
    ms: float = 0.0  # how long reading the stored turns and matching took


class ModelRunner:
    """Runs jobs against one ``LocalPager``: one ``Conversation`` object per id (its pager is the live
    state, so there must be one), a turnstile per conversation, and the pager's model lock around the
    whole of each job."""

    def __init__(self, lp: LocalPager, budget: int | None = None):
        self.lp = lp
        self.budget = budget
        self._conversations: dict[str, Conversation] = {}
        self._turnstiles: dict[str, Turnstile] = {}
        self._lock = threading.Lock()
        self._embedding: threading.Thread | None = None  # ``embed_later``'s, while it runs

    def conversation(self, conv_id: str, create: bool = False, user: str | None = None,
                     header: str = USER_HEADER) -> Conversation:
        """The open conversation ``conv_id`` (``create``: made if it does not exist, as ``user``'s); with ``user``,
        one of another user or of nobody is a 403 (``owned``, naming ``header``: the one that said whose)."""
        with self._lock:
            conv = self._conversations.get(conv_id)
            exists = self.lp.store.has_conversation(conv_id)
            if conv is not None and not exists:
                conv = None  # forgotten whole by another process: a request on it starts afresh
            if exists:
                owned(self.lp.store, conv_id, user, header)
            if conv is None:
                conv = self._conversations[conv_id] = self.lp.conversation(conv_id, create=create, user=user)
            return conv

    def drop(self, conv_id: str) -> None:
        """Forget the open ``Conversation`` of a conversation deleted from the store."""
        with self._lock:
            self._conversations.pop(conv_id, None)

    def ticket(self, conv_id: str) -> tuple[Turnstile, int]:
        """Taken on the event loop when the request arrives, so the order is the arrival order."""
        with self._lock:
            turnstile = self._turnstiles.setdefault(conv_id, Turnstile())
        return turnstile, turnstile.ticket()

    def run(self, job: Job, turnstile: Turnstile, ticket: int) -> Reply:
        turnstile.wait(ticket)
        answered: Conversation | None = None
        try:
            # the history is matched before the model lock, which every conversation shares: a long history
            # costs its own request's time, never another conversation's
            matched = self._match(job)
            with self.lp.lock, ExitStack() as held:  # the model lock: llama.cpp is not re-entrant
                created = not self.lp.store.has_conversation(job.conv_id)
                try:
                    try:
                        conv = self.conversation(job.conv_id, create=True, user=job.user, header=job.user_header)
                        # the conversation's lock from the history to the stored answer: a request on it at
                        # another replica (any process on the store) waits, then reads what this one stored
                        held.enter_context(conv.changing(settle=True))
                        if matched.generation != self._generation(job.conv_id):
                            matched = self._match(job)  # another process wrote to it meanwhile: match again
                        if (replay := self._replay(conv, job, matched)) is not None:
                            return replay
                        self._apply_budget(conv)
                        job.rec = matched.rec
                        for m in job.rec.new:
                            conv.add_turn(m.role, m.text)
                        job.question_turn = len(conv.turns)
                    except BaseException as exc:
                        job._resolve(error=exc)
                        raise
                    job._resolve(job.rec)
                    with self._answer_tokens(job.max_tokens):
                        reply = Reply.of(conv.ask(job.question, on_text=job.on_text))
                    answered = conv if job.user is not None else None
                    return reply
                except BaseException:
                    held.close()  # the conversation's lock goes first: discarding may delete the conversation
                    if created:
                        self._discard_if_empty(job.conv_id)
                    raise
        finally:
            turnstile.done(ticket)
            if job.pieces is not None:
                job._to_loop(job.pieces.put_nowait, END)
            if answered is not None:
                self.embed_later(answered)

    def embed_later(self, conv: Conversation) -> None:
        """After a request of a user's: the rest of their history embedded between requests
        (``Conversation.embed_history``, ``IDLE_EMBED_TURNS`` a step under the model lock), on one thread at a
        time, so that an imported history is searched whole soon, not a share per question."""
        with self._lock:
            if self._embedding is not None and self._embedding.is_alive():
                return
            self._embedding = threading.Thread(target=self._embed_steps, args=(conv,), name="localpager-embed",
                                               daemon=True)
            self._embedding.start()

    def _embed_steps(self, conv: Conversation) -> None:
        while not self.lp.closed:
            with self.lp.lock:
                if self.lp.closed:
                    return
                try:
                    if conv.embed_history(IDLE_EMBED_TURNS) == 0:
                        return
                except Exception:  # noqa: BLE001 - the next answer embeds its share, as without this thread
                    return
            time.sleep(IDLE_EMBED_PAUSE_S)

    def join_embedding(self, timeout: float | None = None) -> None:
        """Wait for the history being embedded between requests (tests; a stopping server does not wait)."""
        thread = self._embedding
        if thread is not None:
            thread.join(timeout)

    def _generation(self, conv_id: str) -> int | None:
        """The stored conversation's generation (it moves with every change to it); None: there is none."""
        try:
            return self.lp.store.generation(conv_id)
        except ConversationNotFound:
            return None

    def _match(self, job: Job) -> "Matched":
        """The request's history matched against the stored conversation as it stands now (``reconcile``,
        ``retried``: time about linear in both), read from the store without the model lock."""
        start = time.perf_counter()
        generation, turns = self._generation(job.conv_id), []
        if generation is not None:
            try:
                turns = self.lp.store.turns(job.conv_id)
            except ConversationNotFound:  # deleted meanwhile: the generation differs under the lock
                pass
        turns = [t for t in turns if not t.remembered]  # kept by remember, never part of a client's history
        stored = [Msg(t.role, t.text) for t in turns]
        retry = retried(stored, job.history, job.question)
        if retry is not None and turns[-1].text.strip() in ("", NO_ANSWER):
            retry = None  # the answer is missing (the model failed): the question is asked again
        if retry is not None:
            retry = turns[retry].index  # the question's own number in the conversation
        rec = reconcile(stored, job.history)
        job.match_ms += (time.perf_counter() - start) * 1000
        return Matched(generation, rec, retry, job.match_ms)

    def _replay(self, conv: Conversation, job: Job, matched: "Matched") -> Reply | None:
        """The stored answer, when the request is a retry of the question the store ends with (see
        ``retried``); nothing is stored and the model does not run. A question whose answer is missing
        (the model failed: the store holds a no-answer note) is asked again."""
        if matched.retry is None:
            return None
        question, turns = matched.retry, [t for t in conv.turns if not t.remembered]
        trace = next((t for t in reversed(self.lp.store.traces(job.conv_id)) if t.get("turn") == question), {})
        job.rec = Reconciliation("retry", matched=len(job.history))
        job.question_turn = question
        job._resolve(job.rec)
        job.on_text(turns[-1].text)
        return Reply(turns[-1].text, trace, replayed=True)

    def _apply_budget(self, conv: Conversation) -> None:
        """The server's ``budget`` on a conversation it answers, for this process only (as ``chat --budget``)."""
        if self.budget is not None and conv.budget != self.budget:
            conv.set_budget(self.budget, save=False)

    def _discard_if_empty(self, conv_id: str) -> None:
        """A conversation this request created and left without a turn (its first question was refused)
        is deleted: a refused request leaves nothing behind."""
        try:
            if self.lp.store.has_conversation(conv_id) and not self.lp.store.turns(conv_id):
                self.lp.store.delete_conversation(conv_id)
        except StoreError:
            return
        self.drop(conv_id)

    @contextmanager
    def _answer_tokens(self, max_tokens: int | None):
        """``max_tokens`` for this answer only (under the model lock, which the caller holds)."""
        runtime = self.lp.runtime
        before = runtime.settings
        if max_tokens is None or max_tokens == before.max_answer_tokens:
            yield
            return
        runtime.settings = dataclasses.replace(before, max_answer_tokens=max_tokens)
        try:
            yield
        finally:
            runtime.settings = before

    def preload(self) -> None:
        """Load the chat model, its side context and the embedder now, so the first request does not; a server
        stopping meanwhile (``lp`` closing, waiting for this lock) waits for one of the three only."""
        loads = (lambda: self.lp.runtime, lambda: self.lp.side_backend,
                 lambda: self.lp.index.embedder.encode(["warm up"]))
        with self.lp.lock:
            for load in loads:
                if self.lp.closed:
                    return
                load()


def owned(store, conv_id: str, user: str | None, param: str = USER_HEADER) -> None:
    """Nothing without ``user``; else conversation ``conv_id`` (stored) must be theirs, or a 403 (``not_theirs``,
    naming ``param``)."""
    if user is not None and (owner := store.conversation_user(conv_id)) != user:
        raise not_theirs(conv_id, owner, user, param)


def memory_info(job: Job, reply: Reply | None) -> dict[str, Any]:
    """The ``localpager`` field of a completion: where the trace is and what memory did."""
    info: dict[str, Any] = {
        "conversation_id": job.conv_id,
        "user": job.user,
        "history": job.rec.status if job.rec else None,
        "appended_turns": len(job.rec.new) if job.rec else 0,
        "trace_id": f"{job.conv_id}:{job.question_turn}",
        "turn": job.question_turn,
        "log": f"/v1/conversations/{quote(job.conv_id, safe='')}/log?turn={job.question_turn}",
    }
    if reply is not None:
        t = reply.trace
        info.update(decision=t.get("decision"), trigger=t.get("trigger"),
                    injected_page_ids=t.get("injected_page_ids", []), injected_turns=t.get("injected_turns", []),
                    citations=t.get("citations", []), tokens=t.get("tokens", {}), timings_ms=t.get("timings_ms", {}),
                    replayed=reply.replayed,
                    # why an answer is "not remembered": the relevance floor's verdict, or the value the answer
                    # stated that nothing it was shown holds
                    answerable=t.get("answerable"), grounding=t.get("grounding"))
    return info


def memory_headers(job: Job, reply: Reply | None = None) -> dict[str, str]:
    """The memory headers; the ids in them percent-encoded (``header_value``): a header holds Latin-1 only."""
    headers = {"X-Conversation-Id": header_value(job.conv_id),
               "X-Localpager-Trace-Id": header_value(f"{job.conv_id}:{job.question_turn}")}
    if job.rec is not None:
        headers["X-Localpager-History"] = job.rec.status
        headers["X-Localpager-Appended"] = str(len(job.rec.new))
    if reply is not None:
        headers["X-Localpager-Injected"] = ",".join(map(str, reply.trace.get("injected_page_ids", [])))
    return headers


def usage(reply: Reply) -> dict[str, int]:
    tokens = reply.trace.get("tokens", {})
    prompt = int(tokens.get("answer_prompt") or tokens.get("prompt", 0))
    completion = int(tokens.get("generated", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
