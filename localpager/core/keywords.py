"""Local keyword extraction for page bookmarks such as ``[p3:allergy,peanut,EpiPen]``.

A bookmark is an index, not a summary: a few short, specific terms (names, numbers, money,
dates, rare words) let the model tell which evicted page to page back in. Everything here is
stdlib-only and deterministic: no model, no network.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .choices import DEFAULT_KEYWORDS, KeywordStrategy, choose
from .records import ROLES
from .text import (
    HAN,
    LATIN,
    STOPWORDS,
    cjk_bigrams,
    content_words,
    is_question,
    is_self_statement,
    is_stopword,
    sentences,
    term_key,
    tokenize_words,
)

Extractor = Callable[[Sequence[str], int, int], list[list[str]]]  # (page texts, k, seed) -> keywords per page

DEFAULT_KEYWORDS_PER_PAGE = 4

# Weight of one occurrence by the form of the term: the more specific the form, the heavier.
_NAME = _CONTACT = _MONEY_W = 3.0
_DATE_W = 2.5
_KATAKANA_W = 2.0
_HAN_WHOLE, _HAN_BIGRAM = 1.5, 1.0
_SPEAKER_DAMPING = 0.25  # a speaker's own name shows up on every page: weak evidence for this one
_FALLBACK = 0.1
# What someone tells is what a later question asks for. A term's weight is multiplied by its sentence's:
# a statement about oneself ("I'm allergic to sesame") in a turn that asks nothing, another statement
# ("The team sync is on Monday at 9"), a statement beside a question ("I'm making risotto. Nuts on top?").
# Questions and an assistant's lines keep 1. Chosen on the generated tuning set (bookmark_fact_coverage,
# fixed_20 pages; benchmarks/bookmark_coverage.py): no boost 0.40, these 0.92; 8/8/2 and 6/3/2 0.90.
SELF_BOOST, OTHER_BOOST, MIXED_BOOST = 8.0, 4.0, 2.0
_MAX_CHARS = 40

_WORD = re.compile(rf"{LATIN}(?:(?:[-'’]|(?<=\d)[.,](?=\d)){LATIN})*")  # hyphenated words stay one

# At most six thousands groups: a chain of them (1,000,000,…) is tried from each group, so an unbounded
# one made a long run quadratic.
_NUM = r"\d+(?:,\d{3}){0,6}(?:\.\d+)?"
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_URL = re.compile(r"(?:https?://|www\.)(?:www\.)?(?P<kw>[^/\s:?#]+)\S*")
# Starts only where a run of address characters starts: tried from every character of a long run of
# letters, digits, dots or dashes it scanned the rest of the run each time (a 25 KB turn took 7.6 s).
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MONEY = re.compile(
    rf"[$€£¥₹]\s?{_NUM}(?:\s?(?:[kKmM]|bn|million|billion|thousand)\b)?"
    rf"|\b{_NUM}\s?(?i:k\s)?(?i:dollars?|bucks|euros?|pounds?|usd|eur|gbp|rmb|yuan|yen)\b"
)
_DATE = re.compile(
    rf"\b(?:{_MONTH}\s+{_DAY}(?:,?\s+\d{{4}})?|{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?"
    rf"|{_MONTH},?\s+\d{{4}}|\d{{4}}-\d{{1,2}}-\d{{1,2}}|\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?"
    r"|\d{1,2}(?:[:.]\d{2})?\s?(?i:[ap]\.?m\.?)|\d{1,2}:\d{2}"
    r"|(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?)\b"
)
# a number with its unit: "9 units" of insulin, "10 mg", "5 km" (a bare "9" says little)
_QUANTITY = re.compile(
    rf"\b{_NUM}\s?(?i:mg|mcg|µg|ml|kg|g|lbs?|cm|mm|km|mi|miles?|units?|pills?|tablets?|capsules?|puffs?|drops?|%)(?!\w)")
_PHONE = re.compile(r"(?<!\w)\+?\(?\d(?:[\s().-]{0,2}\d){6,}(?!\w)")
_CJK_QUANTITY = re.compile(
    r"(?:上午|下午|晚上|早上|中午|凌晨|午前|午後)?"
    rf"(?:(?<!\d){_NUM}\s?[年月日号號点點时時分秒半元块塊円万萬亿億千百个個岁歳才天周週层階楼樓位人次件张張%]+)+"
    rf"|(?<!\d){_NUM}\s?(?:公斤|公里|美元|人民币|ドル|キロ|メートル)"  # a number starts where its digits start
)
_CJK_WEEKDAY = re.compile(
    r"(?:下|上|这|這|本|今|来|來)?(?:个|個)?(?:星期|礼拜|禮拜|周|週)[一二三四五六日天]|[月火水木金土日]曜日?"
)
_PATTERNS = (  # most specific first: each masks its matches from the ones after it
    (_URL, _CONTACT),
    (_EMAIL, _CONTACT),
    (_MONEY, _MONEY_W),
    (_QUANTITY, _DATE_W),
    (_DATE, _DATE_W),
    (_PHONE, _CONTACT),
    (_CJK_QUANTITY, _DATE_W),
    (_CJK_WEEKDAY, _DATE_W),
)
_MASK = "\x00"  # stands in for a matched span: neither a word, a space nor a sentence end
# Longer than any e-mail, number, date or phone: a run this long without a space is pasted data. The patterns
# after the URLs never see one, so none of them can take more than linear time on any text (tried from each
# character of a long run, a pattern that scans to the run's end is quadratic: a 1 MB turn never finished).
_MAX_RUN = 256
_LONG_RUN = re.compile(rf"(?<![^\s{_MASK}])[^\s{_MASK}]{{{_MAX_RUN + 1},}}")  # tried only where a run starts

_KATAKANA_WORD = re.compile(r"[ァ-ヺ][ァ-ヺー]+(?:・[ァ-ヺー]+)*")
_HAN_RUN = re.compile(rf"[{HAN}]+")
_HAN_FUNCTION_CHARS = re.compile("[的了着吗呢吧啊呀哦嗯么我你他她它们是在和与就也都这那把被给让很还又再才不没有一个对得私]")
_SPEAKER_PREFIX = re.compile(r"^\s*([^\W\d_][\w.'’-]*(?:[ \t][\w.'’-]+){0,2})\s*[:：]")
_SENTENCE_BREAK = re.compile(r"[.!?…:;\"“]")
_TITLES = frozenset({"dr", "mr", "mrs", "ms", "prof", "st", "mt"})
_FORBIDDEN = re.compile(r"[,\[\]:;(){}<>\n\r\t，：；、【】「」『』（）《》]+")


def _clean(surface: str) -> str:
    """Make a term safe inside ``[p3:kw1,kw2]``: no separators, brackets or newlines.

    Every occurrence of every word is cleaned: the short ones are remembered (a pasted run of 500,000
    words took seconds here); a long one is not kept in memory for it."""
    return _clean_short(surface) if len(surface) <= _MAX_CHARS * 4 else _cleaned(surface)


@lru_cache(maxsize=1 << 14)
def _clean_short(surface: str) -> str:
    return _cleaned(surface)


def _cleaned(surface: str) -> str:
    text = re.sub(r"(?<=\d),(?=\d{3})", "", surface)
    text = re.sub(r"(?<=\d)[:：](?=\d)", ".", text)  # 3:30pm -> 3.30pm
    text = " ".join(_FORBIDDEN.sub(" ", text).split()).strip(" '\"-")
    return text[:_MAX_CHARS].rstrip()


def _is_stop(word: str) -> bool:
    """Too common or too short to tell pages apart."""
    return len(word.lower()) < 2 or is_stopword(word)


@dataclass
class _Term:
    """One candidate keyword of a page: its summed weight, occurrences and written forms."""

    score: float = 0.0
    count: int = 0
    forms: Counter[str] = field(default_factory=Counter)
    peak: float = 0.0  # the weight of its weightiest occurrence

    @property
    def display(self) -> str:
        """The form that carried most weight, so "EpiPen" beats a sentence-initial "epipen"."""
        return self.forms.most_common(1)[0][0]


@dataclass
class _Bag:
    """The candidate terms of one page, keyed by ``term_key``."""

    noise: frozenset[str]
    terms: dict[str, _Term] = field(default_factory=dict)
    boost: float = 1.0  # the weight of the sentence being read (SELF_BOOST, ...)

    def add(self, surface: str, weight: float) -> None:
        """Count one occurrence; speaker names are damped because every page has them."""
        surface = _clean(surface)
        key = term_key(surface)
        if not key:
            return
        term = self.terms.setdefault(key, _Term())
        weight *= (_SPEAKER_DAMPING if key in self.noise else 1.0) * self.boost
        term.score += weight
        term.peak = max(term.peak, weight)
        term.count += 1
        term.forms[surface] += weight


def _speaker_names(page_texts: Sequence[str]) -> frozenset[str]:
    """Who is talking: the roles, the name opening each page and any name opening two lines.

    A continuation line such as "Note: ..." opens at most one line, so it keeps its first word.
    """
    openers: Counter[str] = Counter()
    firsts: set[str] = set()
    for text in page_texts:
        lines = [line for line in text.splitlines() if line.strip()]
        for i, line in enumerate(lines):
            if match := _SPEAKER_PREFIX.match(line):
                name = match.group(1).lower()
                openers[name] += 1
                if i == 0:
                    firsts.add(name)
    return frozenset(ROLES) | firsts | {name for name, n in openers.items() if n > 1}


def _noise_keys(speakers: frozenset[str]) -> frozenset[str]:
    """Term keys of the speakers' names, whole and word by word."""
    keys = {term_key(name) for name in speakers}
    return frozenset(keys | {word for key in keys for word in key.split()})


def _body(line: str, speakers: frozenset[str]) -> str:
    """A line without its speaker prefix, which starts every line and so marks no page."""
    return _split_speaker(line, speakers)[1]


def _split_speaker(line: str, speakers: frozenset[str]) -> tuple[str | None, str]:
    """(the speaker's name in lower case, or None, and the rest of the line)."""
    match = _SPEAKER_PREFIX.match(line)
    if match and match.group(1).lower() in speakers:
        return match.group(1).lower(), line[match.end() :]
    return None, line


def _take_patterns(body: str, bag: _Bag) -> str:
    """Add URLs, emails, money, dates, phones and CJK quantities; mask them so words skip them.

    URLs are taken first and whole, however long; the patterns after them read the text with every run
    longer than ``_MAX_RUN`` hidden (words still read it)."""
    seen = body  # what the patterns read
    for pattern, weight in _PATTERNS:
        matches = list(pattern.finditer(seen))
        for match in matches:
            bag.add(match.groupdict().get("kw") or match.group(), weight)
        body, seen = _masked(body, matches), _masked(seen, matches)
        if pattern is _URL:
            seen = _masked(seen, list(_LONG_RUN.finditer(seen)))
    return body


def _masked(text: str, matches: Sequence[re.Match[str]]) -> str:
    """``text`` with each match's span replaced by as many ``_MASK`` characters."""
    if not matches:
        return text
    parts, last = [], 0
    for match in matches:
        parts += [text[last : match.start()], _MASK * (match.end() - match.start())]
        last = match.end()
    return "".join(parts) + text[last:]


def _cjk_terms(body: str, bag: _Bag) -> None:
    """CJK has no capitals or spaces: katakana runs (loanwords, names) count whole; Han runs,
    cut at function characters, count short segments whole and every segment's bigrams."""
    for word in _KATAKANA_WORD.findall(body):
        bag.add(word, _KATAKANA_W)
    for run in _HAN_RUN.findall(body):
        for segment in _HAN_FUNCTION_CHARS.split(run):
            _han_segment(segment, bag)


def _han_segment(segment: str, bag: _Bag) -> None:
    """A short segment is probably a word; a long one is a phrase whose repeated bigrams win."""
    if 2 <= len(segment) <= 4 and segment not in STOPWORDS:
        bag.add(segment, _HAN_WHOLE)
    if len(segment) > 2:
        for bigram in cjk_bigrams(segment):
            if bigram not in STOPWORDS:
                bag.add(bigram, _HAN_BIGRAM)


def _words(body: str) -> list[tuple[str, bool, bool]]:
    """(word, starts a sentence, joined to the previous word by spaces) for each Latin word."""
    words: list[tuple[str, bool, bool]] = []
    prev_end, prev_word = 0, ""
    for match in _WORD.finditer(body):
        gap = body[prev_end : match.start()]
        after_title = prev_word.lower() in _TITLES and gap.strip() == "."
        initial = not prev_word or (bool(_SENTENCE_BREAK.search(gap)) and not after_title)
        joined = bool(prev_word) and (gap.isspace() or after_title)
        words.append((match.group(), initial, joined))
        prev_end, prev_word = match.end(), match.group()
    return words


def _is_capitalised(word: str) -> bool:
    """Starts upper-case and has more than one letter ("I" and "A" are not names)."""
    return word[0].isupper() and sum(c.isalpha() for c in word) > 1


def _latin_terms(body: str, bag: _Bag) -> None:
    """Group capitalised words into name runs ("New York", "Dr. Patel"); weigh the rest singly."""
    run: list[tuple[str, bool]] = []
    for word, initial, joined in _words(body):
        if run and not (joined and _is_capitalised(word)):
            _name_run(run, bag)
            run = []
        if _is_capitalised(word):
            run.append((word, initial))
        else:
            _word(word, initial, bag)
    if run:
        _name_run(run, bag)


def _name_run(run: list[tuple[str, bool]], bag: _Bag) -> None:
    """Trim stopwords off a run's ends ("The Beatles"); two or three words left make a name."""
    while run and _is_stop(run[0][0]):
        run = run[1:]
    while run and _is_stop(run[-1][0]):
        run = run[:-1]
    if 2 <= len(run) <= 3:
        bag.add(" ".join(word for word, _ in run), _NAME * (1 + 0.25 * (len(run) - 1)))
    else:
        for word, initial in run:
            _word(word, initial, bag)


def _word(word: str, initial: bool, bag: _Bag) -> None:
    """Weigh one word by its form: names and codes are specific, longer plain words rarer."""
    if _is_stop(word):
        return
    letters = [c for c in word if c.isalpha()]
    if any(c.isdigit() for c in word):
        bag.add(word, 2.0 if letters else 0.5 if len(word) == 1 else 1.5)
    elif _looks_like_name(word, initial):
        bag.add(word, _NAME)
    else:
        bag.add(word.lower(), min(1.2, 0.4 + len(word) / 10))


def _looks_like_name(word: str, initial: bool) -> bool:
    """Mixed case (EpiPen) or caps (NASA) anywhere, or a capital not owed to a sentence start."""
    if any(c.isupper() for c in word[1:]) and any(c.islower() for c in word):
        return True
    return _is_capitalised(word) and (word.isupper() or not initial)


def _page_terms(page_texts: Sequence[str]) -> list[dict[str, _Term]]:
    """Candidate terms of every page, with the conversation's speakers recognised throughout."""
    speakers = _speaker_names(page_texts)
    noise = _noise_keys(speakers)
    return [_extract_terms(text, speakers, noise) for text in page_texts]


# 512 pages: a closing page's keyword window (pager.KEYWORD_WINDOW) and the final pass over a long conversation
# hit it; 4,096 held about 0.7 GB of terms when an export of 60,000 turns was ingested (benchmarks/import_speed.py)
@lru_cache(maxsize=512)
def _extract_terms(text: str, speakers: frozenset[str], noise: frozenset[str]) -> dict[str, _Term]:
    """All candidate terms of one page; plain tokens stand in when nothing better exists."""
    bag = _Bag(noise)
    lines = [_split_speaker(line, speakers) for line in text.splitlines()]
    bodies = [body for _, body in lines]
    for speaker, body in lines:
        parts = sentences(body) or [body]
        asks = any(p.rstrip().endswith(("?", "？")) for p in parts)
        for sentence in parts:
            # what someone says about themselves is what a later question asks for: "I'm allergic to
            # peanuts" outweighs "Would chopped nuts work on top?" (an assistant's "I'll remember" does not)
            bag.boost = 1.0
            if speaker != "assistant" and not is_question(sentence):
                bag.boost = MIXED_BOOST if asks else SELF_BOOST if is_self_statement(sentence) else OTHER_BOOST
            sentence = _take_patterns(sentence, bag)
            _cjk_terms(sentence, bag)
            _latin_terms(sentence, bag)
    bag.boost = 1.0
    for source in ("\n".join(bodies), text):
        if bag.terms:
            break
        for word in _fallback_words(source):
            bag.add(word, _FALLBACK)
    return bag.terms


def _fallback_words(text: str) -> list[str]:
    """Content words, or all words when there are none, so filler pages still get a keyword."""
    return list(content_words(text)) or tokenize_words(text)


def _select(
    terms: dict[str, _Term], k: int, rank: Callable[[str, _Term], tuple[float, ...]]
) -> list[str]:
    """Best-ranked terms first (ties in page order), skipping those a chosen keyword covers."""
    chosen: list[str] = []
    covered: list[set[str]] = []
    for key, term in sorted(terms.items(), key=lambda item: rank(*item), reverse=True):
        words = _key_words(key, term.display)
        if any(words <= seen for seen in covered):
            continue
        chosen.append(term.display)
        covered.append(words)
        if len(chosen) == k:
            break
    return chosen


def _key_words(key: str, display: str) -> set[str]:
    """The words a term stands for; an e-mail address stands for its local part's words, so that
    "maria.chen@example.com" adds nothing to a bookmark that already holds "Maria Chen"."""
    if "@" in display:
        return set(term_key(display.split("@", 1)[0]).split()) or set(key.split())
    return set(key.split())


def _random(page_texts: Sequence[str], k: int, seed: int) -> list[list[str]]:
    """Baseline: k distinct content words per page, seeded by seed and the page text alone."""
    speakers = _speaker_names(page_texts)
    keywords = []
    for text in page_texts:
        body = "\n".join(_body(line, speakers) for line in text.splitlines())
        words = list(dict.fromkeys(_fallback_words(body) or _fallback_words(text)))
        rng = random.Random(f"{seed}\x00{text}")  # str seeds hash with sha512: stable across runs
        keywords.append([_clean(w) for w in rng.sample(words, min(k, len(words)))])
    return keywords


def _heuristic(page_texts: Sequence[str], k: int, seed: int) -> list[list[str]]:
    """Rank each page's terms by their weightiest occurrence (form times sentence), times how rare the term
    is among the pages given; deterministic, so seed is unused.

    The weightiest occurrence, not the sum: small talk repeats its topic ("risotto" in the question and in
    the answer) while a fact is stated once. Measured with the boosts above: the sum 0.90, the peak 0.92."""
    pages = _page_terms(page_texts)
    df = Counter(key for terms in pages for key in terms)
    n = len(pages)

    def rank(key: str, term: _Term) -> tuple[float, float]:
        return term.peak * (1 + math.log((1 + n) / df[key])), term.score

    return [_select(terms, k, rank) for terms in pages]


def _tfidf(page_texts: Sequence[str], k: int, seed: int) -> list[list[str]]:
    """Rank by term frequency times rarity among the OTHER pages; heuristic weight breaks ties.

    idf = log((2 + others) / (1 + pages among the others holding the term)) stays positive, so a
    lone page ranks by frequency and a term on every page still fills an empty slot.
    """
    pages = _page_terms(page_texts)
    df = Counter(key for terms in pages for key in terms)
    others = len(pages) - 1

    def rank(key: str, term: _Term) -> tuple[float, float]:
        return term.count * math.log((2 + others) / df[key]), term.score

    return [_select(terms, k, rank) for terms in pages]


STRATEGIES: dict[KeywordStrategy, Extractor] = {  # the local strategies
    KeywordStrategy.RANDOM: _random,
    KeywordStrategy.HEURISTIC: _heuristic,
    KeywordStrategy.TFIDF: _tfidf,
}
# A strategy that asks the local model (``MODEL_STRATEGIES``, run by ``localpager.runtime.assist``): until the
# model has run, a page carries the keywords of ``LOCAL_FALLBACK``: the model runs after an answer or after
# ingest, never before one.
LOCAL_FALLBACK = KeywordStrategy.HEURISTIC


def check_strategy(strategy: str) -> KeywordStrategy:
    """``strategy`` as a ``KeywordStrategy``; ValueError naming the known ones otherwise."""
    return choose(KeywordStrategy, strategy, "keyword strategy")


def local_strategy(strategy: str) -> str:
    """The model-free strategy that gives a page its keywords now: itself, or the fallback."""
    check_strategy(strategy)
    return strategy if strategy in STRATEGIES else LOCAL_FALLBACK


def candidate_terms(page_texts: Sequence[str], limit: int = 24) -> list[list[str]]:
    """Each page's candidate keywords, best first by heuristic weight: what a model may choose from.

    Grounding the model's choice in the page's own terms means a small model cannot invent a keyword
    that is not in the page. Terms holding a double quote or a backslash are left out (they would
    need escaping inside a JSON string).
    """
    pages = _page_terms(page_texts)
    out = []
    for terms in pages:
        chosen = _select(terms, len(terms), lambda _, t: (t.score,))
        out.append([t for t in chosen if '"' not in t and "\\" not in t][:limit])
    return out


def keyword_information(page_texts: Sequence[str], keywords: Sequence[Sequence[str]]) -> float:
    """How much the keywords tell their pages apart: mean normalised idf of each page's keywords.

    1.0 when every keyword occurs on its own page only, 0.0 when every keyword occurs on every page.
    ``auto`` keeps the heuristic keywords (plus one from the model) when this is high.
    """
    n = len(page_texts)
    if n < 2:
        return 1.0
    bags = [set(terms) for terms in _page_terms(page_texts)]
    scores = []
    for kws in keywords:
        for kw in kws:
            df = max(1, sum(term_key(kw) in bag for bag in bags))
            scores.append(math.log(n / df) / math.log(n))
    return sum(scores) / len(scores) if scores else 0.0


def extract_keywords(
    page_texts: Sequence[str], strategy: str = DEFAULT_KEYWORDS, k: int = DEFAULT_KEYWORDS_PER_PAGE, seed: int = 0
) -> list[list[str]]:
    """Keywords for each page of one conversation, in page order.

    The whole conversation is passed because tfidf and speaker detection compare its pages.
    Raises ValueError naming the known strategies for an unknown name, or for k < 1.
    """
    strategy = check_strategy(strategy)
    if strategy.uses_model:
        raise ValueError(f"keyword strategy '{strategy}' needs the model: use localpager.runtime.assist.Assistant")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return STRATEGIES[strategy](list(page_texts), k, seed)
