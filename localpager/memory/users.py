"""A person's memory across their conversations: what ``LocalPager.user`` returns.

Chat apps start a new conversation for every chat (Open WebUI, LibreChat and Jan a new chat id each time, a desktop
app a thread a day), so what a person said on Monday is in another conversation on Tuesday. A conversation may
belong to a user (``LocalPager.conversation(..., user=)``, ``Store.create_conversation``); ``User`` is everything of
theirs: their conversations, their standing facts with the newest value winning across conversations too, a search
over all of them, a forget that reaches every one, an export. Each call goes through the conversations' own
(``Conversation.facts``, ``search``, ``forget``), so what is erased and how turns rank is what one conversation's
does. A user's conversation answers from the same memory (``user_facts``, ``retrieval.user_recall``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Sequence

from ..core.checks import MAX_ID_LENGTH
from ..core.facts import StandingFact
from ..core.pager import PagingConfig
from ..store.base import ConversationInfo, Store, StoreError
from . import controls, interchange
from .controls import EXPORTS_NOTE, ForgetReport, SearchHit
from .conversation import Conversation
from .fact_edits import FactChange
from .held import Held
from .user_facts import across


@dataclass
class UserForgetReport:
    """What a forget at a user's scope removed (or, with ``dry_run``, would remove): one ``ForgetReport`` per
    conversation it reached (those where nothing matched are left out)."""

    user: str
    reports: list[ForgetReport] = field(default_factory=list)
    dry_run: bool = False

    @property
    def turns(self) -> int:
        return sum(len(r.turns) for r in self.reports)

    @property
    def rewrite_pending(self) -> bool:
        """Some store file still holds erased text: another process was reading the store."""
        return any(r.rewrite_pending for r in self.reports)

    def to_dict(self) -> dict:
        return {"user": self.user, "dry_run": self.dry_run, "turns": self.turns,
                "rewrite_pending": self.rewrite_pending, "conversations": [r.to_dict() for r in self.reports]}

    def lines(self) -> list[str]:
        verb = "would forget" if self.dry_run else "forgot"
        out = [f"{verb} {self.turns} turns in {len(self.reports)} conversations of user {self.user}"]
        for r in self.reports:  # each conversation's listing, without its own summary
            listing = r.lines()
            out += ["  " + line for line in listing[:len(listing) - len(r.summary())]]
        if self.dry_run or not self.reports:
            return out
        total = {name: sum(getattr(r, name) for r in self.reports) for name in ("vectors", "traces", "probes",
                                                                                "traces_scrubbed")}
        out.append(f"  deleted {total['vectors']} vectors, {total['traces']} traces, {total['probes']} probes; "
                   f"{total['traces_scrubbed']} traces scrubbed")
        if self.rewrite_pending:
            out.append("  warning: the store's files still hold the forgotten text: another process is reading the "
                       "store, so they could not be rewritten; once it has closed, run: localpager forget --finish")
        out.append(f"  note: {EXPORTS_NOTE}")
        out += [f"  note: {n}" for n in dict.fromkeys(r.database_note for r in self.reports if r.database_note)]
        return out


def imported_from(store: Store, conv_id: str) -> str | None:
    """The service a conversation was imported from (``chatgpt``, ``claude``, ``messages``: the ``export`` its
    import stored in its meta), or None for one made here or read from localpager's own files."""
    export = store.conversation_record(conv_id)["meta"].get("export")
    return export if isinstance(export, str) and export else None


def check_owner(store: Store, conv_id: str, user: str) -> None:
    """Conversation ``conv_id`` is ``user``'s, or a one-line ``StoreError`` naming whose it is (an unknown id is a
    ``ConversationNotFound``)."""
    owner = store.conversation_user(conv_id)
    if owner != user:
        whose = f"user {owner!r}" if owner is not None else "no user"
        raise StoreError(f"conversation {conv_id!r} in {store.path} belongs to {whose}, not to user {user!r}")


MEMORY_SUFFIX = "-memory"  # a user's own conversation for what they ask to be remembered: "alice-memory"


def memory_conversation(user: str) -> str:
    """The id of the conversation ``User.remember`` keeps a user's remembered facts in when given none: the name
    and ``MEMORY_SUFFIX`` ("alice-memory"); a name too long for that is cut, with a digest of it, so that two long
    names never share one."""
    conv_id = user + MEMORY_SUFFIX
    if len(conv_id) <= MAX_ID_LENGTH:
        return conv_id
    import hashlib

    digest = hashlib.sha256(user.encode()).hexdigest()[:12]
    return f"{user[:MAX_ID_LENGTH - len(MEMORY_SUFFIX) - 13].rstrip()}-{digest}{MEMORY_SUFFIX}"


class User:
    """One user's memory across the conversations that belong to them. Made by ``LocalPager.user`` (over what its
    process holds, ``held``); every call reads the store as it is then (a conversation created or forgotten since
    counts)."""

    def __init__(self, held: Held, name: str):
        self.held = held
        self.store = held.store
        self.name = name

    def __repr__(self) -> str:
        return f"User({self.name!r})"

    def conversations(self) -> list[ConversationInfo]:
        """Their conversations, oldest first."""
        return self.store.list_conversations(self.name)

    def imported(self) -> list[ConversationInfo]:
        """Their conversations brought in from another service's export (``ingest`` of a ChatGPT or Claude export,
        or of a message list: ``memory.history``, which stores the export's name in the conversation's meta),
        oldest first."""
        return [info for info in self.conversations() if imported_from(self.store, info.id)]

    def _open(self, conv_id: str) -> Conversation:
        """One of their conversations (another's, or nobody's, is a ``StoreError``)."""
        with self.held.lock:
            check_owner(self.store, conv_id, self.name)
            return Conversation(self.held, conv_id)

    # -- standing facts ---------------------------------------------------------------------------------
    def facts(self, all: bool = False) -> list[StandingFact]:
        """Their standing facts across all their conversations, each naming its conversation (``conv_id``), in the
        order they were said (``user_facts.said_order``). The newest value stands across conversations as within one: a later
        conversation's "we live in Lyon now" replaces an earlier one's "I live in Utrecht" (``core.facts.superseded``
        over them all). ``all``: the replaced and corrected ones too; one replaced by a fact of another conversation
        has that fact's id as ``superseded_by`` (``replacements`` says which conversation it is in)."""
        facts, _ = self._gathered()
        return facts if all else [f for f in facts if f.current]

    def replacements(self) -> dict[tuple[str, int], tuple[str, int]]:
        """{(conversation, fact id): (conversation, fact id) of the newer fact that replaced it} over their facts."""
        return self._gathered()[1]

    def fact_lines(self, all: bool = False) -> list[str]:
        """``facts(all)`` one a line, each with its conversation; a fact replaced from another conversation says
        which (``(replaced by CONV #N)``)."""
        return [f.line() for f in self.facts(all)]

    def _gathered(self) -> tuple[list[StandingFact], dict[tuple[str, int], tuple[str, int]]]:
        with self.held.lock:
            return across(self.store, self.name)

    # -- what the user manages: remember, edit, delete ---------------------------------------------------
    def remember(self, text: str, conversation: str | None = None) -> list[StandingFact]:
        """Keep ``text`` as their own statement, without a reply (``Conversation.remember``), in ``conversation``
        (one of theirs) or, by default, in their memory conversation (``memory_conversation``: "alice-memory"),
        created as theirs on first use; one of that id that is someone else's is a ``StoreError``. Returns the facts
        it made, each naming its conversation. It counts in every conversation of theirs, as their facts do."""
        with self.held.lock:
            if conversation is None:
                conversation = memory_conversation(self.name)
                if not self.store.has_conversation(conversation):
                    try:
                        self.store.create_conversation(conversation, settings=PagingConfig().to_dict(), user=self.name)
                    except StoreError:
                        if not self.store.has_conversation(conversation):  # not another process creating it first
                            raise
            conv = self._open(conversation)
        return [dataclasses.replace(f, conv_id=conversation) for f in conv.remember(text)]

    def edit_fact(self, fact: tuple[str, int], text: str, dry_run: bool = False) -> FactChange:
        """Replace their fact ``fact`` = (conversation, fact id) with ``text`` (``Conversation.edit_fact``: the old
        words erased from every one of their conversations)."""
        conv_id, fact_id = fact
        return self._open(conv_id).edit_fact(fact_id, text, dry_run)

    def delete_fact(self, fact: tuple[str, int], dry_run: bool = False) -> FactChange:
        """Erase their fact ``fact`` = (conversation, fact id) (``Conversation.delete_fact``), from every one of
        their conversations."""
        conv_id, fact_id = fact
        return self._open(conv_id).delete_fact(fact_id, dry_run)

    # -- search and forget ------------------------------------------------------------------------------
    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """What their conversations remember about ``query``: each conversation's search, merged best score first,
        each hit naming its conversation. A score is its conversation's ranking (dense similarity is scaled over
        that conversation's turns), so hits of two conversations compare only roughly."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        hits = []
        for info in self.conversations():
            for hit in self._open(info.id).search(query, limit):
                hit.conversation = info.id
                hits.append(hit)
        if not hits and not query.strip():
            raise ValueError("search needs some words")
        return sorted(hits, key=lambda h: -h.score)[:limit]

    def forget(self, match: str | None = None, fact: tuple[str, int] | None = None, conversation: str | None = None,
               dry_run: bool = False, imported: bool = False) -> UserForgetReport:
        """Forget, in every one of their conversations, each turn containing ``match`` (case-insensitive: each
        conversation's own ``forget``, so every file derived from it is erased as there); or one whole
        ``conversation`` of theirs; or ``fact`` = (conversation, fact id): the turn that stated it (a fact is the
        user's words: forgetting it takes the turn whole, and any other fact that turn stated); or, ``imported``,
        every conversation of theirs that came from an export (``imported``), whole, with the store's files
        rewritten once (``controls.forget_conversations``). ``dry_run`` lists what would go and changes nothing."""
        given = [name for name, v in (("match", match), ("fact", fact), ("conversation", conversation),
                                      ("imported", imported or None)) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of match, fact, conversation or imported")
        report = UserForgetReport(self.name, dry_run=dry_run)
        if imported:
            with self.held.lock:
                ids = [info.id for info in self.imported()]
                report.reports += controls.forget_conversations(self.held, ids, dry_run)
        elif conversation is not None:
            self._open(conversation)  # theirs, or a StoreError naming whose it is
            report.reports.append(controls.forget_conversation(self.held, conversation, dry_run))
        elif fact is not None:
            conv_id, fact_id = fact
            conv = self._open(conv_id)
            found = next((f for f in conv.facts(all=True) if f.fact_id == fact_id), None)
            if found is None:
                raise ValueError(f"no standing fact {fact_id} in conversation {conv_id!r}")
            report.reports.append(conv.forget(turn=found.turn, dry_run=dry_run))
        else:
            if not match.strip():
                raise ValueError("match needs some text")
            for info in self.conversations():
                done = self._open(info.id).forget(match=match, dry_run=dry_run)
                if done.turns or done.probes or done.traces or done.meta_scrubbed or done.rewritten:
                    report.reports.append(done)
        return report

    def export(self, path: str | os.PathLike, vectors: bool = False) -> int:
        """Write their conversations to a JSONL file (each line names the user); returns how many."""
        ids = [info.id for info in self.conversations()]
        if not ids:
            raise StoreError(f"user {self.name!r} has no conversations in {self.store.path}: nothing to export")
        return interchange.export_conversations(self.store, path, ids, vectors=vectors)
