"""The paging simulator: replay conversations through the pager and score paging without a chat model.

For every probe it records whether the evidence was still in the prompt (a hit) or had been paged
out (the question needs a recall), and whether each retriever would have found the evidence
among the evicted pages. A grid over boundary and eviction policies, with Bélády's clairvoyant
policy as the reference, shows which paging settings keep the facts that get asked about.

Access model: a probe *touches* its evidence pages (what LRU, LFU and hybrid learn from), but an
evicted page stays evicted. localpager injects a recalled page into one prompt transiently rather
than paging it back in, so a miss stays a miss for later probes too, and the hit rate is the share
of probes whose evidence pages were all resident when asked.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from ..core.boundaries import get_boundary, split_pages
from ..core.choices import Eviction, choose
from ..core.eviction import get_eviction
from ..core.keywords import extract_keywords, local_strategy
from ..core.pager import Pager, PagingConfig
from ..core.records import Page, Transcript
from ..core.tokens import TokenCounter
from .choices import BELADY
from .retrievers import DEFAULT_TOP_PAGES, get_retriever, retrieve_pages

Progress = Callable[[Iterable[Any]], Iterable[Any]]  # e.g. tqdm


class Belady:
    """Bélády's MIN: evict the page whose next use lies farthest ahead; never-used pages first.

    It knows the future, so it is a reference, not a policy to run: a page is *used* when a probe
    about a turn it holds is asked. Uses are kept per turn because pages only exist once their
    turns arrive; at each decision a candidate's own turn range says which uses are its.
    """

    name = BELADY

    def __init__(self, uses: Iterable[tuple[int, Iterable[int]]]):
        """``uses``: (turn index after which a probe is asked, the probe's evidence turns)."""
        self._uses = sorted((at, turn) for at, turns in uses for turn in turns)
        self._times = [at for at, _ in self._uses]

    @classmethod
    def for_conversation(cls, conv: Transcript) -> "Belady":
        return cls((_asked_at(probe.at, conv), probe.evidence) for probe in conv.probes)

    def next_use(self, page: Page, now: int) -> float:
        """The first time at or after ``now`` (a probe at ``now`` follows the eviction) that a
        probe needs ``page``; infinity if none does."""
        for at, turn in self._uses[bisect_left(self._times, now) :]:
            if page.holds(turn):
                return at
        return float("inf")

    def order(self, candidates: Sequence[Page], now: int, context=None) -> list[Page]:
        return sorted(candidates, key=lambda p: (-self.next_use(p, now), p.page_id))


@lru_cache(maxsize=4096)
def _keywords(corpus: tuple[str, ...], strategy: str, k: int, seed: int) -> list[list[str]]:
    return extract_keywords(corpus, strategy, k, seed)


class _GridPager(Pager):
    """A pager whose keyword extraction is shared across the grid.

    Pages depend on the boundary alone, so every eviction policy closes the same pages against the
    same corpus; extracting keywords (for bookmark sizes) once instead of once per policy is what
    keeps a grid fast. The result is the same as ``Pager.set_keywords``.
    """

    def set_keywords(self, pages: Sequence[Page]) -> None:
        corpus = tuple(p.text for p in self.pages)
        strategy = local_strategy(self.config.keywords)
        keywords = _keywords(corpus, strategy, self.config.k, self.config.seed)
        index = {p.page_id: i for i, p in enumerate(self.pages)}
        for p in pages:
            self.set_page_keywords(p, list(keywords[index[p.page_id]]), strategy)


class _MemoCounter:
    """Counts each text once: the grid renders the same turns and bookmarks in every setting."""

    def __init__(self, counter: TokenCounter):
        self.name = counter.name
        self.count = lru_cache(maxsize=1 << 16)(counter.count)


def _asked_at(at: int | None, conv: Transcript) -> int:
    """The turn after which a probe is asked: its ``at``, or the last turn."""
    return len(conv.turns) - 1 if at is None else at


@dataclass
class ProbeOutcome:
    """What paging meant for one probe: was its evidence resident, and who could find it if not."""

    conversation: str
    probe: int  # index in the conversation's probes
    question: str
    at: int  # the turn after which it was asked
    evidence_pages: list[int]
    hit: bool  # every evidence page was resident
    evicted_pages: int  # the candidates a retriever chose from
    retrieved: dict[str, list[int]] = field(default_factory=dict)  # only when a recall is needed

    @property
    def needs_recall(self) -> bool:
        return not self.hit

    def found(self, retriever: str) -> bool:
        """Whether ``retriever``'s top-k held an evidence page."""
        return any(page in self.evidence_pages for page in self.retrieved[retriever])


def simulate_conversation(
    conv: Transcript,
    config: PagingConfig,
    counter: TokenCounter,
    retrievers: Sequence[str] = (),
    k: int = DEFAULT_TOP_PAGES,
    eviction: str | None = None,
) -> list[ProbeOutcome]:
    """Replay ``conv`` turn by turn and score each probe right after the turn it is asked at.

    ``eviction`` overrides ``config.eviction``; it is the only way to ask for ``"belady"``, which
    needs the conversation's future and so cannot be named in a stored ``PagingConfig``. Probes
    without evidence are skipped: there is no page for them to hit or to recall.
    """
    name = eviction or config.eviction
    policy = Belady.for_conversation(conv) if name == BELADY else get_eviction(name)
    pager = _GridPager(counter, config, eviction=policy)
    chosen = {s: get_retriever(s) for s in retrievers}
    asked: dict[int, list[int]] = defaultdict(list)
    for i, probe in enumerate(conv.probes):
        if not probe.evidence:
            continue
        at = _asked_at(probe.at, conv)
        if not max(probe.evidence) <= at < len(conv.turns):
            raise ValueError(
                f"{conv.id} probe {i}: asked after turn {at} about turns {probe.evidence} "
                f"(the conversation has {len(conv.turns)} turns)"
            )
        asked[at].append(i)
    outcomes: list[ProbeOutcome] = []
    for turn in conv.turns:
        pager.add_turn(turn)
        for i in asked.get(turn.index, ()):
            probe = conv.probes[i]
            pages = list(dict.fromkeys(pager.page_of_turn(t).page_id for t in probe.evidence))
            evicted = pager.evicted
            outcome = ProbeOutcome(
                conv.id, i, probe.question, turn.index, pages,
                hit=not any(pager.page(p).evicted for p in pages),
                evicted_pages=len(evicted),
            )
            if outcome.needs_recall:
                outcome.retrieved = {
                    s: retrieve_pages(sel, probe.question, evicted, k, probe.evidence, pager.turns, conv.id)
                    for s, sel in chosen.items()
                }
            outcomes.append(outcome)
            pager.touch(pages, turn.index)
    return outcomes


@dataclass
class Cell:
    """One grid cell: a paging setting and one retriever, aggregated over every conversation.

    ``hit_rate``, ``avg_pages``, ``needs_recall`` and ``probes`` depend on paging only, so they
    repeat across the retrievers of a setting. ``selection_accuracy`` is the share of needs-recall
    probes whose evidence was in the retriever's top-k; ``avg_evicted`` (evicted pages at those
    probes) gives its chance level, about k / avg_evicted.
    """

    boundary: str
    eviction: str
    retriever: str | None  # None when the grid was run without retrievers
    hit_rate: float | None
    avg_pages: float
    needs_recall: int
    selection_accuracy: float | None
    probes: int
    avg_evicted: float | None


@dataclass
class SimulationResult:
    budget: int
    k: int
    conversations: int
    cells: list[Cell]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def settings(self) -> dict[tuple[str, str], Cell]:
        """The first cell of every (boundary, eviction): its paging numbers, whatever the retriever."""
        found: dict[tuple[str, str], Cell] = {}
        for cell in self.cells:
            found.setdefault((cell.boundary, cell.eviction), cell)
        return found

    def to_markdown(self) -> str:
        """One row per paging setting, one selection-accuracy column per retriever."""
        retrievers = list(dict.fromkeys(c.retriever for c in self.cells if c.retriever is not None))
        accuracy = {(c.boundary, c.eviction, c.retriever): c.selection_accuracy for c in self.cells}
        head = ["boundary", "eviction", "pages", "probes", "hit rate", "needs recall", "evicted"]
        head += [f"{s}@{self.k}" for s in retrievers]
        lines = [
            f"Paging simulation: {self.conversations} conversations, budget {self.budget} tokens; "
            f"retriever columns: share of needs-recall probes with evidence in the top {self.k}.",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|",
        ]
        for (boundary, eviction), cell in self.settings().items():
            row = [boundary, eviction, f"{cell.avg_pages:.1f}", str(cell.probes), _pct(cell.hit_rate),
                   str(cell.needs_recall), _num(cell.avg_evicted)]
            row += [_pct(accuracy[boundary, eviction, s]) for s in retrievers]
            lines.append("| " + " | ".join(row) + " |")
        return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(frozen=True)
class SimulationGrid:
    """The settings a simulation crosses: every boundary × eviction at one memory ``budget``, each probe that
    needs a recall scored by every retriever's top ``k`` pages."""

    boundaries: Sequence[str]
    evictions: Sequence[str]
    budget: int
    retrievers: Sequence[str] = ()
    k: int = DEFAULT_TOP_PAGES

    def check(self) -> None:
        """Every name known (ValueError naming the choices otherwise)."""
        for name in self.boundaries:
            get_boundary(name)
        for name in self.evictions:
            if name != BELADY:
                choose(Eviction, name, "eviction policy", also=(BELADY,))
        for name in self.retrievers:
            get_retriever(name)

    def run(self, conversations: Sequence[Transcript], counter: TokenCounter,
            progress: Progress | None = None) -> SimulationResult:
        """Run every conversation through every boundary × eviction setting and aggregate per cell.

        Names are checked before anything runs. ``progress`` wraps the list of (setting, conversation)
        runs, e.g. ``tqdm``. Work that repeats across settings is cached: token counts here, keywords
        per boundary in the pager, page words in the lexical retrievers, and turn embeddings in the
        shared default embedder, so rerank embeds each turn once for the whole grid.
        """
        self.check()
        boundaries, evictions, retrievers = self.boundaries, self.evictions, self.retrievers
        memo = _MemoCounter(counter)
        runs = [(b, e, conv) for b in boundaries for e in evictions for conv in conversations]
        outcomes: dict[tuple[str, str], list[ProbeOutcome]] = defaultdict(list)
        for boundary, eviction, conv in progress(runs) if progress else runs:
            config = PagingConfig(boundary=boundary, budget=self.budget)
            outcomes[boundary, eviction] += simulate_conversation(conv, config, memo, retrievers, self.k, eviction)
        pages = {b: sum(len(split_pages(c.turns, get_boundary(b))) for c in conversations) for b in boundaries}
        cells = []
        for boundary in boundaries:
            avg_pages = pages[boundary] / len(conversations) if conversations else 0.0
            for eviction in evictions:
                done = outcomes[boundary, eviction]
                misses = [o for o in done if o.needs_recall]
                common = dict(
                    boundary=boundary,
                    eviction=eviction,
                    hit_rate=_share(len(done) - len(misses), len(done)),
                    avg_pages=avg_pages,
                    needs_recall=len(misses),
                    probes=len(done),
                    avg_evicted=_share(sum(o.evicted_pages for o in misses), len(misses)),
                )
                for retriever in retrievers or [None]:
                    accuracy = None
                    if retriever is not None:
                        accuracy = _share(sum(o.found(retriever) for o in misses), len(misses))
                    cells.append(Cell(retriever=retriever, selection_accuracy=accuracy, **common))
        return SimulationResult(self.budget, self.k, len(conversations), cells)


@dataclass
class BoundViolation:
    """An online policy that kept more asked-about pages than Bélády on one boundary."""

    boundary: str
    eviction: str
    hit_rate: float
    belady_hit_rate: float
    explanation: str


def belady_violations(result: SimulationResult) -> list[BoundViolation]:
    """Settings where an online policy's hit rate beats Bélády's on the same boundary.

    Bélády's MIN is optimal only under its own model: equal-size pages, evicted one at a time
    exactly when space runs out, each request for one page. The pager breaks all three, so Bélády
    here is a strong reference, not a bound:

    - pages differ in size (tokens), and an evicted page still costs its bookmark, so keeping the
      page used soonest can force out several pages that a size-aware choice would have kept;
    - evictions come in watermark batches (down to ``low_watermark * budget``), so Bélády evicts
      pages that an online policy, evicting a different mix of sizes, happens to keep;
    - a probe is a hit only if *all* its evidence pages are resident, and MIN minimises page
      misses, not probe misses.

    Raises ValueError when the grid has no ``belady`` column to compare with.
    """
    settings = result.settings()
    if not any(eviction == BELADY for _, eviction in settings):
        raise ValueError("the simulation has no belady cells; include 'belady' in the evictions")
    violations = []
    for (boundary, eviction), cell in settings.items():
        reference = settings.get((boundary, BELADY))
        if eviction == BELADY or reference is None or cell.hit_rate is None or reference.hit_rate is None:
            continue
        if cell.hit_rate > reference.hit_rate:
            violations.append(BoundViolation(
                boundary, eviction, cell.hit_rate, reference.hit_rate,
                f"{eviction} hits {_pct(cell.hit_rate)} > belady {_pct(reference.hit_rate)} on "
                f"{boundary}: pages of unequal token size (and bookmarks of evicted pages), watermark "
                "batch eviction and multi-page evidence void Bélády's optimality; it stays a "
                "reference, not a bound.",
            ))
    return violations
