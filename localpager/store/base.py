"""The store's interface: what every store does, the one set of errors, and the SQL both engines share.

localpager keeps everything it knows in one store, the source of truth: a SQLite file on this machine
(``sqlite.SQLiteStore``) or a PostgreSQL database for many ``serve`` replicas (``postgres.PostgresStore``).
Both are a ``Store``: the conversations, turns, pages, probes, traces and vectors are read and written here,
in SQL written once in SQLite's words (the PostgreSQL store translates it, ``postgres.pg_sql``). An engine
brings the plumbing under it: connections and transactions (``transaction``, ``_query``), the schema's
migrations, its vectors' version counters, and what an erase does to its files (``erase``, ``owned_files``).

Every change is one transaction, so a process killed at any moment leaves either the whole change or
none of it. Anything derived (FAISS indexes, BM25 postings, saved KV caches) can be rebuilt from here.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from dataclasses import replace as copy_with  # (``replace`` names a parameter of save_conversation)
from typing import Any, Callable, ClassVar, Sequence

from ..core.checks import check_id, check_text, id_problem
from ..core.facts import FACTS_VERSION, CurrentFacts, FactDraft, StandingFact, extract, facts_of, superseded
from ..core.pager import DEFAULT_BUDGET
from ..core.records import Page, Probe, Turn
from .schema import migrations

BUSY_TIMEOUT_MS = 10_000  # how long a write waits for another process's transaction
UNANSWERED, INTERRUPTED = "unanswered", "interrupted"  # a question's trace before its answer / if none came
# The schema's version: one migration list for SQLite and PostgreSQL (``schema.py``).
SCHEMA_VERSION = len(migrations("sqlite"))


class StoreError(RuntimeError):
    """A store that cannot be used as asked (unknown conversation, newer schema, not a database)."""


class ConversationNotFound(StoreError):
    pass


class UserNotFound(StoreError):
    """No conversation of the store belongs to the user named."""


class StoreBusy(StoreError):
    """Another process held the store's write lock longer than ``BUSY_TIMEOUT_MS``."""


class ConversationChanged(StoreError):
    """The conversation changed under an open ``Conversation`` (another process wrote to it)."""


class ConversationBusy(StoreError):
    """Another process (or thread) kept the conversation for longer than we were willing to wait."""


class PinRefused(ValueError):
    """A standing fact not pinned: with it, the pinned facts would take more than their room (``PinRoom``).
    Nothing changed; the message says how much the pinned ones take and which they are."""


# The share of a conversation's memory budget its pinned standing facts may take when the caller names no room
# (an import restoring pins): ``RecallSettings.fact_share``'s default, the room the prompt shows facts in.
PIN_SHARE = 0.12
MAX_FACT_ID = 2**63 - 1  # a fact id is a 64-bit integer in both engines: a larger number names no fact


@dataclass(frozen=True)
class PinRoom:
    """What the pinned standing facts of a conversation may take together: ``tokens``, each fact's words
    counted by ``cost``; ``says`` names that room in a message ("12% of the memory budget of 512 tokens")."""

    tokens: int
    cost: Callable[[str], int]
    says: str = ""

    @classmethod
    def estimated(cls, budget: int) -> "PinRoom":
        """``PIN_SHARE`` of ``budget``, four characters a token (no tokenizer at hand)."""
        return cls(int(PIN_SHARE * budget), lambda text: -(-len(text) // 4),
                   f"{PIN_SHARE:.0%} of the memory budget of {budget} tokens")


def pin_refusal(fact_id: int, text: str, pinned: Sequence[tuple[int, str]], room: PinRoom) -> str:
    """Why standing fact ``fact_id`` (its words ``text``) cannot be pinned beside the current ``pinned`` ones
    ((id, words), oldest first) within ``room``, in one line; "" when it can."""
    others = [(i, t) for i, t in pinned if i != fact_id]
    used, need = sum(room.cost(t) for _, t in others), room.cost(text)
    if used + need <= room.tokens:
        return ""
    head = f"standing fact #{fact_id} was not pinned: pinned facts may take {room.tokens} tokens ({room.says})"
    if not others:
        return f"{head} and it needs {need}; a larger memory budget would hold it"
    ids = ", ".join(f"#{i}" for i, _ in others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
    pinned_now = f"the {len(others)} pinned now ({ids}) take" if len(others) > 1 else f"the one pinned now ({ids}) takes"
    return f"{head}, {pinned_now} {used} and it needs {need}; unpin one of them first"


@dataclass(frozen=True)
class Origin:
    """Where a stored conversation came from: ``source``, the file it was read from, and ``meta``, what that
    file said about it (both kept with it)."""

    source: str | None = None
    meta: dict[str, Any] | None = None


@dataclass
class ConversationInfo:
    id: str
    turns: int
    pages: int
    evicted: int
    probes: int
    source: str | None
    settings: dict[str, Any] = field(default_factory=dict)
    user: str | None = None  # whose conversation it is (None: nobody's, as every one was before users)


def check_user(name: str) -> str:
    """``name``, or a ``ValueError`` saying what is wrong with it: a user name is checked as a conversation id is
    (shown in listings, one a line: printable, no surrounding spaces, at most ``MAX_ID_LENGTH`` characters)."""
    if problem := id_problem(name):
        raise ValueError(f"user name {name!r} {problem}")
    return name


class Store(ABC):
    """A page store holding many conversations. Thread-safe. ``path`` names it in messages (a file, or a
    database URL without its password); ``local``: a file on this machine, beside which lock files, FAISS
    indexes, BM25 postings and saved KV caches live; ``encrypted``/``read_only``: nothing derived is saved
    beside it then."""

    kind: ClassVar[str]
    local: ClassVar[bool]
    encrypted: bool = False
    read_only: bool = False
    erase_note: ClassVar[str] = ""  # what the engine keeps that no erase reaches (PostgreSQL: its WAL, backups)
    path: Any

    # -- what an engine brings ----------------------------------------------------------------
    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Any]:
        """One atomic change: a connection whose ``execute``/``executemany`` take ``?`` placeholders, committed
        whole on success, rolled back whole on any error."""

    @abstractmethod
    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read (``?`` placeholders)."""

    @property
    @abstractmethod
    def schema_version(self) -> int: ...

    @abstractmethod
    def save_embeddings(self, rows: Sequence[tuple[str, int, str, str, str, bytes]]) -> tuple[Any, Any]:
        """Rows of (conv_id, page_id, kind, model, source text, float32 vector bytes). A replaced row gets a
        new rowid (what a loaded FAISS index keys on). Returns the vectors' version before and after, read in
        the same transaction: an index that was current at ``before`` is current at ``after`` once it has
        these rows; otherwise another process changed vectors too."""

    @abstractmethod
    def embeddings_version(self) -> Any:
        """Moves with every vector added, replaced or deleted."""

    @abstractmethod
    def embedding_fingerprint(self, signal: str) -> list[Any]:
        """Changes whenever a row of the signal is added, replaced or deleted, even when a delete and a
        re-insert leave the count and the rowids as they were: tells a saved index is stale."""

    @abstractmethod
    def owned_files(self) -> list:
        """Every file of this store on this machine: what an erase check reads."""

    @abstractmethod
    def _secure_delete(self) -> None:
        """Before a delete of text: what the engine needs so deleted cells are not left readable."""

    @abstractmethod
    def erase(self) -> bool:
        """Make deleted content unrecoverable from the store's files; False leaves a rewrite pending
        (``erase_pending``), which the next ``erase`` finishes."""

    @abstractmethod
    def namespace(self, name: str) -> Store:
        """The store of namespace ``name`` (checked by ``location.namespace_store``), its tables, counters and
        locks its own: nothing in it can name another namespace's rows."""

    def conversation_lock(self, conv_id: str, timeout: float):
        """The lock one conversation's writers take (``locks.conversation_lock``): by default a file beside the
        store; a store on a database server gives one of its own."""
        from .locks import file_conversation_lock

        return file_conversation_lock(self.path, conv_id, timeout)

    def _newer_schema(self, version: int) -> StoreError:
        return StoreError(
            f"store {self.path} has schema {version}, newer than this localpager ({SCHEMA_VERSION}); upgrade localpager"
        )

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- conversations ------------------------------------------------------------------------
    def has_conversation(self, conv_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)))

    def _require(self, conv_id: str) -> None:
        if not self.has_conversation(conv_id):
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")

    def save_conversation(
        self,
        conv_id: str,
        turns: Sequence[Turn],
        pages: Sequence[Page],
        probes: Sequence[Probe] = (),
        settings: dict[str, Any] | None = None,
        origin: Origin = Origin(),
        replace: bool = False,
        user: str | None = None,
    ) -> None:
        """Store a whole conversation in one transaction; an existing id is an error unless ``replace``.
        ``user``: whose it is (None: nobody's; a replaced conversation then keeps the user it had, and replacing
        one of another user is an error)."""
        _check_conversation(self.path, conv_id, turns, probes, user)
        source, meta = origin.source, origin.meta
        with self.transaction() as conn:
            exists = conn.execute("SELECT user_name FROM conversations WHERE id = ?", (conv_id,)).fetchone()
            if exists and not replace:
                raise StoreError(f"conversation {conv_id!r} already exists in {self.path}")
            numbered = _FactIds()
            if exists:  # what is replaced goes: other processes must not keep serving or saving it
                if user is not None and exists[0] is not None and exists[0] != user:
                    raise StoreError(f"conversation {conv_id!r} in {self.path} belongs to user {exists[0]!r}, "
                                     f"not {user!r}: it was not replaced")
                user = exists[0] if user is None else user
                _count_erasure(conn)
                numbered = _FactIds.read(_rows(conn), conv_id)
            conn.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))
            conn.execute(
                "INSERT INTO conversations (id, source, settings, meta, created_at, facts, user_name)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conv_id, source, json.dumps(settings or {}), json.dumps(meta or {}), time.time(), FACTS_VERSION,
                 user),
            )
            conn.executemany(
                "INSERT INTO turns (conv_id, idx, role, text, time, speaker, remembered, superseded_by)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(conv_id, t.index, t.role, t.text, t.time, t.speaker, int(t.remembered), t.superseded_by)
                 for t in turns],
            )
            self._write_pages(conn, conv_id, pages)
            self._write_facts(conn, conv_id, turns, numbered=numbered)
            conn.executemany(
                "INSERT INTO probes (conv_id, idx, question, answers, evidence, type, at, extra)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (conv_id, i, p.question, json.dumps(p.answers), json.dumps(p.evidence), p.type, p.at,
                     json.dumps(p.extra))
                    for i, p in enumerate(probes)
                ],
            )

    def create_conversation(self, conv_id: str, settings: dict[str, Any] | None = None,
                            user: str | None = None) -> None:
        """An empty conversation, e.g. for a new chat; ``user``: whose it is (None: nobody's)."""
        self.save_conversation(conv_id, [], [], settings=settings, user=user)

    def delete_conversation(self, conv_id: str) -> None:
        self._require(conv_id)
        with self.transaction() as conn:
            _count_erasure(conn)
            conn.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))
        self._standing.drop(conv_id)

    def settings(self, conv_id: str) -> dict[str, Any]:
        rows = self._query("SELECT settings FROM conversations WHERE id = ?", (conv_id,))
        if not rows:
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
        return json.loads(rows[0][0])

    def list_conversations(self, user: str | None = None) -> list[ConversationInfo]:
        """Every conversation, or with ``user`` only that user's, oldest first (in the order they were stored)."""
        where, args = ("WHERE c.user_name = ?", (user,)) if user is not None else ("", ())
        rows = self._query(
            f"""
            SELECT c.id, c.source, c.settings,
                (SELECT COUNT(*) FROM turns t WHERE t.conv_id = c.id),
                (SELECT COUNT(*) FROM pages p WHERE p.conv_id = c.id),
                (SELECT COUNT(*) FROM pages p WHERE p.conv_id = c.id AND p.evicted),
                (SELECT COUNT(*) FROM probes q WHERE q.conv_id = c.id),
                c.user_name
            FROM conversations c {where} ORDER BY c.created_at, c.id
            """, args
        )
        return [
            ConversationInfo(id=r[0], source=r[1], settings=json.loads(r[2]), turns=r[3], pages=r[4],
                             evicted=r[5], probes=r[6], user=r[7])
            for r in rows
        ]

    def conversation_user(self, conv_id: str) -> str | None:
        """Whose conversation ``conv_id`` is (None: nobody's)."""
        rows = self._query("SELECT user_name FROM conversations WHERE id = ?", (conv_id,))
        if not rows:
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
        return rows[0][0]

    def users(self) -> list[str]:
        """The users some conversation belongs to, by name."""
        return [r[0] for r in self._query("SELECT DISTINCT user_name FROM conversations WHERE user_name IS NOT NULL"
                                          " ORDER BY user_name")]

    # -- turns, pages, probes -----------------------------------------------------------------
    def turns(self, conv_id: str) -> list[Turn]:
        self._require(conv_id)
        rows = self._query(
            "SELECT idx, role, text, time, speaker, superseded_by, remembered FROM turns WHERE conv_id = ?"
            " ORDER BY idx", (conv_id,),
        )
        return [Turn(index=r[0], role=r[1], text=r[2], time=r[3], speaker=r[4], superseded_by=r[5],
                     remembered=bool(r[6])) for r in rows]

    def pages(self, conv_id: str, turns: Sequence[Turn] | None = None) -> list[Page]:
        """The pages of a conversation, with their text rendered from ``turns`` (loaded if not given)."""
        turns = self.turns(conv_id) if turns is None else turns
        rows = self._query(
            "SELECT page_id, first_turn, last_turn, token_count, keywords, access_count, last_access,"
            " pinned, evicted, keywords_by, worth FROM pages WHERE conv_id = ? ORDER BY page_id",
            (conv_id,),
        )
        return [
            Page(page_id=r[0], first_turn=r[1], last_turn=r[2], token_count=r[3], keywords=json.loads(r[4]),
                 access_count=r[5], last_access=r[6], pinned=bool(r[7]), evicted=bool(r[8]),
                 keywords_by=r[9], worth=None if r[10] is None else bool(r[10]),
                 text="\n".join(t.render() for t in turns[r[1] : r[2] + 1] if t.text))  # not forgotten
            for r in rows
        ]

    def probes(self, conv_id: str) -> list[Probe]:
        self._require(conv_id)
        rows = self._query(
            "SELECT question, answers, evidence, type, at, extra FROM probes WHERE conv_id = ? ORDER BY idx",
            (conv_id,),
        )
        return [
            Probe(question=r[0], answers=json.loads(r[1]), evidence=json.loads(r[2]), type=r[3], at=r[4],
                  extra=json.loads(r[5]))
            for r in rows
        ]

    @staticmethod
    def _write_pages(conn, conv_id: str, pages: Sequence[Page]) -> None:
        conn.executemany(
            # an upsert, not INSERT OR REPLACE: a replace deletes the row first (firing delete triggers and
            # any cascade) and would silently drop columns this statement does not name
            "INSERT INTO pages (conv_id, page_id, first_turn, last_turn, token_count, keywords,"
            " access_count, last_access, pinned, evicted, keywords_by, worth)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (conv_id, page_id) DO UPDATE SET first_turn = excluded.first_turn,"
            " last_turn = excluded.last_turn, token_count = excluded.token_count, keywords = excluded.keywords,"
            " access_count = excluded.access_count, last_access = excluded.last_access, pinned = excluded.pinned,"
            " evicted = excluded.evicted, keywords_by = excluded.keywords_by, worth = excluded.worth",
            [
                (conv_id, p.page_id, p.first_turn, p.last_turn, p.token_count, json.dumps(p.keywords),
                 p.access_count, p.last_access, int(p.pinned), int(p.evicted), p.keywords_by,
                 None if p.worth is None else int(p.worth))
                for p in pages
            ],
        )

    def append_turn(self, conv_id: str, turn: Turn, pages: Sequence[Page] = (), *, unanswered: bool = False,
                    answers: tuple[int, dict[str, Any]] | None = None, asked: Sequence[int] = ()) -> int:
        """Make ``turn`` durable, with the pages it changed, in one transaction; returns the conversation's
        generation after it.

        The turn's index is checked inside the write transaction: it must be the next one, or another
        writer got there first and the caller's pages are stale (``ConversationChanged``, nothing stored).
        ``unanswered`` stores, with a question, a trace saying it has no answer yet; ``answers`` =
        (question's turn, trace) replaces that trace with the answer's, with the answer, in the same
        transaction: a process killed in between leaves the question marked unanswered. The standing facts the
        turn states are stored with it (superseding older ones of the same slot); ``asked``: the ids of the
        standing facts the answer was given, counted."""
        check_text(turn.text)
        for what, value in (("turn time", turn.time), ("turn speaker", turn.speaker)):
            if value is not None:
                check_text(value, what)
        with self.transaction() as conn:
            before = self._generation_held(conn, conv_id)
            if before is None:
                raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
            expected = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM turns WHERE conv_id = ?",
                                    (conv_id,)).fetchone()[0]
            if turn.index != expected:
                raise ConversationChanged(
                    f"conversation {conv_id!r} changed in another process (turn {turn.index} is not next: "
                    f"{expected} is); open it again")
            conn.execute(
                "INSERT INTO turns (conv_id, idx, role, text, time, speaker, remembered) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conv_id, turn.index, turn.role, turn.text, turn.time, turn.speaker, int(turn.remembered)),
            )
            self._write_pages(conn, conv_id, pages)
            current = self._add_facts(conn, conv_id, turn, self._standing.take(conv_id, before))
            if asked:
                conn.executemany("UPDATE facts SET asked = asked + 1 WHERE conv_id = ? AND fact_id = ?",
                                 [(conv_id, i) for i in asked])
            if unanswered:
                conn.execute("INSERT INTO traces (conv_id, turn_idx, created_at, data) VALUES (?, ?, ?, ?)",
                             (conv_id, turn.index, time.time(),
                              json.dumps({"question": turn.text, "status": UNANSWERED})))
            if answers is not None:
                question_idx, trace = answers
                self._replace_unanswered(conn, conv_id, question_idx, trace)
            after = conn.execute("SELECT generation FROM conversations WHERE id = ?", (conv_id,)).fetchone()[0]
        self._standing.keep(conv_id, after, current)  # committed: the standing facts as of ``after``
        return after

    def _generation_held(self, conn, conv_id: str) -> int | None:
        """In a write transaction, first: the conversation's generation (None: no such conversation), which no
        other writer can change before this transaction ends (SQLite's ``BEGIN IMMEDIATE`` holds the file)."""
        row = conn.execute("SELECT generation FROM conversations WHERE id = ?", (conv_id,)).fetchone()
        return None if row is None else row[0]

    @property
    def _standing(self) -> "StandingCache":
        """This store's ``StandingCache`` (made on first use)."""
        cache = self.__dict__.get("_standing_cache")
        if cache is None:
            with _NEW_CACHE:
                cache = self.__dict__.setdefault("_standing_cache", StandingCache())
        return cache

    @staticmethod
    def _replace_unanswered(conn, conv_id: str, question_idx: int, data: dict[str, Any]) -> None:
        """The unanswered trace of ``question_idx`` becomes ``data`` (a new trace if there is none)."""
        cur = conn.execute(
            "UPDATE traces SET data = ?, created_at = ? WHERE conv_id = ? AND turn_idx = ?"
            " AND json_extract(data, '$.status') = ?",
            (json.dumps(data), time.time(), conv_id, question_idx, UNANSWERED))
        if cur.rowcount == 0:
            conn.execute("INSERT INTO traces (conv_id, turn_idx, created_at, data) VALUES (?, ?, ?, ?)",
                         (conv_id, question_idx, time.time(), json.dumps(data)))

    def unanswered(self, conv_id: str) -> list[int]:
        """The turns of questions stored with no answer yet: still being answered, or never to be (the
        process answering them died, or the model failed)."""
        rows = self._query("SELECT turn_idx FROM traces WHERE conv_id = ? AND json_extract(data, '$.status') = ?"
                           " ORDER BY id", (conv_id, UNANSWERED))
        return [r[0] for r in rows]

    def mark_interrupted(self, conv_id: str, reason: str, note: Turn | None = None,
                         pages: Sequence[Page] = ()) -> int:
        """Every unanswered question of the conversation is marked ``interrupted`` (with ``reason``), and
        ``note`` (an assistant turn saying no answer came) appended with its pages, in one transaction.
        Returns the conversation's generation after it."""
        with self.transaction() as conn:
            rows = conn.execute("SELECT id, data FROM traces WHERE conv_id = ? AND json_extract(data, '$.status') = ?",
                                (conv_id, UNANSWERED)).fetchall()
            for trace_id, data in rows:
                conn.execute("UPDATE traces SET data = ? WHERE id = ?",
                             (json.dumps({**json.loads(data), "status": INTERRUPTED, "reason": reason}), trace_id))
            if note is not None:
                expected = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM turns WHERE conv_id = ?",
                                        (conv_id,)).fetchone()[0]
                if note.index != expected:
                    raise ConversationChanged(f"conversation {conv_id!r} changed in another process; open it again")
                conn.execute("INSERT INTO turns (conv_id, idx, role, text, time, speaker) VALUES (?, ?, ?, ?, ?, ?)",
                             (conv_id, note.index, note.role, note.text, note.time, note.speaker))
                self._write_pages(conn, conv_id, pages)
            return conn.execute("SELECT generation FROM conversations WHERE id = ?", (conv_id,)).fetchone()[0]

    def generation(self, conv_id: str) -> int:
        """Changes whenever the conversation's turns, pages, vectors or settings change (see migration 6)."""
        rows = self._query("SELECT generation FROM conversations WHERE id = ?", (conv_id,))
        if not rows:
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
        return rows[0][0]

    def erase_generation(self) -> int:
        """How many erasures (forgets, deleted or replaced conversations) the store has seen: memory a
        process built under a smaller count may hold text that is gone (see migration 7)."""
        return self._counter("erasures")

    def erase_pending(self) -> bool:
        """Whether deleted text may still be in the store's files: their rewrite could not finish (another
        process was reading the store) or never ran (the process died first). ``erase`` finishes it."""
        return bool(self._counter("erase_pending"))

    def _counter(self, name: str) -> int:
        rows = self._query("SELECT value FROM counters WHERE name = ?", (name,))
        return rows[0][0] if rows else 0

    def update_pages(self, conv_id: str, pages: Sequence[Page]) -> None:
        self._require(conv_id)
        with self.transaction() as conn:
            self._write_pages(conn, conv_id, pages)

    def update_settings(self, conv_id: str, settings: dict[str, Any]) -> None:
        self._require(conv_id)
        with self.transaction() as conn:
            conn.execute("UPDATE conversations SET settings = ? WHERE id = ?", (json.dumps(settings), conv_id))

    # -- traces -------------------------------------------------------------------------------
    def add_trace(self, conv_id: str, turn_idx: int, data: dict[str, Any]) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO traces (conv_id, turn_idx, created_at, data) VALUES (?, ?, ?, ?)",
                (conv_id, turn_idx, time.time(), json.dumps(data)),
            )

    def traces(self, conv_id: str) -> list[dict[str, Any]]:
        self._require(conv_id)
        rows = self._query("SELECT turn_idx, created_at, data FROM traces WHERE conv_id = ? ORDER BY id", (conv_id,))
        return [{"turn": r[0], "created_at": r[1], **json.loads(r[2])} for r in rows]

    # -- embeddings ---------------------------------------------------------------------------
    def embedding_rows(self, signal: str, conv_id: str | None = None, page_ids: Sequence[int] | None = None,
                       vectors: bool = True) -> list[tuple]:
        """(rowid, conv_id, page_id, kind, model, source text[, vector]) of a signal: ``bookmark``, ``text``
        or ``turn`` (kinds ``turn:<index>``; ``retrieval.choices.Signal``), optionally of one conversation's pages. ``vectors=False``
        leaves the vectors out: checking what is stale, or which rows to search, needs no vectors."""
        columns = "rowid, conv_id, page_id, kind, model, source" + (", vector" if vectors else "")
        sql = f"SELECT {columns} FROM embeddings WHERE " + signal_sql()
        args: list[Any] = [signal, signal]
        if conv_id is not None:
            sql += " AND conv_id = ?"
            args.append(conv_id)
        if page_ids is not None:
            sql += f" AND page_id IN ({','.join('?' * len(page_ids))})"
            args.extend(page_ids)
        return [tuple(r) for r in self._query(sql + " ORDER BY rowid", args)]

    def embedding_keys(self, signal: str) -> list[tuple[int, str, int, str]]:
        """(rowid, conv_id, page_id, kind) of every row of a signal, by rowid: what a FAISS index read from
        its file needs to know of its rows (``embedding_rows`` without the source texts: half the time)."""
        return [tuple(r) for r in self._query("SELECT rowid, conv_id, page_id, kind FROM embeddings WHERE "
                                              + signal_sql() + " ORDER BY rowid", (signal, signal))]

    def embedding_widths(self) -> dict[str, dict[int, int]]:
        """{model: {numbers a vector: vectors}} of every vector stored: what an import's vectors must fit (one
        FAISS index per signal holds every conversation's vectors, so they must all have one width)."""
        rows = self._query("SELECT model, length(vector), COUNT(*) FROM embeddings GROUP BY model, length(vector)")
        out: dict[str, dict[int, int]] = {}
        for model, size, count in rows:
            out.setdefault(model, {})[int(size) // 4] = int(count)
        return out

    def embedded_turn_counts(self, conv_id: str, model: str) -> dict[int, int]:
        """How many turn vectors of ``model`` each page of a conversation has: one query where reading every
        row's source would take a second at 100,000 turns (``PageIndex.update``'s first look)."""
        rows = self._query("SELECT page_id, COUNT(*) FROM embeddings WHERE conv_id = ? AND kind LIKE 'turn:%'"
                           " AND model = ? GROUP BY page_id", (conv_id, model))
        return {int(r[0]): int(r[1]) for r in rows}

    # -- standing facts ------------------------------------------------------------------------
    def facts(self, conv_id: str) -> list[StandingFact]:
        """Every standing fact of a conversation, oldest first, superseded ones included (``current`` says
        which stand), with its source turn's time and speaker; a fact of a turn the user corrected
        (``Conversation.correct``) no longer stands either."""
        self._require(conv_id)
        rows = self._query(
            "SELECT f.fact_id, f.turn_idx, f.kind, f.subject, f.text, t.time, t.speaker, f.superseded_by, f.pinned,"
            " f.asked, t.superseded_by FROM facts f JOIN turns t ON t.conv_id = f.conv_id AND t.idx = f.turn_idx"
            " WHERE f.conv_id = ? ORDER BY f.fact_id", (conv_id,))
        return [StandingFact(fact_id=r[0], turn=r[1], kind=r[2], subject=r[3], text=r[4], time=r[5], speaker=r[6],
                             superseded_by=r[7], pinned=bool(r[8]), asked=r[9], corrected=r[10] is not None)
                for r in rows]

    def facts_version(self, conv_id: str) -> int:
        """The version of the extractor (``core.facts.FACTS_VERSION``) the conversation's facts were made by
        (0: never made, a conversation stored before standing facts existed)."""
        rows = self._query("SELECT facts FROM conversations WHERE id = ?", (conv_id,))
        if not rows:
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
        return rows[0][0]

    def remade_facts(self, conv_id: str, turns: Sequence[Turn]) -> list[StandingFact]:
        """The standing facts this extractor makes of a conversation's ``turns``, numbered as ``rebuild_facts``
        would store them: what a reader is shown, writing nothing, when an older extractor made the stored ones
        (so that the id it shows is the id a pin or a delete reaches after the rebuild)."""
        return _FactIds.read(self._query, conv_id).renumber(facts_of(turns))[0]

    def rebuild_facts(self, conv_id: str) -> None:
        """Make a conversation's standing facts again from its turns with this extractor, in one transaction;
        a pin stays on the fact of the same turn and words."""
        self._require(conv_id)
        with self.transaction() as conn:
            pinned = {(r[0], r[1]) for r in conn.execute(
                "SELECT turn_idx, text FROM facts WHERE conv_id = ? AND pinned <> 0", (conv_id,)).fetchall()}
            numbered = _FactIds.read(_rows(conn), conv_id)
            conn.execute("DELETE FROM facts WHERE conv_id = ?", (conv_id,))
            rows = conn.execute("SELECT idx, role, text, time, speaker, remembered FROM turns WHERE conv_id = ?"
                                " ORDER BY idx", (conv_id,)).fetchall()
            self._write_facts(conn, conv_id, [Turn(index=r[0], role=r[1], text=r[2], time=r[3], speaker=r[4],
                                                   remembered=bool(r[5])) for r in rows], pinned, numbered)
            conn.execute("UPDATE conversations SET facts = ? WHERE id = ?", (FACTS_VERSION, conv_id))

    def pin_fact(self, conv_id: str, fact_id: int, pinned: bool = True, room: PinRoom | None = None) -> None:
        """Keep a standing fact in the prompt (or let it be chosen again). The current pinned facts must fit
        ``room`` together (default: ``PinRoom.estimated`` of the conversation's stored budget): a pin past it is
        refused (``PinRefused``), checked in the transaction that pins, so two processes cannot both pass it."""
        self._require(conv_id)
        if isinstance(fact_id, bool) or not 0 < fact_id <= MAX_FACT_ID:
            raise ValueError(f"no standing fact {fact_id} in conversation {conv_id!r}")
        if room is None and pinned:
            budget = self.settings(conv_id).get("budget")
            room = PinRoom.estimated(budget if isinstance(budget, int) and budget > 0 else DEFAULT_BUDGET)
        with self.transaction() as conn:
            found = conn.execute("SELECT text, pinned FROM facts WHERE conv_id = ? AND fact_id = ?",
                                 (conv_id, fact_id)).fetchone()
            if found is None:
                raise ValueError(f"no standing fact {fact_id} in conversation {conv_id!r}")
            if pinned and not found[1]:
                others = conn.execute(
                    "SELECT f.fact_id, f.text FROM facts f JOIN turns t ON t.conv_id = f.conv_id AND t.idx = f.turn_idx"
                    " WHERE f.conv_id = ? AND f.pinned <> 0 AND f.superseded_by IS NULL AND t.superseded_by IS NULL"
                    " ORDER BY f.fact_id", (conv_id,)).fetchall()
                refused = pin_refusal(fact_id, found[0], [(r[0], r[1]) for r in others], room)
                if refused:
                    raise PinRefused(refused)
            conn.execute("UPDATE facts SET pinned = ? WHERE conv_id = ? AND fact_id = ?",
                         (int(pinned), conv_id, fact_id))

    @staticmethod
    def _write_facts(conn, conv_id: str, turns: Sequence[Turn], pinned: set[tuple[int, str]] = frozenset(),
                     numbered: "_FactIds | None" = None) -> None:
        """The standing facts of ``turns`` (a whole conversation, in order: ``core.facts.facts_of``), numbered
        past every id the conversation had (``numbered``: its facts before, when they are made again)."""
        facts, last = (numbered or _FactIds()).renumber(facts_of(turns, pinned))
        conn.executemany("INSERT INTO facts (conv_id, fact_id, turn_idx, kind, subject, text, superseded_by, pinned)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         [(conv_id, f.fact_id, f.turn, f.kind, f.subject, f.text, f.superseded_by, int(f.pinned))
                          for f in facts])
        conn.execute("UPDATE conversations SET last_fact = ? WHERE id = ?", (last, conv_id))

    @staticmethod
    def _add_facts(conn, conv_id: str, turn: Turn, current: CurrentFacts | None) -> CurrentFacts | None:
        """The standing facts one new turn states, superseding the older ones of their slot. ``current``: the
        conversation's standing facts as this transaction found them (None: read here if the turn states any);
        returned as the turn leaves them. A new fact is compared with those of its slot only
        (``CurrentFacts``), and with none of the turn's other facts."""
        drafts = extract(turn)
        if not drafts:
            return current
        if current is None:
            current = CurrentFacts()
            for r in conn.execute(
                    "SELECT f.fact_id, f.kind, f.subject, f.text, t.speaker FROM facts f JOIN turns t ON t.conv_id ="
                    " f.conv_id AND t.idx = f.turn_idx WHERE f.conv_id = ? AND f.superseded_by IS NULL ORDER BY"
                    " f.fact_id", (conv_id,)).fetchall():
                current.add(r[0], FactDraft(*r[1:]))
        last = _FactIds.highest(_rows(conn), conv_id)
        made = list(enumerate(drafts, start=last + 1))
        conn.execute("UPDATE conversations SET last_fact = ? WHERE id = ?", (last + len(made), conv_id))
        for n, draft in made:
            conn.execute("INSERT INTO facts (conv_id, fact_id, turn_idx, kind, subject, text) VALUES (?, ?, ?, ?, ?, ?)",
                         (conv_id, n, turn.index, draft.kind, draft.subject, draft.text))
            replaced = current.replaced_by(draft)
            conn.executemany("UPDATE facts SET superseded_by = ? WHERE conv_id = ? AND fact_id = ?",
                             [(n, conv_id, old) for old in replaced])
            current.remove(replaced)
        for n, draft in made:
            current.add(n, draft)
        return current

    @staticmethod
    def _forget_facts(conn, conv_id: str, turns: Sequence[int]) -> None:
        """The standing facts of forgotten turns go, and which fact supersedes which is worked out again from
        those left, oldest first (what a forgotten fact had superseded stands again, unless a later one left
        supersedes it too)."""
        gone = [r[0] for t in turns for r in conn.execute(
            "SELECT fact_id FROM facts WHERE conv_id = ? AND turn_idx = ?", (conv_id, t)).fetchall()]
        if not gone:
            return
        conn.executemany("DELETE FROM facts WHERE conv_id = ? AND fact_id = ?", [(conv_id, i) for i in gone])
        left = conn.execute(
            "SELECT f.fact_id, f.kind, f.subject, f.text, t.speaker, f.superseded_by FROM facts f JOIN turns t"
            " ON t.conv_id = f.conv_id AND t.idx = f.turn_idx WHERE f.conv_id = ? ORDER BY f.fact_id",
            (conv_id,)).fetchall()
        by = superseded([FactDraft(*r[1:5]) for r in left], [r[0] for r in left])
        conn.executemany("UPDATE facts SET superseded_by = ? WHERE conv_id = ? AND fact_id = ?",
                         [(by.get(r[0]), conv_id, r[0]) for r in left if by.get(r[0]) != r[5]])

    # -- forgetting, corrections and interchange ----------------------------------------------
    def conversation_record(self, conv_id: str) -> dict[str, Any]:
        """A conversation's own row: source, settings, meta, created_at, user."""
        rows = self._query("SELECT source, settings, meta, created_at, user_name FROM conversations WHERE id = ?",
                           (conv_id,))
        if not rows:
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
        r = rows[0]
        return {"source": r[0], "settings": json.loads(r[1]), "meta": json.loads(r[2]), "created_at": r[3],
                "user": r[4]}

    def probe_rows(self, conv_id: str) -> list[tuple[int, Probe]]:
        """(row index, probe) of a conversation's probes: rows forgetting may delete."""
        rows = self._query("SELECT idx FROM probes WHERE conv_id = ? ORDER BY idx", (conv_id,))
        return list(zip([r[0] for r in rows], self.probes(conv_id)))

    def trace_rows(self, conv_id: str) -> list[tuple[int, int, dict[str, Any]]]:
        """(row id, turn, data) of every stored trace of a conversation: what forgetting scrubs."""
        rows = self._query("SELECT id, turn_idx, data FROM traces WHERE conv_id = ? ORDER BY id", (conv_id,))
        return [(r[0], r[1], json.loads(r[2])) for r in rows]

    def forget_turns(self, conv_id: str, turns: Sequence[int], pages: Sequence[Page], *,
                     drop_traces: Sequence[int] = (), rewrite_traces: dict[int, dict[str, Any]] | None = None,
                     drop_probes: Sequence[int] = (), meta: dict[str, Any] | None = None) -> tuple[int, bool]:
        """Blank ``turns`` (their places stay: indices and pages do not move), store ``pages`` (their
        keywords rebuilt from what is left), delete the turns' vectors and the pages' bookmark and text
        vectors, drop or rewrite traces and probes, and replace the conversation's ``meta`` (scrubbed of the
        text; None leaves it), in one transaction; then ``erase``. Returns the number of vectors deleted and
        whether the erase was complete."""
        self._require(conv_id)
        forgotten = sorted(set(turns))
        with self._lock:
            self._secure_delete()
            with self.transaction() as conn:
                _count_erasure(conn)
                conn.executemany("UPDATE turns SET text = '', superseded_by = NULL WHERE conv_id = ? AND idx = ?",
                                 [(conv_id, i) for i in forgotten])
                # a forgotten correction no longer replaces what it corrected
                conn.executemany("UPDATE turns SET superseded_by = NULL WHERE conv_id = ? AND superseded_by = ?",
                                 [(conv_id, i) for i in forgotten])
                vectors = conn.executemany("DELETE FROM embeddings WHERE conv_id = ? AND kind = ?",
                                           [(conv_id, f"turn:{i}") for i in forgotten]).rowcount
                vectors += conn.executemany(
                    "DELETE FROM embeddings WHERE conv_id = ? AND page_id = ? AND kind IN ('bookmark', 'text')",
                    [(conv_id, p.page_id) for p in pages]).rowcount
                self._write_pages(conn, conv_id, pages)
                conn.executemany("DELETE FROM traces WHERE id = ?", [(i,) for i in drop_traces])
                conn.executemany("UPDATE traces SET data = ? WHERE id = ?",
                                 [(json.dumps(d), i) for i, d in (rewrite_traces or {}).items()])
                conn.executemany("DELETE FROM probes WHERE conv_id = ? AND idx = ?",
                                 [(conv_id, i) for i in drop_probes])
                if meta is not None:
                    conn.execute("UPDATE conversations SET meta = ? WHERE id = ?", (json.dumps(meta), conv_id))
                self._forget_facts(conn, conv_id, forgotten)
                # tokens issued for a forget in it: their previews showed text that is gone now
                conn.execute("DELETE FROM confirmations WHERE conv_id = ?", (conv_id,))
            self._standing.drop(conv_id)  # no memory keeps the forgotten facts' words either
        return vectors, self.erase()

    def forget_conversation(self, conv_id: str, erase: bool = True) -> bool:
        """Delete a conversation with everything of it (turns, pages, probes, traces, vectors), then erase.
        ``erase=False``: the rewrite of the files is left pending (``erase_pending``; returns False), for a caller
        forgetting many conversations that erases once after the last (``controls.forget_conversations``)."""
        self._require(conv_id)
        with self._lock:
            self._secure_delete()
            with self.transaction() as conn:
                _count_erasure(conn)
                conn.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))
            self._standing.drop(conv_id)
        return self.erase() if erase else False

    def set_superseded(self, conv_id: str, marks: dict[int, int | None], pages: Sequence[Page] = ()) -> None:
        """Mark turns as corrected by later ones (``{old: new}``; None clears a mark), with the pages whose
        keywords changed because of it, in one transaction."""
        self._require(conv_id)
        with self.transaction() as conn:
            conn.executemany("UPDATE turns SET superseded_by = ? WHERE conv_id = ? AND idx = ?",
                             [(new, conv_id, old) for old, new in marks.items()])
            self._write_pages(conn, conv_id, pages)

    # -- confirmations of destructive calls (``serving.mcp.Confirmations``) --------------------
    def add_confirmation(self, token: str, conv_id: str, binding: str, preview: str, expires: float) -> None:
        """Keep a confirmation token for ``conv_id`` until ``expires`` (seconds since the epoch): ``token`` is its
        digest (never the token), ``binding`` and ``preview`` what it was issued for (digests too). Expired
        tokens of every conversation go in the same transaction."""
        self._require(conv_id)
        with self.transaction() as conn:
            conn.execute("DELETE FROM confirmations WHERE expires < ?", (time.time(),))
            conn.execute("INSERT INTO confirmations (token, conv_id, binding, preview, expires) VALUES (?, ?, ?, ?, ?)",
                         (token, conv_id, binding, preview, expires))

    def take_confirmation(self, token: str) -> tuple[str, str, str, float] | None:
        """The (conversation, binding, preview, expires) a token was kept with, deleted by the same statement:
        of two processes presenting it at once, one gets it. None: no such token (unknown, used, or dropped by
        a forget)."""
        with self.transaction() as conn:
            row = conn.execute("DELETE FROM confirmations WHERE token = ? RETURNING conv_id, binding, preview, expires",
                               (token,)).fetchone()
        return tuple(row) if row is not None else None

    def conversation_embeddings(self, conv_id: str) -> list[tuple[int, str, str, str, bytes]]:
        """(page_id, kind, model, source text, vector) of every vector of a conversation, for export."""
        rows = self._query("SELECT page_id, kind, model, source, vector FROM embeddings WHERE conv_id = ?"
                           " ORDER BY rowid", (conv_id,))
        return [tuple(r) for r in rows]


_NEW_CACHE = threading.Lock()


class StandingCache:
    """The standing facts of the conversations this store wrote to last (``CurrentFacts``), each with the
    generation its write left the conversation at. A write that finds a conversation at that generation (no
    change since, by any process: every write to a turn or a fact moves it, and ``Store._generation_held`` keeps
    other writers out until it commits) compares a new turn's facts with these, instead of reading every
    standing fact again: adding a turn costs the same with 10 facts or 10,000. Taken out while a transaction
    uses it, put back once that transaction has committed: a rolled-back write leaves nothing here."""

    KEEP = 32  # conversations

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[int, CurrentFacts]] = {}

    def take(self, conv_id: str, generation: int) -> CurrentFacts | None:
        """The conversation's standing facts if they are those of ``generation`` (None: read them again)."""
        with self._lock:
            held = self._held.pop(conv_id, None)
        return held[1] if held is not None and held[0] == generation else None

    def keep(self, conv_id: str, generation: int, current: CurrentFacts | None) -> None:
        if current is None:
            return
        with self._lock:
            self._held[conv_id] = (generation, current)
            while len(self._held) > self.KEEP:  # the conversation written to longest ago goes
                del self._held[next(iter(self._held))]

    def drop(self, conv_id: str) -> None:
        with self._lock:
            self._held.pop(conv_id, None)


def check_owners(store: Store, taken: Sequence[tuple[str, str | None]]) -> None:
    """Before anything is written: a conversation already stored that an import or ingest would replace or extend
    as a user's ((id, user) each; None: nobody's) must be nobody's or that user's."""
    for conv_id, user in taken:
        owner = store.conversation_user(conv_id)
        if user is not None and owner is not None and owner != user:
            raise StoreError(f"conversation {conv_id!r} in {store.path} belongs to user {owner!r}, not {user!r}; "
                             "nothing was stored")


@dataclass
class _FactIds:
    """How a conversation's standing facts are numbered when they are all made again (a rebuild for a new
    extractor, a replace of the conversation), so that no id is given twice: a fact made at the same turn in the
    same words as before keeps its id while the kept ids still rise in the order the facts were said (``facts``
    lists them by id, oldest first); every other fact, and every one after it, gets an id past the highest the
    conversation ever had."""

    before: dict[tuple[int, str], int] = field(default_factory=dict)  # (turn, words) -> the id they had
    last: int = 0  # the highest id the conversation ever had

    @classmethod
    def read(cls, query: Callable[[str, Sequence[Any]], list], conv_id: str) -> "_FactIds":
        """The ids a conversation's facts have (``query``: a transaction's ``_rows(conn)`` or ``Store._query``)."""
        before: dict[tuple[int, str], int] = {}
        for turn, text, fact_id in query("SELECT turn_idx, text, fact_id FROM facts WHERE conv_id = ? ORDER BY fact_id",
                                         (conv_id,)):
            before.setdefault((turn, text), fact_id)
        return cls(before, cls.highest(query, conv_id))

    @staticmethod
    def highest(query: Callable[[str, Sequence[Any]], list], conv_id: str) -> int:
        """The highest fact id the conversation ever had (0: none, or no such conversation)."""
        rows = query("SELECT c.last_fact, (SELECT COALESCE(MAX(f.fact_id), 0) FROM facts f WHERE f.conv_id = c.id)"
                     " FROM conversations c WHERE c.id = ?", (conv_id,))
        return max(rows[0]) if rows else 0

    def renumber(self, facts: Sequence[StandingFact]) -> tuple[list[StandingFact], int]:
        """``facts`` (numbered from 1 by ``facts_of``, in the order said) with their ids, and the new highest."""
        top, given, ids = max([self.last, *self.before.values()]), 0, {}
        for fact in facts:
            kept = self.before.get((fact.turn, fact.text))
            if kept is None or kept <= given:
                top += 1
                kept = top
            ids[fact.fact_id] = given = kept
        return [copy_with(f, fact_id=ids[f.fact_id], superseded_by=ids.get(f.superseded_by)) for f in facts], top


def _rows(conn) -> Callable[[str, Sequence[Any]], list]:
    """A query function over a transaction's connection (as ``Store._query`` is over the store)."""
    return lambda sql, args: conn.execute(sql, args).fetchall()


def _count_erasure(conn) -> None:
    """In the transaction that deletes text: the store's erase generation moves on, so every process
    drops what it holds of the text, and a rewrite of the files is pending until ``Store.erase`` ends."""
    conn.execute("UPDATE counters SET value = value + 1 WHERE name = 'erasures'")
    conn.execute("UPDATE counters SET value = 1 WHERE name = 'erase_pending'")


def _check_conversation(path: Any, conv_id: str, turns: Sequence[Turn], probes: Sequence[Probe],
                        user: str | None = None) -> None:
    """Everything SQLite could not store, or a listing could not show, as one StoreError before any write."""
    try:
        check_id(conv_id)
        if user is not None:
            check_user(user)
        for i, t in enumerate(turns):
            for what, value in (("text", t.text), ("time", t.time), ("speaker", t.speaker)):
                if value is not None:
                    check_text(value, f"turn {i} {what}")
        for i, probe in enumerate(probes):
            for value in (probe.question, *probe.answers):
                check_text(value, f"probe {i}")
    except ValueError as exc:
        raise StoreError(f"cannot store conversation {conv_id!r} in {path}: {exc}") from None


def signal_sql() -> str:
    """The rows of one signal: its own kind (``text``) or its kind with an index (``turn:12``)."""
    return "(kind = ? OR kind LIKE ? || ':%')"
