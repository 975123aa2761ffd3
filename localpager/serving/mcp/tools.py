"""The MCP tools' work, on a ``LocalPager``: what each tool does with memory, apart from the SDK that calls
it (``server`` wraps each one as a tool), so that it reads and tests as plain Python.

Reading: ``recall`` (the recall gate's verdict, the standing facts that bear on the question and the turns a
recall would inject), ``search``, ``bookmarks``, ``conversations``, ``facts`` (the standing facts, as a tool:
many apps never pass resources to their model). Changing: ``remember`` (a turn appended, paged and bookmarked
as any turn; the user's is kept as a standing fact, ``Conversation.remember``), ``forget``, ``edit_fact`` and
``delete_fact`` (each behind a confirmation token: they erase) and ``correct`` (newest wins; the old turn stays,
labelled changed). The facts are three tools rather than one with an action, so that the listing stays a
read-only tool (offered by ``--read-only``, run without asking by apps that ask before a destructive one). And
what the resources read: bookmarks, pages, standing facts.

With a user (``localpager mcp --user NAME``, issue 40) the tools reach that user's conversations only, a
``conversation`` left out is the user's own (``own_conversation``: created as theirs by the first ``remember``),
and ``search`` and ``facts`` without one reach all of theirs; ``edit_fact`` and ``delete_fact`` always name the
fact's conversation (a fact's number is its conversation's).
"""

from __future__ import annotations

import json
import shlex
from typing import Annotated, Callable, Literal

from pydantic import BaseModel, Field

from ...core.checks import check_id, did_you_mean
from ...memory.api import LocalPager
from ...memory.conversation import Conversation
from ...memory.users import memory_conversation
from ...store.base import ConversationNotFound, UserNotFound, check_user
from .confirmations import CONFIRM_SECONDS, Confirmations
from .replies import (BookmarkOut, BookmarksOut, ConversationOut, ConversationsOut, CorrectOut, ErasedTurnOut,
                      FactChangeOut, FactOut, FactsOut, ForgetOut, ForgottenTurnOut, RecalledFactOut, RecalledTurnOut,
                      RecallOut, RememberOut, SearchHitOut, SearchOut)

MAX_RECALL_TURNS = 20
MAX_SEARCH_HITS = 50
Conv = Annotated[str, Field(min_length=1, description="the conversation's id (conversations() lists them)")]
FactConv = Annotated[str, Field(min_length=1, description="the conversation the fact is in, as facts() lists it")]
FactId = Annotated[int, Field(ge=1, description="the fact's number in that conversation (its fact_id in facts())")]
Confirm = Annotated[str | None, Field(min_length=1, description=(
    "the confirmation token a previous call with the same arguments returned"))]


def own_conversation(user: str) -> str:
    """The conversation a user's tools use when a call names none: the user's own memory conversation,
    ``NAME-memory`` (``memory.users.memory_conversation``: where ``User.remember`` and the CLI's ``remember`` keep
    what they are told too), the same in every process, so every session of the app adds to one conversation."""
    return memory_conversation(user)


class MemoryTools:
    """The tools' work on ``lp`` (plain methods: the SDK runs each call on a worker thread; the
    ``LocalPager`` serialises them). Errors a caller can fix are ``ValueError``/``StoreError``. With ``user``,
    only that user's conversations, and a call naming no conversation uses ``default`` (the pinned one, else
    the user's own)."""

    def __init__(self, lp: LocalPager, pinned: str | None = None, confirmations: Confirmations | None = None,
                 user: str | None = None):
        self.lp = lp
        self.pinned = pinned
        self.user = check_user(user) if user is not None else None
        self.default = pinned if pinned is not None or user is None else own_conversation(user)
        self.confirmations = confirmations or Confirmations(lp.store)

    def _id(self, conversation: str | None) -> str:
        """The conversation a call names, or the default one (a server without a default needs one named)."""
        if conversation is not None:
            return conversation
        if self.default is None:
            raise ValueError("give conversation: conversations() lists them")
        return self.default

    def _unstarted(self, conversation: str) -> bool:
        """The user's own conversation, not made yet (its first ``remember`` makes it): nothing remembered in it."""
        return (self.user is not None and conversation == self.default
                and not self.lp.store.has_conversation(conversation))

    def _open(self, conversation: str) -> Conversation:
        self._check_pinned(conversation)
        try:
            return self.lp.conversation(conversation, user=self.user)
        except ConversationNotFound:
            ids = [i.id for i in self.lp.conversations(self.user)] if self.pinned is None else []
            raise ValueError(f"no conversation {conversation!r} in the store{did_you_mean(conversation, ids)}: "
                             "conversations() lists them; remember creates one") from None

    def _check_pinned(self, conversation: str) -> None:
        if self.pinned is not None and conversation != self.pinned:
            raise ValueError(f"this server serves conversation {self.pinned!r} only")

    def by_name(self, read_only: bool = False) -> dict[str, Callable[..., BaseModel]]:
        """The tools a server offers, by name, in the order it lists them: the reading ones, then (unless
        ``read_only``) the ones that change memory."""
        reading = {"recall": self.recall, "search": self.search, "bookmarks": self.bookmarks,
                   "conversations": self.conversations, "facts": self.facts}
        if read_only:
            return reading
        return {**reading, "remember": self.remember, "forget": self.forget, "correct": self.correct,
                "edit_fact": self.edit_fact, "delete_fact": self.delete_fact}

    # -- reading -------------------------------------------------------------------------------
    def recall(
        self,
        conversation: Conv,
        question: Annotated[str, Field(min_length=1, description="the user's question, as they asked it")],
        max_turns: Annotated[int | None, Field(ge=1, le=MAX_RECALL_TURNS, description=(
            "at most this many turns (default: the turns localpager's own recall would show, at least one)"))] = None,
    ) -> RecallOut:
        conversation = self._id(conversation)
        if self._unstarted(conversation):
            if not question.strip():
                raise ValueError("recall needs a question")
            theirs = self.lp.conversations(self.user)
            if not theirs:
                return RecallOut(conversation=conversation, question=question, relevant=False, probability=0.0,
                                 facts=[], turns=[], note="nothing is remembered yet: the conversation is empty")
            conv = self._open(theirs[-1].id)  # their own is not made yet: their latest, which reaches all of theirs
        else:
            conv = self._open(conversation)
        found = conv.recall(question, max_turns)
        source = found.conversation or (conv.id if conv.id != conversation else None)
        turns = [RecalledTurnOut(page=t.page_id, turn=t.turn, time=t.time, dates=t.dates,
                                 speaker=t.speaker or t.role, role=t.role, text=t.text, score=t.score,
                                 label=t.label, injected=t.injected, conversation=source) for t in found.turns]
        facts = [RecalledFactOut(fact_id=f["fact_id"], turn=f["turn"], text=f["text"], probability=f["probability"],
                                 conversation=f.get("conversation")) for f in found.facts]
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
        if conversation is None and self.user is not None and self.pinned is None:
            return self._search_user(query, limit)
        conversation = self._id(conversation)
        found = [] if self._unstarted(conversation) else self._open(conversation).search(query, limit)
        return SearchOut(conversation=conversation, query=query, hits=[self._hit(h) for h in found])

    def _search_user(self, query: str, limit: int) -> SearchOut:
        """A search over all of the user's conversations, each hit naming its own (none yet: no hit)."""
        if not query.strip():
            raise ValueError("search needs some words")
        try:
            found = self.lp.user(self.user).search(query, limit)
        except UserNotFound:
            found = []
        return SearchOut(conversation=None, query=query, hits=[self._hit(h, h.conversation) for h in found])

    @staticmethod
    def _hit(h, conversation: str | None = None) -> SearchHitOut:
        return SearchHitOut(turn=h.turn, page=h.page_id, score=h.score, text=h.text, role=h.role,
                            speaker=h.speaker or h.role, time=h.time, evicted=h.evicted, label=h.label,
                            superseded_by=h.superseded_by, conversation=conversation)

    def bookmarks(self, conversation: Conv) -> BookmarksOut:
        conversation = self._id(conversation)
        if self._unstarted(conversation):
            return BookmarksOut(conversation=conversation, bookmarks=[])
        conv = self._open(conversation)
        marks = conv.bookmarks()
        return BookmarksOut(conversation=conversation, bookmarks=[
            BookmarkOut(page=p.page_id, bookmark=mark, first_turn=p.first_turn, last_turn=p.last_turn,
                        evicted=p.evicted, pinned=p.pinned) for p, mark in zip(conv.pages, marks)])

    def conversations(self) -> ConversationsOut:
        infos = [i for i in self.lp.conversations(self.user) if self.pinned is None or i.id == self.pinned]
        return ConversationsOut(conversations=[ConversationOut(id=i.id, turns=i.turns, pages=i.pages,
                                                               evicted=i.evicted) for i in infos])

    def facts(self, conversation: Conv) -> FactsOut:
        if conversation is None and self.user is not None and self.pinned is None:
            try:
                found = self.lp.user(self.user).facts()
            except UserNotFound:
                found = []
            listed = [_fact(f) for f in found]
            where = None
        else:
            where = self._id(conversation)
            listed = [] if self._unstarted(where) else [_fact(f, where) for f in self._open(where).facts()]
        note = ("nothing about the user is remembered yet" if not listed else
                "what the user told you about themselves; edit_fact or delete_fact change one (name its conversation "
                "and fact_id), remember adds one")
        return FactsOut(conversation=where, facts=listed, note=note)

    # -- changing ------------------------------------------------------------------------------
    def remember(
        self,
        conversation: Conv,
        text: Annotated[str, Field(min_length=1, description="what to remember, as said (one message)")],
        role: Annotated[Literal["user", "assistant"], Field(description="who said it")] = "user",
    ) -> RememberOut:
        conversation = self._id(conversation)
        self._check_pinned(conversation)
        check_id(conversation)
        with self.lp.lock:
            created = not self.lp.store.has_conversation(conversation)
            conv = self.lp.conversation(conversation, create=True, user=self.user)
            if role == "user":  # the user's own statement, with no reply: kept as a standing fact
                made = conv.remember(text)
                turn = conv.turns[made[0].turn if made else -1]
            else:
                made, turn = [], conv.add_turn(role, text)
            page = conv.pager.page_of_turn(turn.index).page_id
        return RememberOut(conversation=conversation, created=created, turn=turn.index, page=page, role=role,
                           time=turn.time, facts=[_fact(f, conversation) for f in made],
                           note="stored on this machine: recall and search find it from now on")

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
        conversation = self._id(conversation)
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
        conversation = self._id(conversation)
        conv = self._open(conversation)
        new = conv.correct(turn, text)
        return CorrectOut(conversation=conversation, corrected_turn=turn, new_turn=new.index,
                          page=conv.pager.page_of_turn(new.index).page_id, text=new.text)

    def edit_fact(
        self,
        conversation: FactConv,
        fact: FactId,
        text: Annotated[str, Field(min_length=1, description="the fact's new words, as the user would say them")],
        dry_run: Annotated[bool, Field(description="only show what would be erased")] = False,
        confirm: Confirm = None,
    ) -> FactChangeOut:
        return self._change_fact(conversation, fact, text, dry_run, confirm)

    def delete_fact(
        self,
        conversation: FactConv,
        fact: FactId,
        dry_run: Annotated[bool, Field(description="only show what would be erased")] = False,
        confirm: Confirm = None,
    ) -> FactChangeOut:
        return self._change_fact(conversation, fact, None, dry_run, confirm)

    def _change_fact(self, conversation: str | None, fact: int, text: str | None, dry_run: bool,
                     confirm: str | None) -> FactChangeOut:
        """An edit (``text``) or a delete of standing fact ``fact`` of ``conversation`` (``Conversation.edit_fact``,
        ``delete_fact``: the old words erased, in a user's other conversations too), behind a confirmation token as
        ``forget`` is: the first call shows what would go and erases nothing."""
        if conversation is None:  # a user's server: a fact's number is its conversation's, never guessed
            raise ValueError("give conversation: the one the fact is in, as facts() lists it")
        if dry_run and confirm is not None:
            raise ValueError("dry_run only shows what would go: leave out confirm, or set dry_run to false to erase")
        action = "edit_fact" if text is not None else "delete_fact"
        conv = self._open(conversation)

        def change(dry: bool):
            return conv.edit_fact(fact, text, dry) if text is not None else conv.delete_fact(fact, dry)

        preview = change(True)  # an unknown fact: a ValueError naming it
        shown = [preview.fact.text, [[r.conversation, list(r.turns), list(r.texts)] for r in preview.reports]]
        arguments = {"fact": fact, "text": text}
        verb = "edit" if text is not None else "delete"

        def out(done, status: str, message: str, **extra) -> FactChangeOut:
            return FactChangeOut(conversation=conversation, status=status, fact=_fact(done.fact, conversation),
                                 text=text, facts=[_fact(f, conversation) for f in done.facts],
                                 kept=[_fact(f, conversation) for f in done.kept],
                                 turns=[ErasedTurnOut(conversation=r.conversation, turn=i, text=t)
                                        for r in done.reports for i, t in zip(r.turns, r.texts)],
                                 message=message, **extra)

        n = sum(len(r.turns) for r in preview.reports)
        these = f"{n} turn{'s' if n != 1 else ''} (the one that said it and any repeating its words)"
        if confirm is not None:  # a token is spent here, whatever follows
            if not self.confirmations.redeem(confirm, action, conversation, arguments, shown):
                token = self.confirmations.issue(action, conversation, arguments, shown)
                return out(preview, "changed", (
                    f"what this {verb} would erase changed since the token was issued: nothing was erased. It now "
                    f"erases {these}; only if the user agrees, call {action} again with confirm=\"{token}\"."),
                    confirm_token=token, expires_in_seconds=CONFIRM_SECONDS)
        elif dry_run:
            return out(preview, "preview", f"a dry run: nothing was erased; {action} would erase {these}")
        else:
            token = self.confirmations.issue(action, conversation, arguments, shown)
            return out(preview, "confirm", (
                f"nothing was erased yet. Show the user the fact and {these}; only if they agree, call {action} again "
                f"with the same arguments and confirm=\"{token}\" within {CONFIRM_SECONDS // 60} minutes. Erasing "
                "cannot be undone."), confirm_token=token, expires_in_seconds=CONFIRM_SECONDS)
        done = change(False)
        erased = all(r.erased for r in done.reports)
        where = ("erased from the store's files" if erased and not done.rewrite_pending else
                 "erased from memory; the store's files still hold them until another process reading the store "
                 f"closes (then: localpager forget {shlex.quote(conversation)} --finish)")
        now = f" Now: {'; '.join(f.text for f in done.facts)}." if done.facts else ""
        return out(done, "edited" if text is not None else "deleted",
                   f"{verb}d fact #{fact}: its old words are {where}.{now}", erased=erased,
                   rewrite_pending=done.rewrite_pending)

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


    def user_facts_json(self) -> str:
        """The user's standing facts across all of their conversations, each naming its conversation."""
        try:
            rows = [f.to_dict() for f in self.lp.user(self.user).facts()]
        except UserNotFound:
            rows = []
        return json.dumps({"user": self.user, "facts": rows}, ensure_ascii=False, indent=1)


def _fact(f, conversation: str | None = None) -> FactOut:
    """A standing fact as a tool returns it, naming its conversation (``conversation`` when the fact names none)."""
    return FactOut(fact_id=f.fact_id, conversation=f.conv_id or conversation, turn=f.turn, kind=f.kind, text=f.text,
                   time=f.time, pinned=f.pinned)
