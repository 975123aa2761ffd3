"""The paging engine: turns into pages, pages out of the prompt when the token budget is exceeded.

Pure logic over records: no model, no database. The runtime and the simulator drive it the same way
(one turn at a time), the store persists what it changes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from .bookmarks import render_bookmark
from .boundaries import get_boundary
from .choices import (
    DEFAULT_BOOKMARK_FORMAT,
    DEFAULT_BOUNDARY,
    DEFAULT_EVICTION,
    DEFAULT_KEYWORDS,
    MODEL_STRATEGIES,
    BookmarkFormat,
    Eviction,
    KeywordStrategy,
    choose,
)
from .eviction import EvictionContext, EvictionPolicy, get_eviction
from .keywords import DEFAULT_KEYWORDS_PER_PAGE, check_strategy, extract_keywords, local_strategy
from .records import Page, Turn
from .tokens import TokenCounter

# Measured with SmolLM2-135M on generated conversations: with 512 tokens of memory it answered more
# probes right (0.37, ceiling 0.58) than with 1024 (0.32, ceiling 0.47): less distracting history.
DEFAULT_BUDGET = 512
KEYWORD_WINDOW = 10


@dataclass
class PagingConfig:
    """How a conversation is paged. Stored with the conversation so that it pages the same way later.

    ``budget`` is the number of tokens the conversation memory (system text, bookmarks and resident
    pages) may take in the prompt. Past it (the high watermark) pages are evicted until the memory is
    under ``low_watermark * budget``, so evictions, which change the prompt prefix, come in batches.
    """

    boundary: str = DEFAULT_BOUNDARY  # a Boundary, or fixed_N / exchange_N
    eviction: Eviction = DEFAULT_EVICTION
    keywords: KeywordStrategy = DEFAULT_KEYWORDS
    k: int = DEFAULT_KEYWORDS_PER_PAGE
    bookmark_format: BookmarkFormat = DEFAULT_BOOKMARK_FORMAT
    budget: int = DEFAULT_BUDGET
    low_watermark: float = 0.75
    turn_overhead: int = 5  # chat-template tokens around each message
    # Bookmarks listed in the prompt may take at most this share of the budget: the newest ones. Older
    # evicted pages stay findable by similarity, but a 3,200-turn conversation's 160 bookmarks alone
    # would take ~2,900 tokens.
    bookmark_share: float = 0.4
    # Ask the model, as each page closes, whether it holds something to remember; pages judged not
    # worth it are evicted first (see localpager.runtime.assist).
    worth: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        get_boundary(self.boundary)
        self.eviction = choose(Eviction, self.eviction, "eviction policy")
        self.keywords = check_strategy(self.keywords)
        self.bookmark_format = choose(BookmarkFormat, self.bookmark_format, "bookmark format")
        if self.budget <= 0:
            raise ValueError(f"budget must be a positive number of tokens, got {self.budget}")
        if not 0 <= self.bookmark_share <= 1:
            raise ValueError(f"bookmark_share must be in [0, 1], got {self.bookmark_share}")
        if not 0 < self.low_watermark <= 1:
            raise ValueError(f"low_watermark must be in (0, 1], got {self.low_watermark}")
        if not 1 <= self.k <= 10:
            raise ValueError(f"k (keywords per page) must be 1..10, got {self.k}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PagingConfig":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass
class PagingChange:
    """What one added turn did: pages whose records changed, and the ones evicted."""

    changed: list[Page] = field(default_factory=list)
    evicted: list[Page] = field(default_factory=list)
    closed: Page | None = None


class Pager:
    """Holds the pages of one conversation and keeps its memory within the budget."""

    def __init__(
        self,
        counter: TokenCounter,
        config: PagingConfig | None = None,
        turns: Sequence[Turn] = (),
        pages: Sequence[Page] = (),
        fixed_overhead: int = 0,
        eviction: EvictionPolicy | None = None,
    ):
        self.counter = counter
        self.config = config or PagingConfig()
        self.boundary = get_boundary(self.config.boundary)
        self.eviction = eviction or get_eviction(self.config.eviction)
        self.turns: list[Turn] = list(turns)
        self.pages: list[Page] = list(pages)
        self.fixed_overhead = fixed_overhead  # the system prompt's tokens, set by the runtime
        self._bookmark_tokens: dict[int, int] = {}
        # How many leading pages of ``pages`` (that very list) are evicted, as far as read: a page never comes back
        # once evicted and pages are only appended, so the reading only moves forward, and ``resident`` and
        # ``evicted`` (read several times a turn) look at the pages after it alone; at 100,000 turns scanning all
        # 5,000 pages each time made ingest quadratic.
        self._settled: tuple[list[Page] | None, int] = (None, 0)

    def _evicted_before(self) -> int:
        """The number of leading pages that are all evicted (``_settled``, moved forward as far as it goes)."""
        pages = self.pages
        seen, n = self._settled
        if seen is not pages or n > len(pages) or (n and not pages[n - 1].evicted):  # replaced: read from the start
            n = 0
        while n < len(pages) and pages[n].evicted:
            n += 1
        self._settled = (pages, n)
        return n

    # -- reading ------------------------------------------------------------------------------
    @property
    def resident(self) -> list[Page]:
        return [p for p in self.pages[self._evicted_before():] if not p.evicted]

    @property
    def evicted(self) -> list[Page]:
        n = self._evicted_before()
        return self.pages[:n] + [p for p in self.pages[n:] if p.evicted]

    @property
    def listed(self) -> list[Page]:
        """Evicted pages whose bookmarks are in the prompt: the newest that fit in ``bookmark_share`` of
        the budget, oldest first."""
        room = self.config.bookmark_share * self.config.budget
        shown: list[Page] = []
        for page in reversed(self.pages):  # from the newest, so only the listed ones and the resident after them
            if not page.evicted:
                continue
            room -= self.bookmark_tokens(page)
            if room < 0:
                break
            shown.append(page)
        return shown[::-1]

    def page(self, page_id: int) -> Page:
        if 0 < page_id <= len(self.pages) and self.pages[page_id - 1].page_id == page_id:  # ids count from 1
            return self.pages[page_id - 1]
        for p in self.pages:
            if p.page_id == page_id:
                return p
        raise KeyError(f"no page p{page_id}")

    def _position(self, page: Page) -> int:
        """Where ``page`` (this very object) is in ``pages``: by its id first, else from the newest back (a
        dataclass's ``==`` compares every field, and ``list.index`` compares from the oldest)."""
        i = page.page_id - 1
        if 0 <= i < len(self.pages) and self.pages[i] is page:
            return i
        for i in range(len(self.pages) - 1, -1, -1):
            if self.pages[i] is page:
                return i
        raise ValueError(f"p{page.page_id} is not a page of this conversation")

    def page_of_turn(self, turn_index: int) -> Page:
        for p in self.pages:
            if p.holds(turn_index):
                return p
        raise KeyError(f"no page holds turn {turn_index}")

    def bookmark(self, page: Page) -> str:
        return render_bookmark(page, self.config.bookmark_format)

    def bookmark_tokens(self, page: Page) -> int:
        if page.page_id not in self._bookmark_tokens:
            self._bookmark_tokens[page.page_id] = self.counter.count(self.bookmark(page)) + 1
        return self._bookmark_tokens[page.page_id]

    def memory_tokens(self) -> int:
        """Tokens the conversation memory takes in the prompt now."""
        return (
            self.fixed_overhead
            + sum(self.bookmark_tokens(p) for p in self.listed)
            + sum(p.token_count for p in self.resident)
        )

    def turn_tokens(self, turn: Turn) -> int:
        return self.counter.count(turn.render()) + self.config.turn_overhead

    # -- changing -----------------------------------------------------------------------------
    def add_turn(self, turn: Turn) -> PagingChange:
        """Append a turn: extend the open page or open a new one, then enforce the budget."""
        if turn.index != len(self.turns):
            raise ValueError(f"turn index {turn.index} out of order; expected {len(self.turns)}")
        self.turns.append(turn)
        change = PagingChange()
        open_page = self.pages[-1] if self.pages else None
        if open_page is None or self.boundary.starts_page(self.turns, turn.index, open_page.first_turn):
            if open_page is not None:
                self.set_keywords_recent(open_page)
                change.closed = open_page
                change.changed.append(open_page)
            open_page = Page(page_id=len(self.pages) + 1, first_turn=turn.index, last_turn=turn.index)
            self.pages.append(open_page)
        else:
            open_page.last_turn = turn.index
            open_page.text += "\n"
        open_page.text += turn.render()
        open_page.token_count += self.turn_tokens(turn)
        change.changed.append(open_page)
        change.evicted = self.enforce_budget()
        change.changed.extend(p for p in change.evicted if p not in change.changed)
        return change

    def set_keywords(self, pages: Sequence[Page]) -> None:
        """Give ``pages`` keywords, extracted against every page of the conversation (for tf-idf).

        A model strategy's pages get its local fallback's keywords here; ``pending_keywords`` lists them."""
        corpus = [p.text for p in self.pages]
        index = {p.page_id: i for i, p in enumerate(self.pages)}
        strategy = local_strategy(self.config.keywords)
        keywords = extract_keywords(corpus, strategy, self.config.k, self.config.seed)
        for p in pages:
            self.set_page_keywords(p, keywords[index[p.page_id]], strategy)

    def set_page_keywords(self, page: Page, keywords: list[str], by: str) -> None:
        page.keywords = keywords
        page.keywords_by = by
        self._bookmark_tokens.pop(page.page_id, None)

    def keyword_window(self, first: Page, last: Page | None = None) -> list[Page]:
        """The pages keywords are chosen against: ``first`` to ``last`` (default: ``first`` alone) and at most
        ``KEYWORD_WINDOW`` before them, so a long conversation does not re-read all its pages every time
        one closes."""
        i = self._position(first)
        j = self._position(last) if last is not None else i
        return self.pages[max(0, i - KEYWORD_WINDOW) : j + 1]

    def set_keywords_recent(self, page: Page) -> None:
        """Keywords for one page as it closes, against its keyword window."""
        strategy = local_strategy(self.config.keywords)
        window = self.keyword_window(page)
        keywords = extract_keywords([p.text for p in window], strategy, self.config.k, self.config.seed)
        self.set_page_keywords(page, keywords[-1], strategy)

    def closed(self) -> list[Page]:
        """Pages that take no more turns: all but the newest."""
        return self.pages[:-1]

    def pending_keywords(self) -> list[Page]:
        """Closed pages still waiting for the model strategy's keywords (none for a local strategy)."""
        if self.config.keywords not in MODEL_STRATEGIES:
            return []
        return [p for p in self.closed() if p.keywords_by != self.config.keywords]

    def pending_worth(self) -> list[Page]:
        """Closed pages the model has not yet judged, when ``worth`` is on."""
        return [p for p in self.closed() if p.worth is None] if self.config.worth else []

    def evictable(self) -> list[Page]:
        """Resident pages that may leave: never a pinned page, never the newest page."""
        newest = self.pages[-1] if self.pages else None
        return [p for p in self.resident if not p.pinned and p is not newest]

    def enforce_budget(self) -> list[Page]:
        """Past the high watermark, evict in policy order until under the low one."""
        if self.memory_tokens() <= self.config.budget:
            return []
        low = self.config.low_watermark * self.config.budget
        now = len(self.turns) - 1
        context = EvictionContext(self.turns, int(self.memory_tokens() - low))
        ordered = self.eviction.order(self.evictable(), now, context)
        # pages judged not worth remembering leave first, in the policy's order
        ordered = [p for p in ordered if p.worth is False] + [p for p in ordered if p.worth is not False]
        evicted: list[Page] = []
        for page in ordered:
            if self.memory_tokens() <= low:
                break
            if not page.keywords:
                self.set_keywords_recent(page)
            page.evicted = True
            evicted.append(page)
        return evicted

    def touch(self, page_ids: Sequence[int], now: int) -> list[Page]:
        """Record a use of these pages (a recall or a hit), for LRU, LFU and hybrid eviction."""
        touched = []
        for page_id in page_ids:
            page = self.page(page_id)
            page.access_count += 1
            page.last_access = now
            touched.append(page)
        return touched


def page_conversation(turns: Sequence[Turn], counter: TokenCounter, config: PagingConfig) -> Pager:
    """Replay ``turns`` through a fresh pager, then give every page keywords against the whole conversation."""
    pager = Pager(counter, config)
    for turn in turns:
        pager.add_turn(turn)
    pager.set_keywords(pager.pages)
    return pager
