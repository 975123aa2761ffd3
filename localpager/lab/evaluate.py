"""End-to-end evaluation with the real local model: the same probes under every strategy.

Each conversation is replayed turn by turn into a scratch store, paged as in a chat; every probe is
asked at its ``at`` point (or at the end) without being stored, so probes asked at the same point
share the prompt prefix and the KV cache. For every probe the same question is also answered with
exactly its evidence turns injected: the model's own ceiling (``oracle_e2e_accuracy``).
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..core.choices import choose
from ..core.keywords import STRATEGIES as STRATEGIES_LOCAL
from ..core.keywords import extract_keywords
from ..core.pager import Pager, PagingConfig
from ..core.records import ABSENT_PROBE, GENERAL_PROBE, UNANSWERED_PROBES, Probe, Transcript
from ..retrieval.choices import DEFAULT_PAGE_CHOICE, DEFAULT_SIGNAL, PageChoice, Signal
from ..retrieval.rerank import RerankSettings
from ..runtime.grammar import SEARCH_QUERY
from ..runtime.guard import repeated_sentence
from ..runtime.choices import DEFAULT_LAYOUT, DEFAULT_TRIGGER, OFFERED_RECALL_MODES, Fired, Layout, RecallMode, Trigger
from ..runtime.selector import Injection, PageSelector, fit_turns, inject_in_order
from ..runtime.settings import RecallSettings, check_layout
from ..runtime.trace import Candidate, Trace
from .metrics import contains_answer, says_not_mentioned, score_answer
from .choices import EvalStrategy, RetrieverName
from .retrievers import DEFAULT_TOP_PAGES, get_retriever
from .selectors import is_product, lab_selector
from .split import ASKING, part_of, parts

if TYPE_CHECKING:
    from ..memory.models import ModelOptions

FORGOTTEN_PROBE = "forgotten"  # a result's type: a planted fact's question asked again after the fact was forgotten
SEARCH_PROMPT = ("Write a short search query to find, in the earlier conversation, what is needed to answer the "
                 "user's message. Reply only with search(\"...\").")


@dataclass
class EvalConfig:
    strategy: EvalStrategy = EvalStrategy.BOOKMARKS
    # who picks what the bookmarks strategy injects, what of a page is compared with the question, and when a
    # probe pages in without the model asking: the product's selector, or one of the lab's (``lab.selectors``)
    page_choice: PageChoice = DEFAULT_PAGE_CHOICE
    paging: PagingConfig = field(default_factory=PagingConfig)
    recall_mode: RecallMode = RecallMode.AUTO
    limit: int | None = None  # at most this many probes per conversation
    categories: list[int] | None = None  # LoCoMo question categories to ask (None: every probe with evidence)
    oracle: bool = True
    n_ctx: int = 2048
    model: str | None = None
    trigger: Trigger = DEFAULT_TRIGGER
    excerpt: int | None = RerankSettings.excerpt
    signal: Signal = DEFAULT_SIGNAL
    show_bookmarks: bool = True  # False: recall only by the trigger, no bookmark list in the prompt
    layout: Layout = DEFAULT_LAYOUT  # how a recall is answered (localpager.runtime.prompts)
    max_pages: int = RerankSettings.max_pages  # pages one recall injects at most
    repeat_penalty: float = 1.0
    date_answers: bool = RecallSettings.date_answers  # a question asking when is answered with a recalled date
    pages_when_several: int = RerankSettings.pages_when_several
    facts: bool = RecallSettings.facts  # the long-term layer (standing facts): off, what the product was before
    abstain: bool = RecallSettings.abstain  # "not remembered" below the relevance floor
    # at the end of each conversation, this many planted facts are forgotten (every statement of each) and their
    # questions asked again: the answer should be that nothing about it is remembered
    forget: int = 0
    # split mode (``lab.split``): each conversation told over this many chats of one user, its questions asked at
    # the end in a new chat of theirs; 0: as one conversation
    split: int = 0

    def __post_init__(self) -> None:
        self.strategy = choose(EvalStrategy, self.strategy, "strategy")
        self.page_choice = choose(PageChoice, self.page_choice, "page choice")
        self.recall_mode = choose(RecallMode, self.recall_mode, "recall mode", offered=OFFERED_RECALL_MODES)
        self.trigger = choose(Trigger, self.trigger, "trigger")
        self.signal = choose(Signal, self.signal, "signal")
        self.layout = check_layout(self.layout)


@dataclass
class ProbeResult:
    conversation: str
    question: str
    type: str | None
    answers: list[str]
    output: str
    score: float
    needs_recall: bool
    evidence_pages: list[int]
    injected_pages: list[int]
    recalled: bool
    latency_ms: float
    named_pages: list[int] = field(default_factory=list)  # what the model itself asked for
    answer_tokens: int = 0
    trigger: Fired = Fired.NONE  # what started the recall (the trace's trigger)
    # update probes (the fact was stated, then changed): the answer gives the newest value, not an older one
    latest: bool | None = None
    # a planted fact's value (an accepted answer) is among the keywords of the page holding it; None: not a
    # planted fact (LoCoMo, general questions)
    bookmark_covered: bool | None = None
    gate_probability: float | None = None
    oracle_output: str | None = None
    oracle_score: float | None = None
    style: str = "explicit"  # a planted fact asked about (explicit) or depended on without asking (implicit)
    decision: str = ""  # the trace's: answer, recall, fact, unknown, overview
    fact_shown: bool | None = None  # a planted fact: its standing fact was in front of the answer
    abstained: bool = False  # the answer says nothing about it is remembered
    abstained_by: str | None = None  # what said so (``abstention_cause``); None: it was not said
    mentions: bool | None = None  # general, never-said or forgotten: the answer brings up a planted fact's value


class EvidenceSelector(PageSelector):
    """Injects exactly a probe's evidence turns: the ceiling of any selector."""

    def __init__(self, evidence: Sequence[int]):
        self.evidence = sorted(set(evidence))

    def should_recall(self, question, pager) -> bool:
        return bool(self.evidence)

    def select(self, question, named, pager: Pager, room: int):
        by_page: dict[int, list[int]] = defaultdict(list)
        for i in fit_turns(pager, self.evidence, room):
            by_page[pager.page_of_turn(i).page_id].append(i)
        injections = [Injection(pager.page(pid), turns) for pid, turns in by_page.items()]
        return injections, [Candidate(pid, 1.0, injected=True, reason="evidence") for pid in by_page]


class RetrieverSelector(PageSelector):
    """A baseline: the top-k evicted pages of a retriever (bm25, overlap), injected on every probe."""

    def __init__(self, name: RetrieverName, k: int = DEFAULT_TOP_PAGES):
        self.retriever = get_retriever(name)
        self.k = k

    def should_recall(self, question, pager) -> bool:
        return bool(pager.evicted)

    def select(self, question, named, pager: Pager, room: int):
        ranked = self.retriever.retrieve(question, pager.evicted, self.k)
        return inject_in_order(pager, ranked, room, f"{self.retriever.name} top {self.k}")


class SearchToolSelector(PageSelector):
    """A baseline: the model writes a free-form search query, the page index finds the best evicted turn.

    The query is written in a prompt of its own, so this baseline also pays for losing the chat's KV cache."""

    def __init__(self, lp, conv_id: str):
        self.lp, self.conv_id = lp, conv_id
        self.query = ""

    def should_recall(self, question, pager) -> bool:
        return bool(pager.evicted)

    def select(self, question, named, pager: Pager, room: int):
        from ..backends.base import Message

        backend = self.lp.backend
        prompt = backend.render([Message("system", SEARCH_PROMPT), Message("user", question)])
        text = backend.generate(prompt, max_tokens=40, constraint=SEARCH_QUERY).text
        self.query = re.sub(r'^search\("|"\)$', "", text).strip() or question
        index = self.lp.index
        index.update(self.conv_id, pager.evicted, pager.turns, pager.bookmark)
        hits = index.rank(self.conv_id, self.query, [p.page_id for p in pager.evicted], "turn")
        if not hits or hits[0].turn is None:
            return [], []
        turns = fit_turns(pager, [hits[0].turn], room)
        page = pager.page(hits[0].page_id)
        candidate = Candidate(page.page_id, round(hits[0].score, 4), similarity=round(hits[0].score, 4),
                              injected=bool(turns), reason=f"search({self.query!r})")
        return ([Injection(page, turns)] if turns else []), [candidate]


def _settings(config: EvalConfig) -> tuple[RecallSettings, RerankSettings, PagingConfig]:
    paging = PagingConfig.from_dict(config.paging.to_dict())
    mode = config.recall_mode
    if config.strategy in (EvalStrategy.TRUNCATION, EvalStrategy.FULL):
        mode = RecallMode.NEVER
    elif config.strategy in (EvalStrategy.BM25, EvalStrategy.OVERLAP, EvalStrategy.SEARCH):
        mode = RecallMode.SELECTOR  # the baseline's selector alone decides
    if config.strategy == EvalStrategy.FULL:
        paging.budget = config.n_ctx - RecallSettings.max_answer_tokens - 64
    rerank = RerankSettings(max_pages=config.max_pages, pages_when_several=config.pages_when_several,
                            excerpt=config.excerpt)
    # the oracle run changes the mode, not the prompt: it keeps the strategy's system message, so both
    # runs share the prompt prefix (and the KV cache)
    recall = RecallSettings(mode=mode, show_bookmarks=mode != RecallMode.NEVER and config.show_bookmarks,
                            layout=config.layout, repeat_penalty=config.repeat_penalty,
                            date_answers=config.date_answers, facts=config.facts, abstain=config.abstain)
    return recall, rerank, paging


def _ask_points(conv: Transcript, limit: int | None, categories: Sequence[int] | None = None) -> dict[int, list[Probe]]:
    """Where each probe is asked: fact probes (they have evidence) up to ``limit`` a conversation, then every
    general question (``GENERAL_PROBE``: what should page nothing in) and every question about something never
    said (``ABSENT_PROBE``: what should be answered "not remembered")."""
    probes = [p for p in conv.probes if p.evidence
              and (categories is None or p.extra.get("category") in categories)][:limit]
    probes += [p for p in conv.probes if p.type in UNANSWERED_PROBES and not p.evidence]
    points: dict[int, list[Probe]] = defaultdict(list)
    for p in probes:
        points[len(conv.turns) - 1 if p.at is None else p.at].append(p)
    return points


def evaluate(conversations: Sequence[Transcript], config: EvalConfig, workdir: str | Path | None = None,
             progress: Callable[[Iterable], Iterable] | None = None, lp=None,
             loading: ModelOptions | None = None) -> "EvalReport":
    """Run every probe of ``conversations`` under ``config``; ``lp`` reuses an open LocalPager's model, else it
    loads with ``loading`` (the backend and its options, llama.cpp's threads and chat template; default: the
    library's) and ``config``'s model and context size."""
    from ..memory.api import LocalPager, ModelOptions

    recall, rerank, paging = _settings(config)
    options = replace(loading or ModelOptions(), model=config.model, n_ctx=config.n_ctx)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        backend = lp.backend if lp is not None else None  # share a loaded model; else the options' backend
        scratch = LocalPager(Path(tmp) / "eval.db", backend=backend, options=options, recall=recall, rerank=rerank)
        results: list[ProbeResult] = []
        keyword_ms, keyword_pages = 0.0, 0
        total = sum(len(ps) for c in conversations for ps in _ask_points(c, config.limit, config.categories).values())
        bar = progress(range(total)) if progress else None
        ticks = iter(bar) if bar is not None else None
        started = time.perf_counter()
        for conv in conversations:
            if config.split:
                results += _evaluate_split(scratch, conv, config, paging, ticks)
                continue
            points = _ask_points(conv, config.limit, config.categories)
            chat = scratch.conversation(conv.id, create=True, config=paging)
            planted = planted_values(conv)
            for turn in conv.turns:
                chat.add_turn(turn.role, turn.text, turn.time, turn.speaker, stamp=False)
                if turn.index in points:
                    chat.maintain()  # the model's side work, done between turns in a real chat
                for probe in points.get(turn.index, []):
                    results.append(_ask(scratch, chat, conv.id, probe, config, planted))
                    if ticks is not None:
                        next(ticks, None)
            results += _ask_forgotten(scratch, chat, conv, config, planted)
            if paging.keywords in STRATEGIES_LOCAL:  # what a local strategy costs per page, for the table
                texts = [p.text for p in chat.pager.pages]
                start = time.perf_counter()
                extract_keywords(texts, paging.keywords, paging.k, paging.seed)
                keyword_ms += (time.perf_counter() - start) * 1000
                keyword_pages += len(texts)
        elapsed = time.perf_counter() - started
        assist = scratch.models.assistant_stats()
        scratch.close()
    if keyword_pages:
        assist[f"keywords:{paging.keywords}"] = {"pages": keyword_pages, "ms": round(keyword_ms, 1),
                                                 "ms_per_page": round(keyword_ms / keyword_pages, 2)}
    report = EvalReport(config=config, results=results, seconds=elapsed, assist=assist)
    return report


def _evaluate_split(lp, conv: Transcript, config: EvalConfig, paging: PagingConfig, ticks) -> list[ProbeResult]:
    """Split mode: ``conv`` stored as ``config.split`` chats of the user ``conv.id``, every probe asked at the end in
    a new chat of theirs (no oracle: the evidence is in other conversations), then the forgotten facts' questions
    after a forget at the user's scope."""
    split = parts(conv.id, conv.turns, config.split)
    for part in split:
        chat = lp.conversation(part.conv_id, create=True, config=paging, user=conv.id)
        for turn in conv.turns[part.start:part.stop]:
            chat.add_turn(turn.role, turn.text, turn.time, turn.speaker, stamp=False)
        chat.maintain()
    asking = lp.conversation(f"{conv.id}#{ASKING}", create=True, config=paging, user=conv.id)
    planted = planted_values(conv)
    unsplit = replace(config, oracle=False)
    results = []
    for probes in _ask_points(conv, config.limit, config.categories).values():
        for probe in probes:
            results.append(_ask(lp, asking, asking.id, probe, unsplit, planted))
            if ticks is not None:
                next(ticks, None)
    for probe in _forgotten_probes(conv, config):
        for turn in sorted(set(probe.extra.get("stated") or probe.evidence)):
            part, index = part_of(split, turn)
            chat = lp.conversation(part.conv_id)
            if chat.turns[index].text:
                chat.forget(turn=index)
        results.append(_ask(lp, asking, asking.id, _forgotten(probe), unsplit, probe.answers))
    return results


def _forgotten_probes(conv: Transcript, config: EvalConfig) -> list[Probe]:
    """The planted facts ``config.forget`` forgets: every third explicit one, at most that many."""
    return [p for p in conv.probes if p.evidence and "kind" in p.extra and p.extra.get("style") != "implicit"
            and "category" not in p.extra][::3][: config.forget]


def _forgotten(probe: Probe) -> Probe:
    """``probe``'s question, asked again after its fact was forgotten: nothing about it should be remembered."""
    return Probe(probe.question, [], [], FORGOTTEN_PROBE, extra={"kind": probe.extra["kind"],
                                                             "old_answers": probe.answers})


def planted_values(conv: Transcript) -> list[str]:
    """Every value planted in a generated conversation (its fact probes' accepted answers, old values too): what
    an answer to a general, never-said or forgotten question must not bring up."""
    return sorted({a for p in conv.probes if "kind" in p.extra and "category" not in p.extra
                   for a in [*p.answers, *p.extra.get("old_answers", [])]})


def _ask_forgotten(lp, chat, conv: Transcript, config: EvalConfig, planted: list[str]) -> list[ProbeResult]:
    """Forget ``config.forget`` planted facts of ``conv`` (every turn that states each: its statement and its
    corrections) and ask each one's question again: nothing about it should be remembered now."""
    out = []
    for probe in _forgotten_probes(conv, config):
        for turn in sorted(set(probe.extra.get("stated") or probe.evidence)):
            if chat.turns[turn].text:
                chat.forget(turn=turn)
        out.append(_ask(lp, chat, conv.id, _forgotten(probe), replace(config, oracle=False), probe.answers))
    return out


def _ask(lp, chat, conv_id: str, probe: Probe, config: EvalConfig, planted: list[str]) -> ProbeResult:
    pager = chat.pager
    evidence_pages = sorted({pager.page_of_turn(i).page_id for i in probe.evidence if i < len(pager.turns)})
    needs_recall = any(pager.page(pid).evicted for pid in evidence_pages)
    result = chat.ask(probe.question, remember=False, selector=_selector(lp, conv_id, config))
    trace, abstained = result.trace, says_not_mentioned(result.answer)
    out = ProbeResult(
        conversation=conv_id, question=probe.question, type=probe.type, answers=probe.answers,
        output=result.answer, score=score_answer(result.answer, probe.answers, probe.extra),
        needs_recall=needs_recall, evidence_pages=evidence_pages, injected_pages=trace.injected_page_ids,
        recalled=trace.decision == "recall", latency_ms=trace.to_dict()["timings_ms"]["total"],
        named_pages=list(trace.model_page_ids), answer_tokens=trace.tokens["generated"], trigger=trace.trigger,
        latest=_gives_latest(result.answer, probe),
        bookmark_covered=_bookmark_covers(pager, probe),
        gate_probability=(trace.gate or {}).get("probability"),
        style=probe.extra.get("style", "explicit"), decision=trace.decision,
        fact_shown=_fact_shown(chat, trace, probe), abstained=abstained,
        abstained_by=abstention_cause(trace) if abstained else None,
        mentions=contains_answer(result.answer, planted) if probe.type in (*UNANSWERED_PROBES, FORGOTTEN_PROBE)
        else None,
    )
    if config.oracle and probe.evidence:
        oracle = chat.ask(probe.question, remember=False, selector=EvidenceSelector(probe.evidence),
                           mode=RecallMode.SELECTOR)
        out.oracle_output = oracle.answer
        out.oracle_score = score_answer(oracle.answer, probe.answers, probe.extra)
    return out


def _selector(lp, conv_id: str, config: EvalConfig):
    """What picks a probe's recall: a baseline's own selector, the lab's variant of the reranking selector the
    config's choices name, or None: the product's own (``LocalPager.selector``)."""
    if config.strategy in (EvalStrategy.BM25, EvalStrategy.OVERLAP):
        return RetrieverSelector(RetrieverName(config.strategy))
    if config.strategy == EvalStrategy.SEARCH:
        return SearchToolSelector(lp, conv_id)
    if is_product(config.page_choice, config.signal, config.trigger):
        return None
    return lab_selector(lp.index, conv_id, lp.rerank, lp.lexical(conv_id), page_choice=config.page_choice,
                        signal=config.signal, trigger=config.trigger)


def _fact_shown(chat, trace, probe: Probe) -> bool | None:
    """For a planted fact: whether a standing fact stated by its newest statement was in front of the answer
    (in the prompt's prefix, or given to it as a note); None for a probe that is no planted fact, and in split mode
    (the fact is another conversation's: its turn numbers are not the probe's)."""
    if not probe.evidence or "kind" not in probe.extra or chat.id.endswith(f"#{ASKING}"):
        return None
    shown = set(trace.facts_shown) | {f["fact_id"] for f in trace.facts}
    return any(f.fact_id in shown and f.turn in probe.evidence for f in chat.facts(all=True))


def _bookmark_covers(pager: Pager, probe: Probe) -> bool | None:
    """For a planted fact (a generated probe): whether the bookmark of a page holding its evidence names
    its value (``keyword_covers``)."""
    if not probe.evidence or not probe.answers or "category" in probe.extra:
        return None
    pages = {pager.page_of_turn(i).page_id for i in probe.evidence if i < len(pager.turns)}
    keywords = [k for pid in pages for k in pager.page(pid).keywords]
    return any(keyword_covers(k, probe.answers) for k in keywords)


def keyword_covers(keyword: str, answers: Sequence[str]) -> bool:
    """A keyword names a value when, ignoring case, ``$`` and thousands commas (and a bookmark's "3.30pm"
    for "3:30pm"), it is an accepted answer, holds one as whole words ("Priya Mensah" holds "Mensah"), or
    is a number within one ("12" in "12 units")."""
    def norm(text: str) -> str:
        return " ".join(re.sub(r"[$,]", "", text.lower()).replace(":", ".").split())

    kw = norm(keyword)
    for answer in map(norm, answers):
        if not answer or not kw:
            continue
        if kw == answer or re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", kw):
            return True
        if any(c.isdigit() for c in kw) and re.search(rf"(?<!\w){re.escape(kw)}(?!\w)", answer):
            return True
    return False


# What answered "not remembered" (``abstention_cause``), in the order an answer meets them
NEVER_TOLD, FLOOR, GROUNDING, MODEL = "never told", "floor", "grounding", "model"
ABSTENTION_CAUSES = (NEVER_TOLD, FLOOR, GROUNDING, MODEL)


def abstention_cause(trace: Trace) -> str:
    """What answered "not remembered", by the trace: the pair bank before any recall (``never told``: no fact meets
    what such questions need), the relevance floor on what a recall found, the check of the answer against what it
    was shown (``grounding``), or the model's own words (``model``). A fact question's cause says which part to
    look at: on new kinds of fact, the recall's answer, not the floor, said most of them."""
    answerable, grounding = trace.answerable or {}, trace.grounding or {}
    if answerable.get("features", {}).get("never_told"):
        return NEVER_TOLD
    if answerable and not answerable.get("answer", True):
        return FLOOR
    if grounding and not grounding.get("grounded", True):
        return GROUNDING
    return MODEL


def _gives_latest(output: str, probe: Probe) -> bool | None:
    """For a probe whose fact was changed: the answer names the current value and no older one."""
    old = probe.extra.get("old_answers") or []
    if not old:
        return None
    return contains_answer(output, probe.answers) and not contains_answer(output, old)


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarize(results: Sequence[ProbeResult]) -> dict[str, Any]:
    """The figures of a run. General questions count only in ``general_recall_rate`` (the share of them that
    paged anything in), ``general_contamination`` (the share whose answer brings up a planted fact's value) and
    ``general_abstention`` (the share answered "not remembered");
    questions about something never said or forgotten only in the abstention figures; every other figure is over
    the fact probes (and ``false_abstention_rate``: the share of those answered "not remembered")."""
    general = [r for r in results if r.type == GENERAL_PROBE]
    unknowable = [r for r in results if r.type in (ABSENT_PROBE, FORGOTTEN_PROBE)]
    results = [r for r in results if r.type not in (GENERAL_PROBE, ABSENT_PROBE, FORGOTTEN_PROBE)]
    needing = [r for r in results if r.needs_recall]
    not_needing = [r for r in results if not r.needs_recall]
    injected = [p for r in results for p in r.injected_pages]
    holding = sum(len(set(r.injected_pages) & set(r.evidence_pages)) for r in results)
    latencies = sorted(r.latency_ms for r in results)
    named = [r for r in needing if r.named_pages]
    oracle = [r.oracle_score for r in results if r.oracle_score is not None]
    return {
        "probes": len(results),
        "needs_recall": len(needing),
        "recall_triggered": _mean([float(r.recalled) for r in needing]),
        "page_selection_accuracy": _mean([float(bool(set(r.injected_pages) & set(r.evidence_pages)))
                                          for r in needing]),
        "recall_precision": round(holding / len(injected), 4) if injected else None,
        # of the probes needing a recall where the model named pages: it named an evidence page
        "model_selection_accuracy": _mean([float(bool(set(r.named_pages) & set(r.evidence_pages))) for r in named]),
        "evidence_resident": _mean([float(not r.needs_recall) for r in results]),
        "false_recall_rate": _mean([float(r.recalled) for r in not_needing]),
        "e2e_accuracy": _mean([r.score for r in results]),
        "oracle_e2e_accuracy": _mean(oracle),
        # answers in which a sentence of more than 15 characters occurs twice (guard.repeated_sentence)
        "repeated_answer_rate": _mean([float(repeated_sentence(r.output) is not None) for r in results]),
        "mean_answer_chars": _mean([float(len(r.output)) for r in results]),
        "mean_answer_tokens": _mean([float(r.answer_tokens) for r in results]),
        "latest_value_rate": _mean([float(r.latest) for r in results if r.latest is not None]),
        "bookmark_fact_coverage": _mean([float(r.bookmark_covered) for r in results if r.bookmark_covered is not None]),
        "general_questions": len(general),
        "general_recall_rate": _mean([float(bool(r.injected_pages)) for r in general]),
        "general_contamination": _mean([float(bool(r.mentions)) for r in general if r.mentions is not None]),
        # a general question ("What's 15% of 240?") answered "not remembered": memory refusing what needs none
        "general_abstention": _mean([float(r.abstained) for r in general]),
        # the long-term layer: a planted fact's standing fact in front of the answer; answered from a standing fact
        "standing_fact_recall": _mean([float(r.fact_shown) for r in results if r.fact_shown is not None]),
        "fact_answer_rate": _mean([float(r.decision == "fact") for r in results]),
        # questions about what was never said or was forgotten: "not remembered", and never another value
        "never_said": sum(r.type == ABSENT_PROBE for r in unknowable),
        "forgotten": sum(r.type == FORGOTTEN_PROBE for r in unknowable),
        "abstention_rate": _mean([float(r.abstained) for r in unknowable]),
        "abstention_never_said": _mean([float(r.abstained) for r in unknowable if r.type == ABSENT_PROBE]),
        "abstention_forgotten": _mean([float(r.abstained) for r in unknowable if r.type == FORGOTTEN_PROBE]),
        "unknown_answered_with_a_value": _mean([float(bool(r.mentions)) for r in unknowable if r.mentions is not None]),
        "false_abstention_rate": _mean([float(r.abstained) for r in results]),
        # ... by what said it, each a share of the fact probes (``abstention_cause``)
        "false_abstention_by": {cause: _mean([float(r.abstained_by == cause) for r in results])
                                for cause in ABSTENTION_CAUSES} if results else {},
        "latency_ms": {
            "p50": round(statistics.median(latencies), 1) if latencies else None,
            "p95": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 1) if latencies else None,
        },
    }


@dataclass
class EvalReport:
    config: EvalConfig
    results: list[ProbeResult]
    seconds: float
    assist: dict[str, Any] = field(default_factory=dict)  # keyword / eviction / worth cost per page

    def to_dict(self) -> dict[str, Any]:
        by_type: dict[str, list[ProbeResult]] = defaultdict(list)
        by_style: dict[str, list[ProbeResult]] = defaultdict(list)
        for r in self.results:
            if r.type not in (GENERAL_PROBE, ABSENT_PROBE, FORGOTTEN_PROBE):
                by_type[r.type or "untyped"].append(r)
                by_style[r.style].append(r)
        return {
            **summarize(self.results),
            "by_type": {t: summarize(rs) for t, rs in sorted(by_type.items())},
            "by_style": {s: summarize(rs) for s, rs in sorted(by_style.items())},
            "config": {**asdict(self.config), "paging": self.config.paging.to_dict()},
            "seconds": round(self.seconds, 1),
            "assist": self.assist,
            "results": [asdict(r) for r in self.results],
        }
