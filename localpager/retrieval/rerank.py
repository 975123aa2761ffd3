"""Choosing what a recall injects: the conversation's turns ranked by the hybrid ranking (``ranking.py``).

Small models recall too rarely and name the wrong page. The candidates are the pages the model named
plus the best-ranked pages; each scores its best turn's fused (dense + BM25) score, plus a bonus when
the model named it. The best page is injected, a second one only when it scores close to the first,
and of each page only the best-matching turn (an excerpt), since a tiny model answers better, and
faster, from less text.

Recall searches every page but the question itself, resident ones included: a recall is answered in a
focused prompt that holds only what was injected, so a fact stated two turns ago must be findable too.
When a later turn says that what the best turn states has changed (a budget or a deadline), the
newest is injected instead, marked ``latest`` (with ``show_changed``, the older one follows it, marked
``changed later``).

This is the product's selector: the model's pages and the ranking's best, reranked; the ranking of turns; the recall
gate as its trigger. The lab's variants of each (``lab.selectors``: the model's pages alone or the ranking's
alone, pages compared by their bookmark or their whole text, the question-form trigger or none) override its
``should_recall``, ``_candidates``, ``_page_hits`` and ``_newest_wins``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Sequence

import numpy as np

from ..core.answer_types import asks_for_several
from ..core.answer_types import match as type_match
from ..core.claims import is_request
from ..core.facts import CORRECTION_CUE, StandingFact
from ..core.pager import Pager
from ..core.personal import asks_for_value
from ..core.records import Page, newest
from ..core.text import term_key
from ..runtime.choices import Fired
from ..runtime.prompts import CHANGED, LATEST
from ..runtime.selector import Injection, PageSelector, fit_turns
from ..runtime.trace import Candidate
from .answerable import (DEFAULT_ANSWER_MODEL, Answerability, answer_features, ranking_leads, speaker_gap,
                         speakers_named, unnamed)
from .answerable import decide as decide_answer
from .facts import DEFAULT_FACT_MODEL, FactHit, FactRanker
from .gate import (DEFAULT_MODEL, GateDecision, GateFeatures, GateModel, _names, decide, gate_features,
                   message_features)
from .index import Hit, PageIndex
from .personal_vectors import PersonalQuestions
from .user_recall import ForeignRecall, UserRecall
from .ranking import (
    HybridSettings,
    LexicalIndex,
    Ranking,
    TurnHit,
    best_per_page,
    embedding_scorer,
    page_owners,
    rank_turns,
)



@dataclass
class RerankSettings:
    """How the reranking selector picks what a recall injects, and when it pages in unasked."""

    top_k: int = 3  # pages added as candidates by the ranking
    model_weight: float = 0.05  # bonus for a page the model named
    second_page_margin: float = 0.05  # a second page only if its fused score is within this of the first
    # One page: on 36 generated probes, a second close page was injected for 32 of them and e2e fell from
    # 0.36 to 0.28 (the 135M model answers from the wrong turn); eval --pages 2 measures it.
    max_pages: int = 1
    # ... and this many when the question asks for several things ("What books has Melanie read?", "Which
    # cities have both visited?", ``answer_types.asks_for_several``); the second page still has to score
    # within ``second_page_margin`` of the first. Measured (eval --several-pages 1 / 2, budget 512 / 1024,
    # --no-oracle): LoCoMo 1-5 multi-hop page selection 0.49 -> 0.55, F1 0.07 either way; the 72 generated
    # tuning probes unchanged (e2e 0.50, selection 0.89: none asks for several things).
    pages_when_several: int = 2
    # turns on each side of the best-matching turn; None: the whole page. Measured (3 generated
    # conversations, SmolLM2-135M): the best turn alone answered 0.26 of probes, with one neighbour
    # each side 0.16, in less time.
    excerpt: int | None = 0
    # Another turn states the same thing as the chosen one when their cosine is at least this and it
    # ranks within ``same_slot_margin`` of it: the newest of them is shown first, marked latest. On the
    # generated set (10 conversations), 13 of 16 fact/update pairs have a cosine >= 0.45 and no fact
    # turn is that close to any other user turn (at most 0.41).
    same_slot_similarity: float = 0.45
    same_slot_margin: float = 0.15
    same_slot_rank: int = 3  # ... and is among the best this many turns
    # Also show the older statement, marked "changed later". Measured on the 72 generated probes: showing
    # only the newest answered 0.40 (16 update probes: latest value 0.44), both 0.36 (0.25).
    show_changed: bool = False
    hybrid: HybridSettings = field(default_factory=HybridSettings)
    gate: GateModel = field(default_factory=lambda: DEFAULT_MODEL)  # the recall gate's model: the trigger
    facts: GateModel = field(default_factory=lambda: DEFAULT_FACT_MODEL)  # which standing facts bear on a message
    fact_pairs: bool = True  # and the pair bank beside it (``retrieval.fact_pairs``): which fact such messages needed
    answerable: GateModel = field(default_factory=lambda: DEFAULT_ANSWER_MODEL)  # the relevance floor of a recall


class RerankSelector(PageSelector):
    """The selector (a ``PageSelector``) for one conversation, backed by the shared page index and its lexical
    index: it reranks the pages the model named with the ranking's best, and pages in unasked when the recall
    gate says a message asks about something said before."""

    # The trigger ``should_recall`` applies, as the trace names it when it fires. The gate, because "any message
    # in question form" (the rule before it) paged in every general question too ("How do I tie a tie?" answered
    # from an unrelated memory) and "only when the model asks" left small models recalling too rarely.
    trigger: str = Fired.GATE

    def __init__(self, index: PageIndex, conv_id: str, settings: RerankSettings | None = None,
                 lexical: LexicalIndex | None = None, facts: Sequence[StandingFact] = ()):
        """``facts``: the conversation's standing facts, scored against each message (``facts_for``)."""
        self.index = index
        self.conv_id = conv_id
        self.settings = settings or RerankSettings()
        self.lexical = lexical or LexicalIndex(conv_id)
        self.facts = FactRanker(facts, lambda texts: self.index.embedder.encode(texts), self.settings.facts,
                                use_pairs=self.settings.fact_pairs)
        self.personal = PersonalQuestions(lambda texts: self.index.embedder.encode(texts))
        self._rankings: dict[tuple, list[TurnHit]] = {}
        self._telling: dict[int, bool] = {}  # turn index -> ranking.tells, kept across questions
        self.last_gate: GateDecision | None = None
        self._corrections_of: tuple | None = None
        self.user_recall: UserRecall | None = None  # the user's other conversations (``Conversation._selector``)
        self._other_for: tuple[str, ForeignRecall | None] | None = None

    # -- ranking -------------------------------------------------------------------------------
    def _dense(self, pager: Pager):
        """Cosine of the question with turns: evicted turns from the FAISS index, the others embedded
        directly (the embedder caches by text, so each resident turn is embedded once). Its ``array``
        gives them as an array over the candidates, from the loaded index alone (what the ranking uses), a
        resident turn's too when it has a vector there (every turn of a user's other conversations has one,
        ``Conversation._embed_others``: ranking one embeds none of its turns again; it is that turn's
        vector, as a turn's text changes only by being forgotten, which drops it)."""
        direct = embedding_scorer(self.index.embedder, pager.turns)

        def score(question: str, turn_indices: list[int]) -> dict[int, float]:
            stored = {i: p.page_id for p in pager.evicted for i in p.turn_range}
            stored_pages = sorted({stored[i] for i in turn_indices if i in stored})
            scores = self.index.turn_scores(self.conv_id, question, stored_pages) if stored_pages else {}
            wanted = set(turn_indices)
            scores = {i: s for i, s in scores.items() if i in wanted}
            scores.update(direct(question, [i for i in turn_indices if i not in scores]))
            return scores

        def array(question: str, candidates: np.ndarray) -> np.ndarray:
            n = len(pager.turns)
            page_of, _ = page_owners(pager.evicted, n)
            stored_pages = np.unique(page_of[candidates])
            stored_pages = stored_pages[stored_pages >= 0]
            cosine = np.full(n, np.nan)
            if len(stored_pages):
                turns, sims = self.index.turn_cosines(self.conv_id, question, stored_pages.tolist())
                inside = turns < n
                cosine[turns[inside]] = sims[inside]
            out = cosine[candidates]
            missing = np.flatnonzero(np.isnan(out))
            if len(missing):  # resident turns: their vectors when embedded (a user's other conversations have all)
                have, sims = self.index.embedded_turn_cosines(self.conv_id, question, candidates[missing])
                out[missing[have]] = sims
                missing = np.flatnonzero(np.isnan(out))
            if len(missing):
                found = direct(question, candidates[missing].tolist())
                out[missing] = [found[i] for i in candidates[missing].tolist()]
            return out

        score.array = array
        return score

    def _ranked(self, question: str, pager: Pager, pages: Sequence[Page]) -> list[TurnHit]:
        """Turns of ``pages`` best first; ranked once per question and page set, so the trigger and the
        selection of one answer share the work."""
        # the pages' ids and where the last (the growing) one ends: what the ranking depends on (keywords not)
        key = (question, len(pager.turns), tuple(map(_PAGE_ID, pages)),
               (pages[-1].first_turn, pages[-1].last_turn) if pages else None)
        if key not in self._rankings:
            if len(self._rankings) >= 32:  # a selector kept across many questions stays small
                self._rankings.clear()
            self.index.update(self.conv_id, [p for p in pages if p.evicted], pager.turns, pager.bookmark)
            self._rankings[key] = rank_turns(question, pager.turns, pages, self._dense(pager), self.lexical,
                                             self.settings.hybrid)
        return self._rankings[key]

    def rank(self, question: str, pager: Pager, pages: Sequence[Page] | None = None) -> list[TurnHit]:
        """Turns of ``pages`` (default: every page) best first: what ``Conversation.search`` lists."""
        return self._ranked(question, pager, list(pager.pages) if pages is None else list(pages))

    @staticmethod
    def _searchable(pager: Pager, question: str) -> list[Page]:
        """Every page, without the question itself when it is the conversation's last turn."""
        pages = list(pager.pages)
        if pages and pager.turns and pager.turns[-1].text == question and pager.turns[-1].role == "user":
            last = pages[-1]
            if last.first_turn == last.last_turn:
                pages = pages[:-1]
            else:
                pages[-1] = Page(last.page_id, last.first_turn, last.last_turn - 1, evicted=last.evicted)
        return pages

    def _gate_features(self, question: str, hits: Sequence[TurnHit], pager: Pager) -> GateFeatures:
        """``gate.gate_features`` of the ranking; from its arrays and the turns' table when it has them (the
        same figures, but for the rounding of the cosines' mean and spread, summed in another order), so that
        no feature visits every turn in Python."""
        if not isinstance(hits, Ranking) or not len(hits):
            return gate_features(question, hits, pager.turns, self._telling)
        table = self.lexical.table(pager.turns)
        features = message_features(question)
        names = _names(question)
        if names:
            features.speaker = float(any(n in table.speakers or n.split()[0] in table.speakers for n in names))
            chosen = np.zeros(len(pager.turns), dtype=bool)
            chosen[hits.turns] = True
            features.known_name = float(any(chosen[table.names[k]].any() for k in {term_key(n) for n in names}
                                            if k in table.names))
        dense = hits.dense  # in turn order: the sums may differ from the ranked order's in the last bit
        mean = float(dense.sum() / len(dense))
        std = math.sqrt(float(((dense - mean) ** 2).sum()) / len(dense))
        best = float(dense.max())
        features.dense_best = best
        features.dense_z = (best - mean) / std if std > 0 else 0.0
        telling = table.array("tells")[hits.turns]
        features.dense_tells = float(dense[telling].max()) if telling.any() else 0.0
        features.lexical_best = float(hits.lexical.max())
        top = hits.best()
        features.best_tells = float(telling[top])
        features.best_type = type_match(question, pager.turns[int(hits.turns[top])].text)
        return features

    def gate(self, question: str, pager: Pager) -> GateDecision:
        """The recall gate's verdict on ``question`` over every page, evicted or not (an app asking what
        localpager remembers has its own context, not localpager's prompt)."""
        hits = self._ranked(question, pager, self._searchable(pager, question))
        return decide(self._gate_features(question, hits, pager), self.settings.gate)

    def should_recall(self, question: str, pager: Pager) -> bool:
        """Whether ``question`` pages in without the model asking: the recall gate's verdict, kept in
        ``last_gate`` for the trace. Asked with no page evicted too: a question about something said before is
        answered from the turn it needs in a focused prompt, or "not remembered" below the relevance floor, never
        by a small model reading the whole chat (where it invents a value nobody said)."""
        self.last_gate = None
        recall = False
        if any(t.text for t in pager.turns[:-1]):
            hits = self._ranked(question, pager, self._searchable(pager, question))
            self.last_gate = decide(self._gate_features(question, hits, pager), self.settings.gate)
            recall = self.last_gate.recall
        if not recall:
            recall = self._gate_on_others(question)
        return recall and not self._needs_nothing(question, pager)

    def _needs_nothing(self, question: str, pager: Pager) -> bool:
        """Whether the pair bank overrules the gate's verdict to recall: in a chat (no transcript's speakers: the
        bank knows chat users' messages), for a message that refers to nothing said before (no ``memory_cue``:
        "Which book did I say I'm reading?"), when messages like it needed no fact (``FactRanker.needs_nothing``).
        The overruled verdict is kept in ``last_gate`` with the bank's figure."""
        gate = self.last_gate
        if gate is None or gate.features.get("memory_cue") or self.lexical.table(pager.turns).speakers:
            return False
        needed = self.facts.needs_nothing(question)
        if needed is None:
            return False
        self.last_gate = replace(gate, recall=False, needed=needed)
        return True

    def _gate_on_others(self, question: str) -> bool:
        """The gate asked in the user's other conversation that matches ``question`` best (a new chat has no turns
        of its own to ask about): its own gate, over its own ranking, as if the question were asked there."""
        found = self._other(question)
        if found is None:
            return False
        verdict = found.selector.gate(question, found.pager)
        if verdict.recall or self.last_gate is None:
            self.last_gate = verdict
        return verdict.recall

    def _other(self, question: str) -> ForeignRecall | None:
        """``user_recall.conversation(question)``, opened once per question (the gate and the recall share it)."""
        if self.user_recall is None:
            return None
        if self._other_for is None or self._other_for[0] != question:
            self._other_for = (question, self.user_recall.conversation(question))
        return self._other_for[1]

    def facts_for(self, question: str) -> list[FactHit]:
        """The standing facts that bear on ``question``, best first (``retrieval.facts``)."""
        return self.facts.relevant(question)

    def foreign(self, question: str, pager: Pager) -> ForeignRecall | None:
        """The user's other conversation to recall from, when its best turn is closer to ``question`` (by cosine)
        than this conversation's best turn (``retrieval.user_recall``); None otherwise."""
        found = self._other(question)
        if found is None:
            return None
        pages = self._searchable(pager, question)
        ranked = self._ranked(question, pager, pages) if pages else []
        own = float(ranked[0].dense) if len(ranked) else -1.0
        return found if found.dense > own else None

    def asks_about_self(self, question: str) -> bool:
        """The question asks about the speaker's own life: read from its meaning and its frame
        (``personal_vectors``), by the frame alone (``core.personal``) under an embedder it was not fitted with."""
        return self.personal.asks_about_self(question)

    def asks_for_value(self, question: str) -> bool:
        """``core.personal``'s learned reading: the question asks for something told, not for help."""
        return asks_for_value(question)

    def never_told(self, question: str) -> Answerability | None:
        """"Not remembered" before any recall, when ``question`` asks for something told (``asks_for_value``) and
        the pair bank says it needs a fact that none of the standing facts meets (``FactRanker.never_told``)."""
        found = self.facts.never_told(question) if asks_for_value(question) else None
        if found is None:
            return None
        cut = self.facts.pairs().unmet
        return Answerability(False, found["needed"], cut["needed"], {"never_told": 1.0, **found})

    def speakers_named(self, question: str, pager: Pager) -> list[str]:
        """``retrieval.answerable``'s reading of the names a question gives (capitalised mid-sentence) against who
        speaks in the conversation (the ranking's table of the turns keeps them as turns arrive)."""
        if not _names(question):  # most of a chat's questions: no table needed
            return []
        return speakers_named(question, sorted(self.lexical.table(pager.turns).speakers))

    def is_task(self, question: str) -> bool:
        """A task: the recall gate's reading of one ("help me write …", "can you plan …"), or a request in any
        words (``claims.is_request``: no question, and no claim by the claim model, "Put together a meal plan for
        my week.", or a request by its parse, "Describe the water cycle for a ten-year-old."), not only the
        lexicon's; but not a request for something the user told ("Tell me my rent ceiling.": ``asks_about_self``
        and ``asks_for_value``), which asks as a question does."""
        return bool(message_features(question).task) or (
            is_request(question) and not (self.asks_about_self(question) and asks_for_value(question)))

    def answerable(self, question: str, pager: Pager, injections: Sequence[Injection]) -> Answerability:
        """Whether what a recall found answers ``question`` at all (``retrieval.answerable``), judged on the
        ranking's best turn (what the question matched; a correction injected in its place answers it as well as
        the turn it corrects): below the floor, the answer is that nothing about it is remembered."""
        ranked = self._ranked(question, pager, self._searchable(pager, question))
        hit = ranked[0] if len(ranked) else None
        turn = pager.turns[hit.turn] if hit is not None else pager.turns[injections[0].turns[0]]
        leads = (ranking_leads(hit.score, hit.dense, ranked.scores, ranked.dense)
                 if hit is not None and isinstance(ranked, Ranking) else None)
        return self._floor(question, pager, turn, hit.dense if hit else 0.0, hit.lexical if hit else 0.0, leads)

    def _floor(self, question: str, pager: Pager, turn, dense: float, lexical: float,
               leads: tuple[float, float] | None = None) -> Answerability:
        table = self.lexical.table(pager.turns)  # who speaks: kept as turns arrive, no walk over them
        speakers = sorted(table.speakers)
        gate = self.last_gate.probability if self.last_gate is not None else self.gate(question, pager).probability
        best = self.facts.best(question)  # below its threshold (a fact above it would have answered), or none
        named = speakers_named(question, speakers)
        gap = 0.0
        if len(named) == 1:  # who said what the question asks about, the names left out (``speaker_gap``)
            asked = unnamed(question, speakers)
            ranked = self._ranked(asked, pager, self._searchable(pager, question))
            if isinstance(ranked, Ranking) and len(ranked):
                gap = speaker_gap(asked, named[0], pager.turns, ranked.turns, ranked.dense,
                                  table.array("speaker")[ranked.turns])
        features = answer_features(question, turn, dense, lexical, speakers, gate,
                                   best.probability if best is not None else 0.0, gap, self.facts.need_of(question),
                                   leads)
        return replace(decide_answer(features, self.settings.answerable), turn=turn.index)

    # -- selection -----------------------------------------------------------------------------
    def _page_hits(self, question: str, pager: Pager, named: Sequence[int] = ()) -> dict[int, TurnHit | Hit]:
        """Each candidate page's best hit, best page first: of the ranking of turns, the best ``top_k`` pages and
        the pages in ``named`` (all that ``select`` reads)."""
        ranked = self._ranked(question, pager, self._searchable(pager, question))
        if isinstance(ranked, Ranking):
            return {h.page_id: h for h in ranked.best_pages(self.settings.top_k, named)}
        return {h.page_id: h for h in best_per_page(ranked)}

    def _candidates(self, question: str, named: Sequence[int], pager: Pager) -> tuple[dict, list[Candidate]]:
        """The candidate pages and their hits: the pages the model named and the ranking's best ``top_k``, each
        scoring its best turn's fused score, plus ``model_weight`` when the model named it."""
        hits = self._page_hits(question, pager, named)
        pool = list(named)
        pool += [pid for pid in list(hits)[: self.settings.top_k] if pid not in pool]
        bonus = self.settings.model_weight
        return hits, [candidate(pid, hits, named, score_of(hits, pid) + (bonus if pid in named else 0.0))
                      for pid in pool]

    def _below_best(self, c: Candidate, best: Candidate) -> bool:
        """Whether ``c`` scores too far below the best to be injected beside it (``second_page_margin``)."""
        return c.score < best.score - self.settings.second_page_margin

    def select(self, question: str, named: Sequence[int], pager: Pager, room: int | None):
        s = self.settings
        hits, candidates = self._candidates(question, named, pager)
        candidates.sort(key=lambda c: -c.score)
        injections: list[Injection] = []
        most = max(s.max_pages, s.pages_when_several) if asks_for_several(question) else s.max_pages
        for c in candidates:
            if len(injections) >= most:
                c.reason = f"at most {most} pages"
            elif injections and self._below_best(c, candidates[0]):
                c.reason = f"scores {candidates[0].score - c.score:.3f} below the best"
            else:
                turns = self._excerpt(pager.page(c.page_id), hits.get(c.page_id), question, pager, room)
                if not turns:
                    c.reason = "no room left"
                    continue
                room = _less(room, pager, turns)
                injections.append(Injection(pager.page(c.page_id), turns))
                c.injected = True
                c.reason = "best match" if len(injections) == 1 else "close to the best"
        if injections:  # a correction the user made outranks the change-cue rule
            injections, corrected = self._corrected(pager, injections, candidates, room)
            if not corrected:
                injections = self._newest_wins(question, pager, injections, candidates, room)
        return injections, candidates

    def _newest_wins(self, question: str, pager: Pager, injections: list[Injection], candidates: list[Candidate],
                     room: int | None) -> list[Injection]:
        """When only the best turn is injected (``excerpt`` 0): a later turn restating it goes first
        (``_newest_first``), and a correction of that one is shown instead (``_corrected``)."""
        if self.settings.excerpt != 0:
            return injections
        injections = self._newest_first(question, pager, injections, candidates, room)
        injections, _ = self._corrected(pager, injections, candidates, room)
        return injections

    def _corrections(self, turns) -> set[int]:
        """The turns that correct another (``superseded_by`` of some turn): read once per question and
        conversation length (a selector serves one question)."""
        key = (id(turns), len(turns))
        if self._corrections_of is None or self._corrections_of[0] != key:
            self._corrections_of = (key, {t.superseded_by for t in turns if t.superseded_by is not None})
        return self._corrections_of[1]

    def _corrected(self, pager: Pager, injections: list[Injection], candidates: list[Candidate],
                   room: int | None) -> tuple[list[Injection], bool]:
        """A turn the user corrected (``Conversation.correct``) is never shown alone: its newest correction
        is shown first, marked ``latest``, and the corrected turn is dropped (with ``show_changed``, kept
        after it, marked ``changed later``); ``candidates`` say so. True when anything was corrected."""
        turns = pager.turns
        old = [t for inj in injections for t in inj.turns if turns[t].superseded_by is not None]
        if not old:
            corrections = self._corrections(turns)
            for inj in injections:  # a correction shown for itself still says it is the latest
                inj.labels.update({t: LATEST for t in inj.turns if t in corrections})
            return injections, False
        replaced = {t: newest(turns, t) for t in old}
        shown = {t for inj in injections for t in inj.turns}
        firsts: list[Injection] = []
        for t in old:
            n = replaced[t]
            if n in shown or any(n in f.turns for f in firsts) or not fit_turns(pager, [n], room):
                continue
            room = _less(room, pager, [n])
            firsts.append(Injection(pager.page_of_turn(n), [n], {n: LATEST}))
        visible = shown | {f.turns[0] for f in firsts}
        rest = []
        for inj in injections:
            labels, kept = dict(inj.labels), []
            for t in inj.turns:
                if t not in replaced:
                    if t in replaced.values():
                        labels[t] = LATEST
                    kept.append(t)
                elif self.settings.show_changed and replaced[t] in visible:
                    labels[t] = CHANGED
                    kept.append(t)
            if kept:
                rest.append(Injection(inj.page, kept, labels))
        result = firsts + rest
        on = {i.page.page_id for i in result}
        for c in candidates:
            if c.injected and c.page_id not in on:
                c.injected = False
                c.reason = "corrected later (" + ", ".join(f"turn {t} by turn {n}" for t, n in replaced.items()) + ")"
        for f in firsts:
            pid, n = f.page.page_id, f.turns[0]
            why = f"states it newest (turn {n} corrects turn {min(t for t in old if replaced[t] == n)})"
            known = next((c for c in candidates if c.page_id == pid), None)
            if known is None:
                candidates.insert(0, Candidate(page_id=pid, score=0.0, injected=True, reason=why))
            else:
                known.injected, known.reason = True, why
        return result, True

    def _excerpt(self, page: Page, hit, question: str, pager: Pager, room: int | None) -> list[int]:
        """The best-matching turn and ``excerpt`` neighbours each side (or the whole page), nearest to the
        best turn first as far as ``room`` allows, returned in conversation order."""
        n = self.settings.excerpt
        best = hit.turn if hit is not None else None
        if best is None:
            in_page = self._ranked(question, pager, [page])
            best = in_page[0].turn if in_page else page.first_turn
        span = page.turn_range if n is None else range(max(page.first_turn, best - n), min(page.last_turn, best + n) + 1)
        return sorted(fit_turns(pager, sorted(span, key=lambda i: (abs(i - best), i)), room))

    def _newest_first(self, question: str, pager: Pager, injections: list[Injection], candidates: list[Candidate],
                      room: int | None) -> list[Injection]:
        """Newest wins: if a later turn states the same thing as the best injected turn, show it first
        (``latest``) and the injected one after it (``changed later``), or instead of it (``show_changed``
        off); ``candidates`` are updated to say so."""
        s = self.settings
        best = injections[0].turns[0]
        ranked = self._ranked(question, pager, self._searchable(pager, question))
        if isinstance(ranked, Ranking):
            place = ranked.rank_of(best)
            score = ranked[place].score if place is not None else None
        else:
            score = next((h.score for h in ranked if h.turn == best), None)
        if score is None:
            return injections
        role = pager.turns[best].role
        later = [h.turn for h in ranked[: s.same_slot_rank] if h.turn > best and h.score >= score - s.same_slot_margin
                 and pager.turns[h.turn].role == role and CORRECTION_CUE.search(pager.turns[h.turn].text)]
        if not later:
            return injections
        vectors = self.index.embedder.encode([pager.turns[best].text] + [pager.turns[i].text for i in later])
        same = [i for i, sim in zip(later, (vectors[1:] @ vectors[0]).tolist()) if sim >= s.same_slot_similarity]
        if not same:
            return injections
        newest = max(same)
        if not fit_turns(pager, [newest], room):
            return injections
        first = Injection(pager.page_of_turn(newest), [newest], {newest: LATEST})
        if s.show_changed:
            rest = [Injection(i.page, i.turns, {**i.labels, best: CHANGED} if best in i.turns else dict(i.labels))
                    for i in injections]
        else:
            rest = [i for i in (Injection(i.page, [t for t in i.turns if t != best], dict(i.labels))
                                for i in injections) if i.turns]
        result = [first, *rest]
        shown = {i.page.page_id for i in result}
        newest_page = first.page.page_id
        for c in candidates:
            if c.page_id == newest_page:
                c.injected, c.reason = True, f"states it newest (turn {newest}, after turn {best})"
            elif c.injected and c.page_id not in shown:
                c.injected, c.reason = False, f"changed later (turn {best}, restated in turn {newest})"
        if not any(c.page_id == newest_page for c in candidates):
            candidates.insert(0, Candidate(page_id=newest_page, score=round(score, 4), injected=True,
                                           reason=f"states it newest (turn {newest}, after turn {best})"))
        return result


_PAGE_ID = attrgetter("page_id")


def score_of(hits: dict, page_id: int) -> float:
    """The score of a page's best hit, 0 for a page without one."""
    return hits[page_id].score if page_id in hits else 0.0


def candidate(page_id: int, hits: dict, named: Sequence[int], score: float) -> Candidate:
    """A candidate page for the trace: its score, its best hit's cosine (or its score), whether the model named it."""
    return Candidate(page_id=page_id, score=round(score, 4),
                     similarity=round(getattr(hits.get(page_id), "dense", score_of(hits, page_id)), 4),
                     named_by_model=page_id in named)


def _less(room: int | None, pager: Pager, turns: Sequence[int]) -> int | None:
    """``room`` less what ``turns`` take (None stays None: nothing is counted)."""
    return None if room is None else room - sum(pager.turn_tokens(pager.turns[i]) for i in turns)

