"""Reranking recalled pages by embedding similarity before they are injected.

Small models recall too rarely and name the wrong page. The candidates are the pages the model named
plus the evicted pages most similar to the question; each scores its similarity, plus a bonus when
the model named it. The best page is injected, a second one only when it scores close to the first,
and of each page only the best-matching turns with their neighbours (an excerpt), since a tiny model
answers better, and faster, from less text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .index import Hit, PageIndex
from .pager import Pager
from .records import Page
from .runtime import Injection, fit_turns
from .trace import Candidate

SELECTORS = ("model", "rerank", "model+rerank")


@dataclass
class RerankSettings:
    selector: str = "model+rerank"  # model: the model's choice only; rerank: similarity only; or both
    signal: str = "turn"  # turn, bookmark or text: what of a page is compared with the question
    top_k: int = 3  # evicted pages added as candidates by similarity
    model_weight: float = 0.05  # bonus for a page the model named
    second_page_margin: float = 0.05  # a second page only if it scores within this of the first
    max_pages: int = 2
    # Page in although the model answered, when the best evicted turn is at least this similar; None:
    # never. SmolLM2-135M almost never asks for a recall itself: on 3 generated conversations (19 probes,
    # all needing a recall) it recalled 0 times without this trigger (e2e 0.05) and 18 with it at 0.25
    # (e2e 0.37). benchmarks/trigger_threshold.py: 0.25 fires for 94% of probes but also for 95% of
    # small-talk turns, which only costs one injected turn.
    trigger_threshold: float | None = 0.25
    # turns on each side of the best-matching turn; None: the whole page. Measured (3 generated
    # conversations, SmolLM2-135M): the best turn alone answered 0.26 of probes, with one neighbour
    # each side 0.16, in less time.
    excerpt: int | None = 0

    def __post_init__(self) -> None:
        if self.selector not in SELECTORS:
            raise ValueError(f"unknown selector {self.selector!r}; use one of {', '.join(SELECTORS)}")


class RerankSelector:
    """A PageSelector for one conversation, backed by the shared page index."""

    def __init__(self, index: PageIndex, conv_id: str, settings: RerankSettings | None = None):
        self.index = index
        self.conv_id = conv_id
        self.settings = settings or RerankSettings()
        self._rankings: dict[tuple, list[Hit]] = {}

    def _ranked(self, question: str, pager: Pager, pages: Sequence[Page], signal: str | None = None) -> list[Hit]:
        """Ranked once per question and page set: the trigger and the selection of one answer share it."""
        signal = signal or self.settings.signal
        key = (question, tuple(p.page_id for p in pages), tuple(tuple(p.keywords) for p in pages), signal)
        if key not in self._rankings:
            if len(self._rankings) >= 32:  # a selector kept across many questions stays small
                self._rankings.clear()
            self.index.update(self.conv_id, pages, pager.turns, pager.bookmark)
            self._rankings[key] = self.index.rank(self.conv_id, question, list(key[1]), signal)
        return self._rankings[key]

    def should_recall(self, question: str, pager: Pager) -> bool:
        threshold = self.settings.trigger_threshold
        if threshold is None or self.settings.selector == "model" or not pager.evicted:
            return False
        hits = self._ranked(question, pager, pager.evicted)
        return bool(hits) and hits[0].score >= threshold

    def select(self, question: str, named: Sequence[int], pager: Pager, room: int):
        s = self.settings
        evicted = pager.evicted
        hits = {h.page_id: h for h in self._ranked(question, pager, evicted)} if s.selector != "model" or named else {}
        pool: list[int] = list(named) if s.selector != "rerank" else []
        if s.selector != "model":
            pool += [pid for pid in list(hits)[: s.top_k] if pid not in pool]
        candidates = []
        for pid in pool:
            sim = hits[pid].score if pid in hits else 0.0
            is_named = pid in named
            bonus = s.model_weight if is_named and s.selector == "model+rerank" else 0.0
            score = sim + bonus if s.selector != "model" else 1.0 / (1 + list(named).index(pid))
            candidates.append(Candidate(page_id=pid, score=round(score, 4), similarity=round(sim, 4),
                                        named_by_model=is_named))
        candidates.sort(key=lambda c: -c.score)
        injections: list[Injection] = []
        for c in candidates:
            if len(injections) >= s.max_pages:
                c.reason = f"at most {s.max_pages} pages"
            elif injections and s.selector != "model" and c.score < candidates[0].score - s.second_page_margin:
                c.reason = f"scores {candidates[0].score - c.score:.3f} below the best"
            else:
                turns = self._excerpt(pager.page(c.page_id), hits.get(c.page_id), question, pager, room)
                if not turns:
                    c.reason = "no room left"
                    continue
                room -= sum(pager.turn_tokens(pager.turns[i]) for i in turns)
                injections.append(Injection(pager.page(c.page_id), turns))
                c.injected = True
                c.reason = "best match" if len(injections) == 1 else "close to the best"
        return injections, candidates

    def _excerpt(self, page: Page, hit: Hit | None, question: str, pager: Pager, room: int) -> list[int]:
        """The best-matching turn and ``excerpt`` neighbours each side (or the whole page), nearest to the
        best turn first as far as ``room`` allows, returned in conversation order."""
        n = self.settings.excerpt
        best = hit.turn if hit is not None else None
        if best is None:
            turn_hits = self.index.rank(self.conv_id, question, [page.page_id], "turn")
            best = turn_hits[0].turn if turn_hits else page.first_turn
        span = page.turn_range if n is None else range(max(page.first_turn, best - n), min(page.last_turn, best + n) + 1)
        return sorted(fit_turns(pager, sorted(span, key=lambda i: (abs(i - best), i)), room))
