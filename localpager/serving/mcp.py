"""`localpager mcp`: localpager's memory as tools for a desktop app's own model (Model Context Protocol).

An app that speaks MCP (Claude Desktop, LM Studio, Jan, Cursor, Continue) launches ``localpager mcp`` and
talks to it over stdin/stdout. The app keeps its own model; localpager answers what it remembers:

- ``recall(conversation, question, max_turns?)``: the recall gate's verdict and the turns a recall would
  inject, with page, turn, time, resolved dates, speaker, text and score (``Conversation.recall``);
- ``search(conversation, query, limit?)``, ``bookmarks(conversation)``, ``conversations()``;
- ``remember(conversation, text, role?)``: a turn appended, paged and bookmarked as any turn (embedded
  when it is first searched, as any turn);
- ``forget(conversation, match | turn | page, dry_run?, confirm?)``: the CLI's erasure, behind a confirmation
  token (``Confirmations``): a call that would erase returns the preview and a single-use token bound to its
  arguments and that preview, and only a second call with that token erases (kept in the store: the second
  call may come from another ``localpager mcp`` process); ``correct(conversation, turn, text)``: the
  CLI's newest-wins correction (additive: the old turn stays, labelled changed);
- resources ``localpager://conversations/{id}/bookmarks``, ``.../pages`` (and ``.../pages/{page}``) and
  ``.../facts`` (the standing facts; ``recall`` returns the ones that bear on its question).

``--conversation NAME`` pins the server to one conversation (its tools then take no ``conversation``
argument); ``--read-only`` offers recall, search, bookmarks and conversations only.

No GGUF file is loaded: the store is opened with ``backends.nomodel.NoChatModel``, so ``recall`` and
``search`` load the embedder only, and ``remember``/``correct`` count tokens with the four-characters
estimate, stored as the conversation's tokenizer (``approx``) so that the next ``ask`` with a model recounts.
stdout carries protocol messages only (the SDK's stdio transport moves fd 1 to stderr while it serves; logs
and progress bars go to stderr).

Built on the official ``mcp`` SDK's high-level ``MCPServer`` (extra ``mcp``); this module imports it, so it
is imported only by the ``mcp`` command. The SDK's stdio transport hands a line it cannot read (invalid JSON,
a JSON array, a lone surrogate such as ``\\ud800``) to the session as an exception and answers nothing, so
the client waits for ever (SDK 2.3); ``ScreenedLines`` answers each such line with a JSON-RPC error instead.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import logging
import os
import secrets
import shlex
import sys
import threading
import time
from typing import Annotated, Any, Callable, Literal
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp_types import Resource as MCPResource
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from ..backends.base import BackendError
from ..backends.modelpaths import ModelNotFoundError
from ..backends.nomodel import NoChatModel
from ..core.checks import check_id, did_you_mean
from ..memory.api import LocalPager
from ..memory.conversation import Conversation
from ..store.base import ConversationNotFound, StoreError

log = logging.getLogger("localpager.mcp")

CONFIRM_SECONDS = 300  # how long a forget's confirmation token stays valid
MAX_RECALL_TURNS = 20
MAX_SEARCH_HITS = 50
URI_ROOT = "localpager://conversations"
READ_TOOLS = ("recall", "search", "bookmarks", "conversations")
WRITE_TOOLS = ("remember", "forget", "correct")

INSTRUCTIONS = (
    "localpager keeps the user's long conversations on this machine and remembers what was said long ago. "
    "Before answering a question that may depend on something the user said earlier (their allergies, plans, "
    "people, numbers, dates, preferences), call recall with the question and answer from the turns it returns; "
    "if none of them says it, say you do not know. Call remember to keep something the user tells you. forget "
    "erases only after the user agrees: it first returns what it would erase and a confirmation token.")


# =====================================================================================================
# What the tools return (each is also the tool's output schema)
# =====================================================================================================
class RecalledTurnOut(BaseModel):
    page: int = Field(description="the page (a run of turns) the turn is on")
    turn: int = Field(description="the turn's number in the conversation, from 0")
    time: str | None = Field(description="when it was said (ISO 8601), if known")
    dates: list[str] = Field(description="what its relative dates mean ('yesterday' said on 8 May 2023: 7 May 2023)")
    speaker: str = Field(description="who said it: a name, or 'user' / 'assistant'")
    role: str = Field(description="'user' or 'assistant'")
    text: str
    score: float = Field(description="how well it matches the question (higher is better)")
    label: str = Field(description="'latest': the newest statement of something that changed; 'changed later' or "
                                   "'changed': a later turn corrected it; empty otherwise")
    injected: bool = Field(description="true for the turns localpager's own recall would show its model; false for "
                                       "the ranking's next best")


class RecalledFactOut(BaseModel):
    fact_id: int = Field(description="the standing fact's number (the `facts` resource lists them all)")
    turn: int = Field(description="the turn that stated it")
    text: str = Field(description="what the user said, in their words")
    probability: float = Field(description="how likely it bears on the question")


class RecallOut(BaseModel):
    conversation: str
    question: str
    relevant: bool = Field(description="whether memory bears on the question: false when nothing about it is "
                                       "remembered")
    probability: float = Field(description="the recall gate's probability that the question is about something said "
                                           "before")
    facts: list[RecalledFactOut] = Field(description="standing facts about the user that bear on the question (an "
                                                     "allergy, a schedule, a preference), even when it does not ask "
                                                     "about the past")
    turns: list[RecalledTurnOut] = Field(description="remembered turns, best first")
    note: str


class SearchHitOut(BaseModel):
    turn: int
    page: int
    score: float
    text: str
    role: str
    speaker: str
    time: str | None
    evicted: bool = Field(description="the turn's page is out of localpager's own prompt (kept in the store)")
    label: str = Field(description="'changed': a later turn corrected it (see superseded_by)")
    superseded_by: int | None


class SearchOut(BaseModel):
    conversation: str
    query: str
    hits: list[SearchHitOut]


class BookmarkOut(BaseModel):
    page: int
    bookmark: str = Field(description="the page's bookmark: its number and keywords")
    first_turn: int
    last_turn: int
    evicted: bool
    pinned: bool


class BookmarksOut(BaseModel):
    conversation: str
    bookmarks: list[BookmarkOut]


class ConversationOut(BaseModel):
    id: str
    turns: int
    pages: int
    evicted: int = Field(description="pages out of localpager's own prompt (kept in the store)")


class ConversationsOut(BaseModel):
    conversations: list[ConversationOut]


class RememberOut(BaseModel):
    conversation: str
    created: bool = Field(description="the conversation did not exist and was created")
    turn: int
    page: int
    role: str
    time: str | None
    note: str


class ForgottenTurnOut(BaseModel):
    turn: int
    text: str = Field(description="the start of the turn")


class ForgetOut(BaseModel):
    conversation: str
    status: Literal["nothing", "preview", "confirm", "changed", "forgotten"] = Field(
        description="nothing: no turn matches; preview: a dry run; confirm: nothing erased yet, call again with "
                    "confirm set to the token; changed: what the arguments select changed since the token was "
                    "issued, nothing erased, a new token is given; forgotten: erased")
    turns: list[ForgottenTurnOut]
    pages: list[int]
    confirm_token: str | None = None
    expires_in_seconds: int | None = None
    erased: bool = Field(False, description="the text is gone from the store's files too")
    rewrite_pending: bool = Field(False, description="the files still hold it: another process is reading the store")
    message: str


class CorrectOut(BaseModel):
    conversation: str
    corrected_turn: int
    new_turn: int = Field(description="the correction, appended as a new turn; recall shows it instead of the old one")
    page: int
    text: str


# =====================================================================================================
# Confirmation tokens for destructive calls
# =====================================================================================================
class Confirmations:
    """Tokens that let a destructive call through, kept in the store (``Store.add_confirmation``), so that the
    call presenting one may come from another process: a client that starts ``localpager mcp`` for each call
    (the MCP Inspector's CLI), or an app that restarted it. A token is issued with a preview; it is bound to
    the action, the conversation, the arguments and that exact preview (its turns and their text); taken once,
    whatever the outcome; and expires after ``ttl`` seconds. 96 random bits each; the store keeps only their
    SHA-256 and HMACs keyed by them (nothing a reader of the store could present, nothing of the text), and
    drops them with the conversation or at any forget in it."""

    def __init__(self, store, ttl: float = CONFIRM_SECONDS, clock: Callable[[], float] = time.time):
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


# =====================================================================================================
# The tools, on a LocalPager
# =====================================================================================================
Conv = Annotated[str, Field(min_length=1, description="the conversation's id (conversations() lists them)")]


class MemoryTools:
    """The tools' work on ``lp`` (plain methods: the SDK runs each call on a worker thread; the
    ``LocalPager`` serialises them). Errors a caller can fix are ``ValueError``/``StoreError``."""

    def __init__(self, lp: LocalPager, pinned: str | None = None, confirmations: Confirmations | None = None):
        self.lp = lp
        self.pinned = pinned
        self.confirmations = confirmations or Confirmations(lp.store)

    def _open(self, conversation: str) -> Conversation:
        self._check_pinned(conversation)
        try:
            return self.lp.conversation(conversation)
        except ConversationNotFound:
            close = did_you_mean(conversation, [i.id for i in self.lp.conversations()] if self.pinned is None else [])
            raise ValueError(f"no conversation {conversation!r} in the store{close}: conversations() lists them; "
                             "remember creates one") from None

    def _check_pinned(self, conversation: str) -> None:
        if self.pinned is not None and conversation != self.pinned:
            raise ValueError(f"this server serves conversation {self.pinned!r} only")

    # -- reading -------------------------------------------------------------------------------
    def recall(
        self,
        conversation: Conv,
        question: Annotated[str, Field(min_length=1, description="the user's question, as they asked it")],
        max_turns: Annotated[int | None, Field(ge=1, le=MAX_RECALL_TURNS, description=(
            "at most this many turns (default: the turns localpager's own recall would show, at least one)"))] = None,
    ) -> RecallOut:
        conv = self._open(conversation)
        found = conv.recall(question, max_turns)
        turns = [RecalledTurnOut(page=t.page_id, turn=t.turn, time=t.time, dates=t.dates,
                                 speaker=t.speaker or t.role, role=t.role, text=t.text, score=t.score,
                                 label=t.label, injected=t.injected) for t in found.turns]
        facts = [RecalledFactOut(fact_id=f["fact_id"], turn=f["turn"], text=f["text"], probability=f["probability"])
                 for f in found.facts]
        if not conv.pages:
            note = "the conversation is empty: nothing is remembered yet"
        elif facts:
            note = ("the user told you this about themselves, and it bears on the question: take it into account "
                    "in the answer")
        elif found.floor is not None and not found.floor["answer"]:
            note = ("nothing about this is remembered: it was not mentioned, or it was forgotten; say so rather "
                    "than guess")
        elif found.relevant:
            note = ("memory is relevant: answer from these turns, newest statements first; a turn labelled "
                    "'changed later' was corrected by a later one")
        else:
            note = ("memory is probably not relevant to this question: these are only the nearest turns; answer "
                    "without them unless one plainly says what was asked")
        return RecallOut(conversation=conversation, question=question, relevant=found.relevant,
                         probability=round(found.probability, 4), facts=facts, turns=turns, note=note)

    def search(
        self,
        conversation: Conv,
        query: Annotated[str, Field(min_length=1, description="words to look for (matched by meaning and by word)")],
        limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_HITS, description="at most this many turns")] = 10,
    ) -> SearchOut:
        conv = self._open(conversation)
        hits = [SearchHitOut(turn=h.turn, page=h.page_id, score=h.score, text=h.text, role=h.role,
                             speaker=h.speaker or h.role, time=h.time, evicted=h.evicted, label=h.label,
                             superseded_by=h.superseded_by) for h in conv.search(query, limit)]
        return SearchOut(conversation=conversation, query=query, hits=hits)

    def bookmarks(self, conversation: Conv) -> BookmarksOut:
        conv = self._open(conversation)
        marks = conv.bookmarks()
        return BookmarksOut(conversation=conversation, bookmarks=[
            BookmarkOut(page=p.page_id, bookmark=mark, first_turn=p.first_turn, last_turn=p.last_turn,
                        evicted=p.evicted, pinned=p.pinned) for p, mark in zip(conv.pages, marks)])

    def conversations(self) -> ConversationsOut:
        infos = [i for i in self.lp.conversations() if self.pinned is None or i.id == self.pinned]
        return ConversationsOut(conversations=[ConversationOut(id=i.id, turns=i.turns, pages=i.pages,
                                                               evicted=i.evicted) for i in infos])

    # -- changing ------------------------------------------------------------------------------
    def remember(
        self,
        conversation: Conv,
        text: Annotated[str, Field(min_length=1, description="what to remember, as said (one message)")],
        role: Annotated[Literal["user", "assistant"], Field(description="who said it")] = "user",
    ) -> RememberOut:
        self._check_pinned(conversation)
        check_id(conversation)
        with self.lp.lock:
            created = not self.lp.store.has_conversation(conversation)
            conv = self.lp.conversation(conversation, create=True)
            turn = conv.add_turn(role, text)
            page = conv.pager.page_of_turn(turn.index).page_id
        return RememberOut(conversation=conversation, created=created, turn=turn.index, page=page, role=role,
                           time=turn.time, note="stored on this machine: recall and search find it from now on")

    def forget(
        self,
        conversation: Conv,
        match: Annotated[str | None, Field(min_length=1, description=(
            "forget every turn containing this text (case-insensitive)"))] = None,
        turn: Annotated[int | None, Field(ge=0, description="forget this turn (its number from recall or search)")] = None,
        page: Annotated[int | None, Field(ge=1, description="forget every turn of this page")] = None,
        dry_run: Annotated[bool, Field(description="only list what would be forgotten")] = False,
        confirm: Annotated[str | None, Field(min_length=1, description=(
            "the confirmation token a previous forget call with the same arguments returned"))] = None,
    ) -> ForgetOut:
        chosen = {k: v for k, v in (("match", match), ("turn", turn), ("page", page)) if v is not None}
        if len(chosen) != 1:
            raise ValueError("give exactly one of match, turn or page")
        if dry_run and confirm is not None:
            raise ValueError("dry_run only lists what would go: leave out confirm, or set dry_run to false to erase")
        conv = self._open(conversation)

        def out(report, status: str, message: str, **extra) -> ForgetOut:
            return ForgetOut(conversation=conversation, status=status, pages=report.pages, message=message,
                             turns=[ForgottenTurnOut(turn=i, text=t) for i, t in zip(report.turns, report.texts)],
                             **extra)

        preview = conv.forget(**chosen, dry_run=True)
        shown = [list(preview.turns), list(preview.texts)]  # what a token is bound to: the turns and their text
        n = len(preview.turns)
        these = "this turn" if n == 1 else f"these {n} turns"
        if confirm is not None:  # a token is spent here, whatever follows
            same = self.confirmations.redeem(confirm, "forget", conversation, chosen, shown)
            if not preview.turns:
                return out(preview, "nothing", "no remembered turn matches these arguments any more: nothing to forget")
            if not same:
                token = self.confirmations.issue("forget", conversation, chosen, shown)
                return out(preview, "changed", (
                    "these arguments select other turns than when the token was issued (the conversation changed): "
                    f"nothing was erased. They now select {these}; only if the user agrees, call forget again with "
                    f"confirm=\"{token}\"."), confirm_token=token, expires_in_seconds=CONFIRM_SECONDS)
        elif not preview.turns:
            return out(preview, "nothing", "no remembered turn matches: nothing to forget")
        elif dry_run:
            return out(preview, "preview", f"a dry run: nothing was erased; forget would erase {these}")
        else:
            token = self.confirmations.issue("forget", conversation, chosen, shown)
            return out(preview, "confirm", (
                f"nothing was erased yet. Show the user {these}; only if they agree, call forget again with the same "
                f"arguments and confirm=\"{token}\" within {CONFIRM_SECONDS // 60} minutes. Erasing cannot be "
                "undone."), confirm_token=token, expires_in_seconds=CONFIRM_SECONDS)
        report = conv.forget(**chosen)
        gone = "1 turn" if len(report.turns) == 1 else f"{len(report.turns)} turns"
        message = (f"forgot {gone}: text, vectors and bookmark words erased from the store's files" if report.erased
                   else f"forgot {gone}; the store's files still hold the text until another process reading the "
                        f"store closes (then: localpager forget {shlex.quote(conversation)} --finish)")
        return out(report, "forgotten", f"{message}. {report.note}".strip(), erased=report.erased,
                   rewrite_pending=report.rewrite_pending)

    def correct(
        self,
        conversation: Conv,
        turn: Annotated[int, Field(ge=0, description="the turn that said the old thing (its number from recall or search)")],
        text: Annotated[str, Field(min_length=1, description="the corrected statement, as the same speaker would say it")],
    ) -> CorrectOut:
        conv = self._open(conversation)
        new = conv.correct(turn, text)
        return CorrectOut(conversation=conversation, corrected_turn=turn, new_turn=new.index,
                          page=conv.pager.page_of_turn(new.index).page_id, text=new.text)

    # -- resources -----------------------------------------------------------------------------
    def bookmarks_text(self, conversation: str) -> str:
        return "\n".join(self._open(conversation).bookmarks()) + "\n"

    def facts_json(self, conversation: str) -> str:
        rows = [f.to_dict() for f in self._open(conversation).facts()]
        return json.dumps({"conversation": conversation, "facts": rows}, ensure_ascii=False, indent=1)

    def pages_json(self, conversation: str, page: int | None = None) -> str:
        conv = self._open(conversation)
        pager = conv.pager
        pages = pager.pages if page is None else [pager.page(page)]
        marks = dict(zip((p.page_id for p in pager.pages), conv.bookmarks()))
        rows = [{"page": p.page_id, "bookmark": marks[p.page_id], "first_turn": p.first_turn,
                 "last_turn": p.last_turn, "evicted": p.evicted, "pinned": p.pinned, "keywords": p.keywords,
                 "turns": [{"turn": t.index, "role": t.role, "speaker": t.speaker or t.role, "time": t.time,
                            "text": t.text, **({"superseded_by": t.superseded_by} if t.superseded_by is not None else {})}
                           for t in (pager.turns[i] for i in p.turn_range) if t.text]}
                for p in pages]
        return json.dumps({"conversation": conversation, "pages": rows}, ensure_ascii=False, indent=1)


# =====================================================================================================
# Descriptions, for the model that reads them
# =====================================================================================================
DESCRIPTIONS = {
    "recall": (
        "Look up what the user said earlier in a long conversation that localpager remembers on this machine. "
        "Call it before answering anything that may depend on something said before: the user's allergies, "
        "medication, plans, appointments, people, numbers, addresses, preferences, or what changed. Pass the "
        "user's question as they asked it. Returns `relevant` (whether localpager's recall gate thinks memory "
        "matters for this question, with its probability), the standing facts about the user that bear on it (an "
        "allergy for a question about snacks, even one that does not ask about the past) and the remembered turns, "
        "best first: each with its page, turn number, time, the dates its relative expressions mean, speaker, text "
        "and score; a turn labelled 'latest' is the newest statement of something that changed, one labelled "
        "'changed later' was corrected. Answer from these; when `relevant` is false and the note says nothing is "
        "remembered, say you do not know."),
    "search": (
        "Search a remembered conversation for turns about some words, ranked as recall ranks them (by meaning "
        "and by word). Use it to find a turn to show, forget or correct; for answering a question, prefer "
        "recall. Returns turns with their number, page, time, speaker, text and score; a turn labelled 'changed' "
        "was corrected by the turn in superseded_by."),
    "bookmarks": (
        "List a remembered conversation's bookmarks: one per page (a run of about twenty turns), each with its "
        "page number and keywords, e.g. [p2:Omar Sato,EpiPen,allergic,everywhere]. A quick overview of what "
        "the conversation covered."),
    "conversations": (
        "List the conversations localpager remembers, with their number of turns and pages. Every other tool "
        "names one of them."),
    "remember": (
        "Add something to a conversation's memory: one message, as the user (role 'user', the default) or you "
        "(role 'assistant') said it. It is stored on this machine, paged and bookmarked like any turn, and recall "
        "and search find it from then on. Creates the conversation if it does not exist. Use it for facts the "
        "user wants kept (\"remember that I'm allergic to sesame\")."),
    "forget": (
        "Erase turns from a conversation's memory, for good: every turn containing `match`, one `turn`, or "
        "every turn of a `page` (give exactly one). Erasing needs two calls: the first returns the turns it "
        "would erase and a confirmation token and erases nothing; show them to the user, and only if the user "
        "agrees call forget again with the same arguments and `confirm` set to that token (single-use, valid "
        "for five minutes). `dry_run` only lists what would go. Only when the user asks to forget something."),
    "correct": (
        "Correct something remembered: `text` becomes the newest statement of what turn `turn` said (it is "
        "appended as a new turn by the same speaker, and the old turn is marked as changed). recall then shows "
        "the correction instead of the old statement. Nothing is erased: use forget to erase."),
}

ANNOTATIONS = {
    "recall": ToolAnnotations(title="Recall from memory", read_only_hint=True, open_world_hint=False),
    "search": ToolAnnotations(title="Search memory", read_only_hint=True, open_world_hint=False),
    "bookmarks": ToolAnnotations(title="Bookmarks of a conversation", read_only_hint=True, open_world_hint=False),
    "conversations": ToolAnnotations(title="Remembered conversations", read_only_hint=True, open_world_hint=False),
    "remember": ToolAnnotations(title="Remember", read_only_hint=False, destructive_hint=False,
                                idempotent_hint=False, open_world_hint=False),
    "forget": ToolAnnotations(title="Forget (erase)", read_only_hint=False, destructive_hint=True,
                              idempotent_hint=False, open_world_hint=False),
    "correct": ToolAnnotations(title="Correct a memory", read_only_hint=False, destructive_hint=False,
                               idempotent_hint=False, open_world_hint=False),
}

FRIENDLY = (ValueError, StoreError, BackendError, ModelNotFoundError)


def _tool(method: Callable, name: str, pinned: str | None) -> Callable:
    """``method`` as the SDK's tool function: the arguments its signature declares (less ``conversation``
    when the server is pinned to one), errors the caller can fix as ``ToolError`` (the call's result then
    says what was wrong, with ``isError``)."""
    signature = inspect.signature(method, eval_str=True)
    pin = pinned is not None and "conversation" in signature.parameters

    def call(**arguments):
        if pin:
            arguments["conversation"] = pinned
        try:
            return method(**arguments)
        except FRIENDLY as exc:
            raise ToolError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None

    params = [p for p in signature.parameters.values() if not (pin and p.name == "conversation")]
    call.__signature__ = signature.replace(parameters=params)
    call.__name__ = call.__qualname__ = name
    return call


PARSE_ERROR, INVALID_REQUEST = -32700, -32600  # JSON-RPC 2.0's codes


def _request_id(value: Any) -> int | str | None:
    """A JSON-RPC id as a reply may echo it: a string or an integer (not a boolean); None otherwise."""
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def malformed_answers(problem: Exception) -> list[tuple[int | str | None, int, str]]:
    """The JSON-RPC errors, as (id, code, message), that answer a line the SDK could not read (``problem``: its
    validation error). A request's id is echoed when one can be read; a malformed notification or response
    is answered by nothing, as JSON-RPC 2.0 says."""
    from pydantic import ValidationError

    errors = problem.errors() if isinstance(problem, ValidationError) else []
    if not errors:
        return [(None, PARSE_ERROR, f"the message could not be read ({type(problem).__name__})")]
    value, unreadable = errors[0].get("input"), errors[0].get("type") == "json_invalid"
    if unreadable:
        try:  # Python's reader takes what the SDK's refuses: a lone surrogate escape such as \ud800
            value = json.loads(value) if isinstance(value, str) else None
        except ValueError:
            return [(None, PARSE_ERROR, "parse error: the line is not valid JSON (one JSON object a line)")]
    if isinstance(value, list):
        why = "batches (a JSON array) are not supported: send one JSON-RPC message a line"
        ids = [i for item in value if isinstance(item, dict) and (i := _request_id(item.get("id"))) is not None]
        return [(i, INVALID_REQUEST, why) for i in ids] or [(None, INVALID_REQUEST, why)]
    if not isinstance(value, dict):
        return [(None, INVALID_REQUEST, "not a JSON-RPC message: one JSON object a line")]
    if "id" not in value and "method" in value or "method" not in value and ("result" in value or "error" in value):
        return []  # a notification or a response: never answered
    why = ("the message is not valid Unicode (a lone surrogate such as \\ud800) or not strict JSON" if unreadable
           else "not a valid JSON-RPC 2.0 request (jsonrpc \"2.0\", an id, a method, params an object)")
    return [(_request_id(value.get("id")), INVALID_REQUEST, f"{why}: nothing was done")]


class ScreenedLines:
    """The SDK's stdio read stream, with every line it could not read answered on the write stream with the
    JSON-RPC errors of ``malformed_answers`` (and logged to stderr) instead of leaving the client waiting;
    everything else passes through as it is."""

    def __init__(self, inner, write) -> None:
        self._inner, self._write = inner, write

    @property
    def last_context(self):  # the SDK reads the sender's context from the stream it was given
        return getattr(self._inner, "last_context", None)

    async def receive(self):
        from mcp.shared.message import SessionMessage
        from mcp_types import ErrorData, JSONRPCError

        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            answers = malformed_answers(item)
            log.warning("a line that is not a JSON-RPC message (%s): %s", type(item).__name__,
                        "answered with an error" if answers else "ignored (a notification or a response)")
            for request_id, code, message in answers:
                await self._write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id,
                                                                   error=ErrorData(code=code, message=message))))

    def __aiter__(self):
        return self

    async def __anext__(self):
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


class MemoryServer(MCPServer):
    """``MCPServer`` whose resource list names each conversation's bookmarks and pages (the conversations
    change while it runs: ``remember`` creates them), and whose stdio answers lines it cannot read."""

    def __init__(self, tools: MemoryTools, **kwargs):
        super().__init__(**kwargs)
        self.memory = tools

    async def run_stdio_async(self) -> None:
        """The SDK's own ``run_stdio_async`` (its stdio transport, fds claimed as it claims them), with the read
        stream screened (``ScreenedLines``). Uses the SDK's ``_lowlevel_server``, as that method does (mcp 2.x)."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await self._lowlevel_server.run(ScreenedLines(read_stream, write_stream), write_stream,
                                            self._lowlevel_server.create_initialization_options())

    async def list_resources(self) -> list[MCPResource]:
        import anyio.to_thread

        listed = await super().list_resources()
        found = await anyio.to_thread.run_sync(self.memory.conversations)
        for info in found.conversations:
            base = f"{URI_ROOT}/{quote(info.id, safe='')}"
            listed += [
                MCPResource(uri=f"{base}/bookmarks", name=f"{info.id}: bookmarks", mime_type="text/plain",
                            description=f"the bookmarks of {info.id}'s {info.pages} pages, one a line"),
                MCPResource(uri=f"{base}/pages", name=f"{info.id}: pages", mime_type="application/json",
                            description=f"{info.id}'s pages with their bookmarks and turns ({info.turns} turns)"),
                MCPResource(uri=f"{base}/facts", name=f"{info.id}: standing facts", mime_type="application/json",
                            description=f"what the user told {info.id} about themselves that stays true, each with "
                                        "its source turn"),
            ]
        return listed


def build_server(lp: LocalPager, *, conversation: str | None = None, read_only: bool = False,
                 confirmations: Confirmations | None = None) -> MemoryServer:
    """The MCP server for ``lp``: every tool, or the reading ones (``read_only``), on every conversation or
    the one named (``conversation``)."""
    if conversation is not None:
        check_id(conversation)
    tools = MemoryTools(lp, conversation, confirmations)
    instructions = INSTRUCTIONS + (f" This server serves one conversation, {conversation!r}: its tools take no "
                                   "conversation argument." if conversation else "")
    if read_only:
        instructions += " It is read-only: it recalls and searches, and changes nothing."
    server = MemoryServer(tools, name="localpager", title="localpager memory", version=_version(),
                          instructions=instructions, log_level="WARNING")
    for name in READ_TOOLS + (() if read_only else WRITE_TOOLS):
        server.add_tool(_tool(getattr(tools, name), name, conversation), name=name, description=DESCRIPTIONS[name],
                        annotations=ANNOTATIONS[name], structured_output=True)

    def resource(fn: Callable[..., str]) -> Callable[..., str]:
        def read(**arguments) -> str:
            try:
                return fn(**arguments)
            except (ValueError, KeyError, StoreError) as exc:
                message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
                raise ResourceNotFoundError(message) from None
            except FRIENDLY as exc:
                raise ResourceError(str(exc)) from None

        read.__signature__ = inspect.signature(fn, eval_str=True)
        read.__annotations__ = dict(fn.__annotations__)
        read.__name__ = fn.__name__
        return read

    exempt = ResourceSecurity(exempt_params={"conversation"})  # an id, never a path: the store looks it up

    @server.resource(f"{URI_ROOT}/{{conversation}}/bookmarks", name="bookmarks", mime_type="text/plain",
                     description="a conversation's bookmarks, one a line", security=exempt)
    @resource
    def bookmarks(conversation: str) -> str:
        return tools.bookmarks_text(conversation)

    @server.resource(f"{URI_ROOT}/{{conversation}}/pages", name="pages", mime_type="application/json",
                     description="a conversation's pages: bookmark, turns, evicted or pinned", security=exempt)
    @resource
    def pages(conversation: str) -> str:
        return tools.pages_json(conversation)

    @server.resource(f"{URI_ROOT}/{{conversation}}/facts", name="facts", mime_type="application/json",
                     description="a conversation's standing facts: what the user said about themselves that stays "
                                 "true (allergies, schedules, people, preferences), each with its source turn",
                     security=exempt)
    @resource
    def facts(conversation: str) -> str:
        return tools.facts_json(conversation)

    @server.resource(f"{URI_ROOT}/{{conversation}}/pages/{{page}}", name="page", mime_type="application/json",
                     description="one page of a conversation, with its turns", security=exempt)
    @resource
    def page(conversation: str, page: str) -> str:
        if not page.isdigit():
            raise ValueError(f"no page {page!r}: pages are numbered from 1")
        try:
            return tools.pages_json(conversation, int(page))
        except KeyError:
            raise ValueError(f"no page p{page} in {conversation!r}") from None

    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("localpager")
    except PackageNotFoundError:
        return ""


# =====================================================================================================
# Running it
# =====================================================================================================
QUIET_ENV = {"TQDM_DISABLE": "1", "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
             "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def quiet() -> None:
    """Progress bars off and logs to stderr, before anything that could print is imported (stdout is the
    protocol's: one stray line there breaks the client)."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)  # at the handler: bm25s sets DEBUG on its own logger when imported
    handler.setFormatter(logging.Formatter("localpager mcp: %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def open_store(path, key: str | None = None) -> LocalPager:
    """The store opened with no chat model (``NoChatModel``): nothing loads a GGUF file."""
    return LocalPager(path, backend=NoChatModel(), key=key)


def warm_up(lp: LocalPager, conversation: str | None = None) -> None:
    """In the background, so that the first call waits for less of it: the embedder loads, and for a pinned
    conversation what its first recall would build (its BM25 index, its FAISS index, its resident turns'
    vectors). A call that comes first simply waits for the ``LocalPager``'s lock."""
    lp.warm_embedder()
    if conversation is None or not lp.store.has_conversation(conversation):
        return

    def search() -> None:
        try:
            lp.conversation(conversation).search("what did I say", 1)
        except Exception as exc:  # noqa: BLE001 - a warm-up: the first call reports any real problem itself
            log.debug("warm-up of %r: %s", conversation, exc)

    threading.Thread(target=search, name="localpager-mcp-warm-up", daemon=True).start()


def serve_stdio(lp: LocalPager, *, conversation: str | None = None, read_only: bool = False) -> None:
    """Serve ``lp`` over stdin/stdout until the client closes stdin. One line to stderr when it starts."""
    quiet()
    server = build_server(lp, conversation=conversation, read_only=read_only)
    what = [f"store {lp.store.path}", f"conversation {conversation!r}" if conversation else "every conversation",
            "read-only" if read_only else "read-write", f"pid {os.getpid()}"]
    print(f"localpager mcp: serving {', '.join(what)} over stdio", file=sys.stderr, flush=True)
    warm_up(lp, conversation)
    sys.stdout.flush()
    if hasattr(sys.stdout, "reconfigure"):  # a stray print while serving reaches fd 1 (stderr then) at once
        sys.stdout.reconfigure(line_buffering=True)
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        # the transport gave fd 1 back to the client's pipe: what is still buffered goes to stderr, not to it
        try:
            os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
