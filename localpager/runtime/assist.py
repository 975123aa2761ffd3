"""Model-assisted paging on the local model: keywords, eviction advice and bookmark-worthiness.

Each is one constrained generation (``grammar.py``: GBNF on llama.cpp, GBNF or a JSON schema on a model
server), so a small model can break neither the output format nor the rules: keywords are chosen from the
page's own candidate terms (``keywords.candidate_terms``), so none is invented; an eviction names only
candidate pages; a verdict is ``yes`` or ``no``.

The assistant runs on a backend of its own (a second llama.cpp context on the same model file), so its
calls never replace the chat's KV cache; and it runs after an answer or after ingest (``maintain``),
never before an answer.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from ..backends.base import ChatBackend, Message
from ..backends.constraints import Constraint
from ..core.choices import MODEL_STRATEGIES
from ..core.keywords import (
    DEFAULT_KEYWORDS_PER_PAGE,
    candidate_terms,
    extract_keywords,
    keyword_information,
)
from ..core.pager import Pager
from ..core.records import Page
from ..core.text import is_small_talk, term_key
from .grammar import WORTH, keyword_batch, keyword_list, page_list

# auto: keep the heuristic keywords (plus one from the model) when they already tell pages apart this well
# (keywords.keyword_information), else let the model choose them all. benchmarks/keyword_information.py:
# generated conversations score 0.73-0.94, LoCoMo's 0.13-0.44 (its turns share everyday words). With
# SmolLM2-135M llm-batch bookmarks found the evidence more often than hybrid on both sets (README,
# "Keywords"), so the threshold sits above every conversation measured: hybrid only for near-unique keywords.
AUTO_THRESHOLD = 0.95

CONTEXTUAL_PROMPT = (
    "You index a long conversation. Each page of it gets a few keywords, so that it can be found later. "
    "Choose keywords that tell this page apart from the other pages: names, numbers, dates, specific things."
)
BATCH_PROMPT = (
    "You index a long conversation. Each page of it gets a few keywords, so that it can be found later. "
    "For every page choose its most specific words: names, numbers, dates, specific things."
)
EVICT_PROMPT = (
    "You manage the memory of a conversation. Pages that are not needed to reply to the new message can "
    "leave the prompt; they stay stored and can be read again later."
)
WORTH_PROMPT = (
    "You decide what a conversation should remember long-term: preferences, decisions, plans, facts about "
    "people, numbers, dates, things that may change. Small talk and general chat are not worth remembering."
)


@dataclass
class AssistStats:
    """What the assistant's calls cost, per kind of work."""

    calls: int = 0
    pages: int = 0
    ms: float = 0.0
    unparsed: int = 0  # pages whose output named no candidate (kept their heuristic keywords); should stay 0

    @property
    def ms_per_page(self) -> float | None:
        return round(self.ms / self.pages, 1) if self.pages else None


_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_keywords(text: str, candidates: Sequence[str], k: int) -> list[str]:
    """The candidates named in ``text``, in order, without repeats, at most ``k``."""
    allowed = set(candidates)
    out: list[str] = []
    for raw in _STRING.findall(text):
        try:
            term = json.loads(f'"{raw}"')
        except json.JSONDecodeError:
            continue
        if term in allowed and term not in out:
            out.append(term)
    return out[:k]


def fill_keywords(chosen: Sequence[str], candidates: Sequence[str], n: int) -> list[str]:
    """The model's choices first, then, where it repeated itself, the best remaining candidates, up to ``n``;
    nothing when it chose nothing (the caller counts that as unparsed)."""
    if not chosen:
        return []
    out, keys = list(dict.fromkeys(chosen))[:n], {term_key(c) for c in chosen}
    for c in candidates:
        if len(out) >= n:
            break
        if term_key(c) not in keys:
            out.append(c)
            keys.add(term_key(c))
    return out


def parse_batch(text: str, pages: Sequence[tuple[int, Sequence[str]]], k: int) -> dict[int, list[str]]:
    """Page id -> the keywords the model chose for it (pages it did not reach are left out)."""
    out: dict[int, list[str]] = {}
    members = re.split(r'"(\d+)":\s*', text)
    cands = dict(pages)
    for pid, body in zip(members[1::2], members[2::2]):
        if int(pid) in cands:
            kws = parse_keywords(body, cands[int(pid)], k)
            if kws:
                out[int(pid)] = kws
    return out


class Assistant:
    """The local model's side work for the pager, on a backend that is not the chat's."""

    def __init__(self, backend: ChatBackend, *, candidates: int = 24, page_tokens: int = 320,
                 auto_threshold: float = AUTO_THRESHOLD):
        self.backend = backend
        self.candidates = candidates  # terms offered per page
        self.page_tokens = page_tokens  # of a page's text shown per call
        self.auto_threshold = auto_threshold
        self.stats: dict[str, AssistStats] = defaultdict(AssistStats)
        self.auto_choices: list[tuple[float, str]] = []

    # -- plumbing ---------------------------------------------------------------------------------
    @contextmanager
    def _measure(self, kind: str, pages: int) -> Iterator[None]:
        """Count ``pages`` and the time of the block under ``kind``."""
        start = time.perf_counter()
        yield
        self.stats[kind].pages += pages
        self.stats[kind].ms += (time.perf_counter() - start) * 1000

    def _generate(self, kind: str, system: str, user: str, constraint: Constraint, max_tokens: int) -> str:
        prompt = self.backend.render([Message("system", system), Message("user", user)])
        gen = self.backend.generate(prompt, max_tokens=max_tokens, constraint=constraint)
        self.stats[kind].calls += 1
        return gen.text

    def _clip(self, text: str, tokens: int) -> str:
        """``text`` cut to about ``tokens`` model tokens, at a character boundary."""
        n = self.backend.count_tokens(text)
        while n > tokens:
            text = text[: max(1, int(len(text) * tokens / n * 0.95))]
            n = self.backend.count_tokens(text)
        return text

    def _max_tokens(self, options: Sequence[str], k: int) -> int:
        """Enough tokens for the longest output the constraint allows with ``k`` of ``options``."""
        lengths = sorted(self.backend.count_tokens(json.dumps(o, ensure_ascii=False)) for o in options)
        return sum(lengths[-k:]) + 3 * k + 4

    # -- keywords ---------------------------------------------------------------------------------
    def keywords(self, page_texts: Sequence[str], targets: Sequence[int], strategy: str,
                 k: int = DEFAULT_KEYWORDS_PER_PAGE, ids: Sequence[int] | None = None) -> dict[int, list[str]]:
        """Keywords for the pages at positions ``targets`` of ``page_texts`` (a conversation's pages, or a
        window of them; the others are context), by a model strategy. ``ids`` label the pages in prompts
        (default 1..n). Every target gets 1..k keywords, all taken from its own text."""
        if strategy not in MODEL_STRATEGIES:
            raise ValueError(f"{strategy!r} is not a model strategy; use one of {', '.join(MODEL_STRATEGIES)}")
        page_texts, targets = list(page_texts), list(targets)
        ids = list(ids) if ids is not None else list(range(1, len(page_texts) + 1))
        if not targets:
            return {}
        kind = f"keywords:{strategy}"
        with self._measure(kind, len(targets)):
            if strategy == "auto":
                strategy = self.choose(page_texts, k)
            run: Callable = {"llm-contextual": self._contextual, "llm-batch": self._batch,
                             "hybrid": self._hybrid}[strategy]
            out = run(kind, page_texts, targets, k, ids)
            heuristic = extract_keywords(page_texts, "heuristic", k)
            for t in targets:  # a page with no candidate terms at all keeps what the heuristic found
                out[t] = out.get(t) or heuristic[t] or ["…"]
        return out

    def choose(self, page_texts: Sequence[str], k: int) -> str:
        """``auto``: hybrid when the heuristic keywords already tell the pages apart, else llm-batch."""
        info = keyword_information(page_texts, extract_keywords(page_texts, "heuristic", k))
        choice = "hybrid" if info >= self.auto_threshold else "llm-batch"
        self.auto_choices.append((round(info, 3), choice))
        return choice

    def _contextual(self, kind, page_texts, targets, k, ids) -> dict[int, list[str]]:
        """One call per page: its text, a line per neighbouring page, and its candidate terms."""
        cands = candidate_terms(page_texts, self.candidates)
        lines = extract_keywords(page_texts, "heuristic", k)
        out = {}
        for t in targets:
            if not cands[t]:
                continue
            near = sorted((i for i in range(len(page_texts)) if i != t), key=lambda i: (abs(i - t), i))[:8]
            others = "\n".join(f"p{ids[i]}: {', '.join(lines[i])}" for i in sorted(near)) or "(none)"
            user = (f"Other pages:\n{others}\n\nThis page (p{ids[t]}):\n{self._clip(page_texts[t], self.page_tokens)}"
                    f"\n\nCandidate keywords: {', '.join(cands[t])}\n\nReply with a JSON list of 1 to {k} of the "
                    f"candidate keywords that best tell p{ids[t]} apart from the other pages.")
            text = self._generate(kind, CONTEXTUAL_PROMPT, user, keyword_list(cands[t], k),
                                  self._max_tokens(cands[t], k))
            out[t] = fill_keywords(parse_keywords(text, cands[t], k), cands[t], k)
            self.stats[kind].unparsed += not out[t]
        return out

    def _distinct_candidates(self, page_texts: Sequence[str], limit: int) -> list[list[str]]:
        """Each page's candidates that no other page contains (all of them when fewer than two are), so
        that keywords chosen from them cannot overlap across pages."""
        cands = candidate_terms(page_texts, 4 * limit)
        keys = [{term_key(c) for c in page} for page in cands]
        seen: dict[str, int] = defaultdict(int)
        for page in keys:
            for key in page:
                seen[key] += 1
        out = []
        for page in cands:
            own = [c for c in page if seen[term_key(c)] == 1]
            out.append((own if len(own) >= 2 else page)[:limit])
        return out

    def _batched(self, kind, targets, ids, cands, k: int, instruction: str) -> dict[int, list[str]]:
        """One call per chunk of target pages (as many as fit the context), output as a JSON object."""
        out: dict[int, list[str]] = {}
        todo = [t for t in targets if cands[t]]
        room = self.backend.n_ctx - 200
        while todo:
            chunk: list[int] = []
            used = 0
            for t in todo:
                line = f"p{ids[t]}: {', '.join(cands[t])}"
                cost = self.backend.count_tokens(line) + 2 + self._max_tokens(cands[t], k) + 4
                if chunk and used + cost > room:
                    break
                chunk.append(t)
                used += cost
            todo = todo[len(chunk):]
            listing = "\n".join(f"p{ids[t]}: {', '.join(cands[t])}" for t in chunk)
            pages = [(ids[t], cands[t]) for t in chunk]
            user = f"Pages and their words:\n{listing}\n\n{instruction}"
            budget = sum(self._max_tokens(cands[t], k) + 6 for t in chunk) + 4
            text = self._generate(kind, BATCH_PROMPT, user, keyword_batch(pages, k), budget)
            by_id = parse_batch(text, pages, k)
            for t in chunk:
                out[t] = fill_keywords(by_id.get(ids[t], []), cands[t], k)
                self.stats[kind].unparsed += not out[t]
        return out

    def _batch(self, kind, page_texts, targets, k, ids) -> dict[int, list[str]]:
        """One call for all target pages; each chooses from the terms no other page has."""
        cands = self._distinct_candidates(page_texts, 12)
        return self._batched(kind, targets, ids, cands, k,
                             f"Reply with a JSON object giving every page 1 to {k} of its own words, the ones "
                             "that best tell it apart from the other pages.")

    def _hybrid(self, kind, page_texts, targets, k, ids) -> dict[int, list[str]]:
        """Heuristic keywords plus one distinguishing keyword per page, from one batched call."""
        base = extract_keywords(page_texts, "heuristic", max(1, k - 1)) if k > 1 else [[] for _ in page_texts]
        distinct = self._distinct_candidates(page_texts, 12)
        cands = []
        for i, page in enumerate(distinct):
            taken = {term_key(b) for b in base[i]}
            cands.append([c for c in page if term_key(c) not in taken][:12])
        extra = self._batched(kind, targets, ids, cands, 1,
                              "Reply with a JSON object giving every page the one word of its own that best "
                              "tells it apart from the other pages.")
        return {t: (base[t] + extra.get(t, []))[:k] for t in targets}

    # -- eviction and worth -----------------------------------------------------------------------
    def advise_eviction(self, candidates: Sequence[tuple[Page, str]], new_message: str) -> list[int]:
        """The ids of candidate pages the model says are not needed to reply to ``new_message``."""
        if not candidates:
            return []
        with self._measure("evict", len(candidates)):
            listing = "\n".join(f"p{p.page_id}: {desc}" for p, desc in candidates)
            user = (f"Pages in the prompt:\n{listing}\n\nNew message: {self._clip(new_message, 200)}\n\n"
                    "Which pages are not needed to reply to the new message? Reply with a JSON list of their numbers.")
            ids = [p.page_id for p, _ in candidates]
            text = self._generate("evict", EVICT_PROMPT, user, page_list(ids), 4 * len(ids) + 4)
        named = [int(i) for i in re.findall(r"\d+", text) if int(i) in ids]
        return list(dict.fromkeys(named))

    def worth(self, page_text: str) -> bool:
        """Whether a page holds something to remember long-term; small talk is judged without the model."""
        lines = [line.partition(": ")[2] or line for line in page_text.splitlines() if line.strip()]
        if all(is_small_talk(line) for line in lines):
            return False
        with self._measure("worth", 1):
            user = (f"{self._clip(page_text, self.page_tokens)}\n\nDoes this part of the conversation hold "
                    "something worth remembering later? Answer yes or no.")
            return self._generate("worth", WORTH_PROMPT, user, WORTH, 2).strip() == "yes"

    def stats_dict(self) -> dict[str, dict[str, float | int | None]]:
        return {kind: {"calls": s.calls, "pages": s.pages, "ms": round(s.ms, 1), "ms_per_page": s.ms_per_page,
                       "unparsed": s.unparsed} for kind, s in sorted(self.stats.items())}


def maintain(pager: Pager, assistant: Assistant) -> list[Page]:
    """Do the model work a pager is waiting for; returns the pages changed (to be stored).

    Keywords of closed pages under a model strategy, chosen against the pages around them (the window
    the local strategies use), and worth verdicts of closed pages when ``worth`` is on."""
    changed: dict[int, Page] = {}
    pending = pager.pending_keywords()
    if pending:
        window = pager.keyword_window(pending[0], pending[-1])
        positions = {p.page_id: i for i, p in enumerate(window)}
        chosen = assistant.keywords([p.text for p in window], [positions[p.page_id] for p in pending],
                                    pager.config.keywords, pager.config.k, ids=[p.page_id for p in window])
        for page in pending:
            pager.set_page_keywords(page, chosen[positions[page.page_id]], pager.config.keywords)
            changed[page.page_id] = page
    for page in pager.pending_worth():
        page.worth = assistant.worth(page.text)
        changed[page.page_id] = page
    return list(changed.values())
