"""Memory the user controls: forget, correct, search.

Forgetting blanks turns in place rather than deleting rows, so turn indices, page ranges, citations and
the FAISS rows of other turns keep meaning what they meant; the text, its vectors, the page's bookmark
and every trace or probe that repeats it go, and the store's files are rewritten (``Store.erase``) so the
bytes are gone from disk too. Every forget moves the store's erase generation on, in the transaction that
deletes the text, so other processes drop what they hold of it (``held.Held.drop_held``) instead of serving
or saving it; a rewrite of the files that could not finish is recorded and finished by the next forget
(``held.Held.finish_erase``). A correction appends the new statement and marks the old turn superseded:
recall shows the replacement (``rerank.py``), search labels the old turn, the old page's bookmark is
rebuilt without it.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Sequence

from ..core.dates import resolve
from ..core.records import Page, Turn
from ..store.base import ConversationBusy, Store
from ..store.locks import LockTimeout, conversation_lock
from .held import Held

if TYPE_CHECKING:
    from ..core.pager import Pager
    from ..retrieval.rerank import RerankSelector

PREVIEW = 80  # characters of a turn in a report's ``texts`` (its start)
LISTED = 1200  # characters of a turn a report's ``lines`` show; past them, how many more there are
EXPORTS_NOTE = ("exports written before this forget still hold the forgotten text (localpager keeps no list of "
                "them): delete them, or export again")


@dataclass
class ForgetReport:
    """What a forget removed (or, with ``dry_run``, would remove)."""

    conversation: str
    turns: list[int] = field(default_factory=list)  # turn indices forgotten
    pages: list[int] = field(default_factory=list)  # pages whose text and bookmark changed
    texts: list[str] = field(default_factory=list)  # the start of each forgotten turn (``PREVIEW`` characters)
    full_texts: list[str] = field(default_factory=list)  # each forgotten turn whole, what ``lines`` list
    roles: list[str] = field(default_factory=list)  # each forgotten turn's role: user or assistant
    quoted: list[int] = field(default_factory=list)  # turns that are answers quoting the matched text: taken whole
    traces: int = 0  # stored traces deleted (they repeated the turns)
    traces_scrubbed: int = 0  # traces kept with the changed bookmarks rewritten
    probes: int = 0  # stored probes deleted (their evidence was forgotten, or a field of theirs repeats it)
    meta_scrubbed: int = 0  # values of the conversation's meta that held the text, now "[forgotten]"
    vectors: int = 0  # embedding rows deleted
    dry_run: bool = False
    whole: bool = False  # the whole conversation
    erased: bool = False  # the text is gone from the store's files too (never on a dry run)
    rewritten: bool = False  # this call rewrote the store's files (a forget's, or one pending from before)
    rewrite_pending: bool = False  # the files still hold erased text: another process was reading the store
    note: str = ""  # what stays outside the store: earlier exports
    database_note: str = ""  # what the database server keeps that no rewrite reaches (PostgreSQL: its WAL, backups)

    def to_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        verb = "would forget" if self.dry_run else "forgot"
        if self.whole:
            head = f"{verb} conversation {self.conversation}: {len(self.turns)} turns, {len(self.pages)} pages"
        else:
            head = (f"{verb} {len(self.turns)} turns of {self.conversation}"
                    f" (pages {', '.join(f'p{p}' for p in self.pages) or '-'})")
        out = [head]
        if not self.whole:
            for n, turn in enumerate(self.turns):
                text = self.full_texts[n] if n < len(self.full_texts) else self.texts[n]
                out += listed(f"turn {turn}{self._label(n, turn)}", text)
        if self.dry_run and self.quoted:
            out.append("  note: an answer that quoted it goes whole, with whatever else it says (other facts "
                       "stay, from their own turns): no word of the text may be left in any file")
        return out + self.summary()

    def _label(self, n: int, turn: int) -> str:
        """A dry run says whose each turn is, and which are answers that only quote the text."""
        if not self.dry_run or n >= len(self.roles):
            return ""
        return f" ({self.roles[n]}, an answer that quoted it)" if turn in self.quoted else f" ({self.roles[n]})"

    def summary(self) -> list[str]:
        """What happened after the listing: counts, whether the files were rewritten, the exports note."""
        if self.dry_run:
            return []
        import shlex

        out = [f"  deleted {self.vectors} vectors, {self.traces} traces, {self.probes} probes; "
               f"{self.traces_scrubbed} traces scrubbed"
               + (f", {self.meta_scrubbed} meta values scrubbed" if self.meta_scrubbed else "")]
        if self.rewrite_pending:
            out.append("  warning: the store's files still hold the forgotten text: another process is reading "
                       "the store, so they could not be rewritten; once it has closed, run: localpager forget "
                       f"{shlex.quote(self.conversation)} --finish")
        elif self.rewritten and not self.turns:
            out.append("  finished the pending rewrite of the store's files: nothing forgotten is left in them")
        if self.note:
            out.append(f"  note: {self.note}")
        if self.database_note:
            out.append(f"  note: {self.database_note}")
        return out


def listed(head: str, text: str) -> list[str]:
    """A forgotten turn as a report lists it: whole, its line breaks kept (later lines indented), up to ``LISTED``
    characters, and then how many more it holds."""
    shown = text if len(text) <= LISTED else text[:LISTED].rstrip()
    first, *rest = shown.splitlines() or [""]
    out = [f"  {head}: {first}"] + [f"    {line}" for line in rest]
    if len(text) > LISTED:
        out.append(f"    … ({len(text) - len(shown):,} more characters not shown)")
    return out


def quotes(text: str, match: str | None) -> bool:
    """Whether ``match`` stands in ``text`` inside quotation marks (a fact answer's ``You told me: "…"``, each
    line of the overview of what is remembered): an answer that repeats what was said."""
    needle = (match or "").strip().casefold()
    spans = (m.group(1) or m.group(2) or "" for m in _QUOTED.finditer(text))
    return bool(needle) and any(needle in span.casefold() for span in spans)


_QUOTED = re.compile(r'"([^"\n]*)"|“([^”\n]*)”')  # a quotation within a line, straight or curly


@dataclass
class SearchHit:
    """A remembered turn matching a search, scored by the ranking recall uses (fused dense + BM25)."""

    turn: int
    page_id: int
    score: float
    text: str
    role: str
    speaker: str | None = None
    time: str | None = None
    evicted: bool = False
    dense: float = 0.0
    lexical: float = 0.0
    superseded_by: int | None = None
    label: str = ""  # "changed": a later turn corrected it (see ``superseded_by``)
    conversation: str | None = None  # its conversation, when several conversations are searched (``users.User``)

    def to_dict(self) -> dict:
        fields = asdict(self)
        if self.conversation is None:  # one conversation's search reads as it always did
            del fields["conversation"]
        return fields

    def line(self) -> str:
        when = f" [{self.time}]" if self.time else ""
        label = f" (changed: see turn {self.superseded_by})" if self.superseded_by is not None else ""
        who = self.speaker or self.role
        conv = f"{self.conversation}  " if self.conversation is not None else ""
        return f"{self.score:.3f}  {conv}p{self.page_id} turn {self.turn}{when} {who}: {self.text[:160]}{label}"


# -- choosing turns ---------------------------------------------------------------------------------
def select_turns(pager: Pager, turn: int | None = None, page: int | None = None,
                 match: str | None = None) -> list[int]:
    """The turns that exactly one of ``turn``, ``page`` or ``match`` names, not yet forgotten."""
    given = [name for name, v in (("turn", turn), ("page", page), ("match", match)) if v is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of turn, page or match (forget_conversation forgets a whole one)")
    turns = pager.turns
    if turn is not None:
        if not 0 <= turn < len(turns):
            raise ValueError(f"no turn {turn}: the conversation has turns 0-{len(turns) - 1}")
        chosen = [turn]
    elif page is not None:
        try:
            chosen = list(pager.page(page).turn_range)
        except KeyError:
            raise ValueError(f"no page p{page}: the conversation has {len(pager.pages)} pages") from None
    else:
        needle = match.strip().casefold()
        if not needle:
            raise ValueError("match needs some text")
        chosen = [t.index for t in turns if needle in t.text.casefold()]
    return [i for i in chosen if turns[i].text]


def current_text(page: Page, turns: Sequence[Turn]) -> str:
    """A page's text as it stands: without forgotten turns and without turns a later one corrected."""
    return "\n".join(turns[i].render() for i in page.turn_range
                     if i < len(turns) and turns[i].text and turns[i].superseded_by is None)


def rebuild_bookmark(pager: Pager, page: Page) -> None:
    """New keywords for a page whose text changed, from what is left (a page with no keywords yet, the
    open one, keeps none); its in-memory text becomes the remaining turns."""
    page.text = "\n".join(pager.turns[i].render() for i in page.turn_range if pager.turns[i].text)
    if not page.keywords:
        return
    text = current_text(page, pager.turns)
    if not text:
        pager.set_page_keywords(page, [], page.keywords_by)
        return
    full, page.text = page.text, text  # keywords from the current statements only
    try:
        pager.set_keywords_recent(page)
    finally:
        page.text = full


# -- forgetting -------------------------------------------------------------------------------------
@dataclass
class RecalledTurn:
    """A turn ``Conversation.recall`` hands over: where it is, who said it when, what it says, the dates its
    relative expressions mean ("yesterday" said on 8 May 2023: 7 May 2023), its score, and ``latest`` or
    ``changed later`` when it states something that changed."""

    page_id: int
    turn: int
    text: str
    role: str
    speaker: str | None
    time: str | None
    dates: list[str]
    score: float
    label: str = ""
    injected: bool = True  # what ``ask`` would inject; the others are the ranking's next best


@dataclass
class Recall:
    """What localpager remembers for a question, without its model: the standing facts that bear on it, the
    recall gate's verdict (is memory relevant to it?) and the turns a recall would inject, then the ranking's
    next best up to a limit. When the gate says memory is relevant but what the ranking found is below the
    relevance floor, nothing is remembered about it: ``relevant`` is false and no turn is ``injected``."""

    question: str
    relevant: bool
    probability: float
    turns: list[RecalledTurn]
    facts: list[dict] = field(default_factory=list)  # standing facts that bear on the question (id, turn, text, p)
    floor: dict | None = None  # the relevance floor's verdict on the best turn, when the gate said relevant
    conversation: str | None = None  # the turns are this other conversation of the user's (None: the one asked)

    def to_dict(self) -> dict:
        return {"question": self.question, "relevant": self.relevant, "probability": round(self.probability, 4),
                "facts": self.facts, "turns": [asdict(t) for t in self.turns], "floor": self.floor,
                "conversation": self.conversation}


@dataclass
class _Plan:
    report: ForgetReport
    pages: list[Page]
    drop_traces: list[int]
    rewrite_traces: dict[int, dict]
    drop_probes: list[int]
    meta: dict | None = None  # the conversation's meta with the text scrubbed (None: it held none)


FORGOTTEN = "[forgotten]"  # what a scrubbed value of a conversation's meta reads as


def scrub(value, needles: Sequence[str]) -> tuple[object, int]:
    """``value`` (JSON: objects, lists, strings, numbers) with every string that holds one of ``needles``
    (casefolded) replaced by ``FORGOTTEN`` and every object key that holds one dropped with its value; and
    how many were."""
    if isinstance(value, str):
        hit = any(n in value.casefold() for n in needles)
        return (FORGOTTEN, 1) if hit else (value, 0)
    if isinstance(value, list):
        parts = [scrub(v, needles) for v in value]
        return [v for v, _ in parts], sum(n for _, n in parts)
    if isinstance(value, dict):
        out, count = {}, 0
        for key, v in value.items():
            if any(n in str(key).casefold() for n in needles):
                count += 1
                continue
            out[key], n = scrub(v, needles)
            count += n
        return out, count
    return value, 0


def plan_forget(store: Store, conv_id: str, pager: Pager, turns: list[int], match: str | None) -> _Plan:
    """What forgetting ``turns`` changes, computed on copies: nothing in memory or on disk moves yet."""
    import copy

    gone = set(turns)
    texts = [pager.turns[i].text for i in turns]
    said = [pager.turns[i] for i in turns]
    report = ForgetReport(conv_id, turns=list(turns), texts=[t[:PREVIEW] for t in texts], full_texts=texts,
                          roles=[t.role for t in said],
                          quoted=[t.index for t in said if t.role == "assistant" and quotes(t.text, match)])
    touched = sorted({pager.page_of_turn(i).page_id for i in turns})
    report.pages = touched
    # new bookmarks on a copy of the pager's records
    shadow = copy.copy(pager)
    shadow.turns = [t if t.index not in gone else Turn(t.role, "", t.index, t.time, t.speaker) for t in pager.turns]
    shadow.pages = [copy.copy(p) for p in pager.pages]
    shadow._bookmark_tokens = {}
    pages = [shadow.page(pid) for pid in touched]
    old_marks = {pid: pager.bookmark(pager.page(pid)) for pid in touched}
    for page in pages:
        rebuild_bookmark(shadow, page)
    new_marks = {p.page_id: shadow.bookmark(p) for p in pages}
    # traces: gone when they repeat a forgotten turn, scrubbed when they list a changed bookmark
    needles = [t.casefold() for t in texts if t.strip()] + ([match.strip().casefold()] if match else [])
    drop, rewrite = [], {}
    for row, turn_idx, data in store.trace_rows(conv_id):
        cited = ({c.get("turn") for c in data.get("citations", []) if not c.get("conversation")}  # this one's turns
                 | set(data.get("injected_turns", [])))
        marks = data.get("bookmarks", [])
        fixed = [next((new_marks[p] for p, old in old_marks.items() if old == m), m) for m in marks]
        scrubbed = {**data, "bookmarks": fixed}
        dump = json.dumps(scrubbed, ensure_ascii=False).casefold()
        if {turn_idx, turn_idx + 1} & gone or cited & gone or any(n in dump for n in needles):
            drop.append(row)
        elif fixed != marks:
            rewrite[row] = scrubbed
    report.traces, report.traces_scrubbed = len(drop), len(rewrite)
    probes = []
    for idx, probe in store.probe_rows(conv_id):  # every field of it: question, answers, type, extra
        said = " ".join([probe.question, *probe.answers, probe.type or "",
                         json.dumps(probe.extra, ensure_ascii=False)]).casefold()
        if set(probe.evidence) & gone or any(n in said for n in needles):
            probes.append(idx)
    report.probes = len(probes)
    meta, report.meta_scrubbed = scrub(store.conversation_record(conv_id)["meta"], needles)
    return _Plan(report, pages, drop, rewrite, probes, meta if report.meta_scrubbed else None)


def forget_turns(held: Held, conv_id: str, pager: Pager, turns: list[int], match: str | None) -> ForgetReport:
    """Forget ``turns`` of a conversation the caller holds for a change: planned on what is stored now, the
    rows changed in one transaction, the store's files rewritten, and what is held beside them dropped."""
    plan = plan_forget(held.store, conv_id, pager, turns, match)
    plan.report.vectors, rewritten = held.store.forget_turns(
        conv_id, turns, plan.pages, drop_traces=plan.drop_traces, rewrite_traces=plan.rewrite_traces,
        drop_probes=plan.drop_probes, meta=plan.meta)
    held.after_erase()
    return _done(plan.report, rewritten, held.store)


def forget_conversation(held: Held, conv_id: str, dry_run: bool = False) -> ForgetReport:
    """Forget a whole conversation: every row of it, then the files rewritten (see ``Store.erase``)."""
    store = held.store
    with held.lock:
        if not store.has_conversation(conv_id):
            if not dry_run and store.erase_pending():  # forgotten before, its rewrite unfinished: finish it
                return finish_pending(held, ForgetReport(conv_id, whole=True))
            store.settings(conv_id)  # the store's own not-found error
        return forget_conversations(held, [conv_id], dry_run)[0]


def forget_conversations(held: Held, conv_ids: Sequence[str], dry_run: bool = False) -> list[ForgetReport]:
    """Forget whole conversations, each as ``forget_conversation`` forgets one (every row of it deleted under its
    conversation's lock, taken one at a time), with the store's files rewritten, and the indexes and caches beside
    them, once after the last: an import of thousands of conversations is forgotten with one rewrite, not one each.
    A conversation another process is writing to (``ConversationBusy``) stops it; those deleted before it are
    erased all the same. An unknown id is an error before anything is deleted."""
    store = held.store
    with held.lock:
        infos = {i.id: i for i in store.list_conversations()}
        wanted = list(dict.fromkeys(conv_ids))
        for conv_id in wanted:
            if conv_id not in infos:
                store.settings(conv_id)  # the store's own not-found error
        reports = [ForgetReport(conv_id, turns=list(range(infos[conv_id].turns)),
                                pages=[p.page_id for p in store.pages(conv_id)], dry_run=dry_run, whole=True,
                                traces=len(store.trace_rows(conv_id)), probes=infos[conv_id].probes)
                   for conv_id in wanted]
        if dry_run or not reports:
            return reports
        deleted = 0
        try:
            for report in reports:
                lock = conversation_lock(store, report.conversation, held.lock_timeout)
                try:
                    lock.acquire(held.lock_timeout)  # no other process is writing to it meanwhile
                except LockTimeout as exc:
                    raise ConversationBusy(str(exc)) from None
                try:
                    report.vectors = len(store.conversation_embeddings(report.conversation))
                    store.forget_conversation(report.conversation, erase=False)
                    deleted += 1
                    lock.remove()  # its lock file goes with it (a process waiting on it takes a new one)
                finally:
                    lock.release()
        finally:
            if deleted:
                rewritten = store.erase()
                held.after_erase()
        return [_done(report, rewritten, store) for report in reports]


def finish_pending(held: Held, report: ForgetReport) -> ForgetReport:
    """A forget that found nothing new: it finishes a rewrite an earlier one left pending, if any."""
    if held.store.erase_pending():
        report.rewritten = report.erased = held.finish_erase()
        report.rewrite_pending = not report.rewritten
    return report


def _done(report: ForgetReport, rewritten: bool, store: Store) -> ForgetReport:
    """A forget that deleted text: whether the files were rewritten, and what no rewrite can reach (earlier
    exports; on a database server, what it keeps outside its tables: ``store.erase_note``)."""
    report.rewritten = report.erased = rewritten
    report.rewrite_pending = not rewritten
    report.note = EXPORTS_NOTE
    report.database_note = store.erase_note
    return report


# -- corrections ------------------------------------------------------------------------------------
def supersede(store: Store, conv_id: str, pager: Pager, turn: int, by: int) -> None:
    """Mark ``turn`` as corrected by the later turn ``by`` (the caller holds the conversation for a change):
    recall shows ``by`` instead, search labels ``turn`` as changed, and ``turn``'s page gets a bookmark
    without it."""
    n = len(pager.turns)
    if not (0 <= turn < by < n):
        raise ValueError(f"a correction must come after the turn it corrects (turns 0-{n - 1}): {turn} -> {by}")
    if not pager.turns[turn].text or not pager.turns[by].text:
        raise ValueError("a forgotten turn cannot be corrected or correct another")
    marks = {turn: by}
    previous = pager.turns[turn].superseded_by
    if previous is not None and previous != by and previous < by:
        marks[previous] = by  # the earlier correction is outdated too
    for old, new in marks.items():
        pager.turns[old].superseded_by = new
    pages = {pager.page_of_turn(old).page_id: pager.page_of_turn(old) for old in marks}
    for page in pages.values():
        rebuild_bookmark(pager, page)
    store.set_superseded(conv_id, marks, list(pages.values()))


def check_correctable(pager: Pager, turn: int) -> Turn:
    """The turn a correction replaces: it must exist and not be forgotten."""
    turns = pager.turns
    if not 0 <= turn < len(turns):
        raise ValueError(f"no turn {turn}: the conversation has turns 0-{len(turns) - 1}")
    if not turns[turn].text:
        raise ValueError(f"turn {turn} was forgotten; nothing to correct")
    return turns[turn]


# -- search -----------------------------------------------------------------------------------------
def search(selector: RerankSelector, pager: Pager, query: str, limit: int = 10) -> list[SearchHit]:
    """The conversation's turns best matching ``query``, by the ranking a recall uses (the caller holds the
    model lock)."""
    if not query.strip():
        raise ValueError("search needs some words")
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if not pager.pages:
        return []
    out = []
    for h in selector.rank(query, pager)[:limit]:
        t = pager.turns[h.turn]
        out.append(SearchHit(turn=h.turn, page_id=h.page_id, score=round(h.score, 4), text=t.text, role=t.role,
                             speaker=t.speaker, time=t.time, evicted=pager.page(h.page_id).evicted,
                             dense=round(h.dense, 4), lexical=round(h.lexical, 4),
                             superseded_by=t.superseded_by, label="changed" if t.superseded_by is not None else ""))
    return out


# -- recall without the model -----------------------------------------------------------------------
def recall(selector: RerankSelector, pager: Pager, question: str, max_turns: int | None = None) -> Recall:
    """What a recall would inject for ``question`` (newest statements first, corrections applied) and, up to
    ``max_turns`` in all, the ranking's next best turns; with the gate's verdict (the caller holds the model
    lock). Loads the embedder only: neither the chat model nor its tokenizer (nothing is fitted into a prompt)."""
    if not question.strip():
        raise ValueError("recall needs a question")
    if max_turns is not None and max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    if not pager.pages:
        return Recall(question, False, 0.0, [])
    facts = [h.to_dict() for h in selector.facts_for(question)]
    verdict = selector.gate(question, pager)
    relevant = verdict.recall or bool(facts)
    injections, _ = selector.select(question, [], pager, None)
    floor = None
    if verdict.recall and injections and not facts:
        floor = selector.answerable(question, pager, injections)
        if not floor.answer:  # nothing about it is remembered: no turn to answer from
            relevant, injections = False, []
        floor = floor.to_dict()
    scores = {h.turn: h.score for h in selector.rank(question, pager)}
    turns = [_recalled(pager, t, scores.get(t, 0.0), inj.labels.get(t, ""), True)
             for inj in injections for t in inj.turns if pager.turns[t].text]  # a forgotten turn: never
    seen = {t.turn for t in turns}
    limit = max_turns if max_turns is not None else len(turns)
    for turn, score in scores.items():  # best first
        if len(turns) >= limit:
            break
        if turn not in seen and pager.turns[turn].text:
            turns.append(_recalled(pager, turn, score, "changed" if pager.turns[turn].superseded_by is not None
                                   else "", False))
            seen.add(turn)
    return Recall(question, relevant, verdict.probability, turns[:limit], facts, floor)


def _recalled(pager, index: int, score: float, label: str, injected: bool) -> RecalledTurn:
    t = pager.turns[index]
    return RecalledTurn(page_id=pager.page_of_turn(index).page_id, turn=index, text=t.text, role=t.role,
                        speaker=t.speaker, time=t.time, dates=[r.label for r in resolve(t.text, t.time)],
                        score=round(score, 4), label=label, injected=injected)

