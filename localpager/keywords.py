"""Local keyword extraction for page bookmarks such as ``[p3:allergy,peanut,EpiPen]``.

A bookmark is an index, not a summary: a few short, specific terms (names, numbers, money,
dates, rare words) let the model tell which evicted page to page back in. Everything here is
stdlib-only and deterministic: no model, no network.
"""

from __future__ import annotations

from functools import lru_cache

import math
import random
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .records import ROLES

KeywordStrategy = Callable[[Sequence[str], int, int], list[list[str]]]

DEFAULT_KEYWORDS = "heuristic"
DEFAULT_K = 4

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against ago all almost along already also although always am an
    and another any anybody anyone anything anyway anyways are aren't around as at away back be
    because been before being below between both but by can can't cannot could couldn't did
    didn't do does doesn't doing don't done down during each either else enough etc even ever
    every everybody everyone everything few for from further get gets getting go goes going gone
    got gotten had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
    herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it'd
    it'll it's its itself just least less let let's like likely lot lots made make makes making
    many may maybe me might mine more most much must mustn't my myself near need needs neither
    never no nobody none nor not nothing now of off often oh ok okay on once one only onto or
    other others otherwise our ours ourselves out over own perhaps please quite rather really
    same say says said see seem seems shall shan't she she'd she'll she's should shouldn't since
    so some somebody someone something sometimes somewhat soon still such sure take takes than
    that that's the their theirs them themselves then there there's these they they'd they'll
    they're they've thing things this those though through thus to too toward towards under
    until up upon us use used very via was wasn't we we'd we'll we're we've well were weren't
    what what's whatever when when's where where's whether which while who who's whom whose why
    why's will with within without won't would wouldn't yes yet you you'd you'll you're you've
    your yours yourself yourselves
    im ive id ill youre youve youll theyre dont doesnt didnt cant wont isnt wasnt arent thats
    whats theres lets gonna wanna gotta kinda sorta
    yeah yep yup yea nope nah hi hello hey hiya bye goodbye thanks thank thx ty welcome sorry
    lol lmao haha hahaha hehe omg wow um umm uh hmm huh ah ahh aw aww ooh oops ugh yay
    great good nice cool awesome amazing wonderful fantastic perfect fine alright right wrong
    glad happy excited exactly absolutely definitely totally honestly actually basically
    literally seriously probably certainly course indeed true kind sort stuff bit pretty
    noted got it understood remember know knew think thought want wanted feel felt look looks
    looking sounds sound tell told ask asked come came went keep help let's try tried guess
    mean means talk talking today tomorrow yesterday tonight day days time times
    我们 你们 他们 她们 它们 什么 怎么 怎么样 这个 那个 这些 那些 这样 那样 这里 那里 因为 所以
    但是 可是 而且 然后 如果 虽然 还是 或者 就是 不是 没有 可以 应该 知道 觉得 现在 时候 已经
    一下 一些 一起 一定 一个 真的 好的 谢谢 没事 当然 其实 非常 比较 可能 需要 还有 自己 大家
    东西 事情 记住 记得 明白 了解 收到 好吧 注意 今天 明天 昨天 今晚
    今日 明日 昨日 本当 大丈夫 私達 承知
    """.split()
)

# Weight of one occurrence by the form of the term: the more specific the form, the heavier.
_NAME = _CONTACT = _MONEY_W = 3.0
_DATE_W = 2.5
_KATAKANA_W = 2.0
_HAN_WHOLE, _HAN_BIGRAM = 1.5, 1.0
_SPEAKER_DAMPING = 0.25  # a speaker's own name shows up on every page: weak evidence for this one
_FALLBACK = 0.1
_MAX_CHARS = 40

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\U00020000-\U0002ebef"
_KANA = "\u3040-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_CJK = _HAN + _KANA + "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"  # Lucene's CJK bigram scripts
_LATIN = rf"[^\W_{_CJK}]+"
_JOINED_LATIN = rf"{_LATIN}(?:(?:['’]|(?<=\d)[.,](?=\d)){_LATIN})*"
_TOKEN = re.compile(rf"{_JOINED_LATIN}|[{_CJK}]+")
_CJK_RUN = re.compile(rf"[{_CJK}]+")
_WORD = re.compile(rf"{_LATIN}(?:(?:[-'’]|(?<=\d)[.,](?=\d)){_LATIN})*")
_POSSESSIVE = re.compile(r"'s$")

_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_URL = re.compile(r"(?:https?://|www\.)(?:www\.)?(?P<kw>[^/\s:?#]+)\S*")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
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
_PHONE = re.compile(r"(?<!\w)\+?\(?\d(?:[\s().-]{0,2}\d){6,}(?!\w)")
_CJK_QUANTITY = re.compile(
    r"(?:上午|下午|晚上|早上|中午|凌晨|午前|午後)?"
    rf"(?:{_NUM}\s?[年月日号號点點时時分秒半元块塊円万萬亿億千百个個岁歳才天周週层階楼樓位人次件张張%]+)+"
    rf"|{_NUM}\s?(?:公斤|公里|美元|人民币|ドル|キロ|メートル)"
)
_CJK_WEEKDAY = re.compile(
    r"(?:下|上|这|這|本|今|来|來)?(?:个|個)?(?:星期|礼拜|禮拜|周|週)[一二三四五六日天]|[月火水木金土日]曜日?"
)
_PATTERNS = (  # most specific first: each masks its matches from the ones after it
    (_URL, _CONTACT),
    (_EMAIL, _CONTACT),
    (_MONEY, _MONEY_W),
    (_DATE, _DATE_W),
    (_PHONE, _CONTACT),
    (_CJK_QUANTITY, _DATE_W),
    (_CJK_WEEKDAY, _DATE_W),
)
_MASK = "\x00"  # stands in for a matched span: neither a word, a space nor a sentence end

_KATAKANA_WORD = re.compile(r"[ァ-ヺ][ァ-ヺー]+(?:・[ァ-ヺー]+)*")
_HAN_RUN = re.compile(rf"[{_HAN}]+")
_HAN_FUNCTION_CHARS = re.compile("[的了着吗呢吧啊呀哦嗯么我你他她它们是在和与就也都这那把被给让很还又再才不没有一个对得私]")
_SPEAKER_PREFIX = re.compile(r"^\s*([^\W\d_][\w.'’-]*(?:[ \t][\w.'’-]+){0,2})\s*[:：]")
_SENTENCE_BREAK = re.compile(r"[.!?…:;\"“]")
_TITLES = frozenset({"dr", "mr", "mrs", "ms", "prof", "st", "mt"})
_FORBIDDEN = re.compile(r"[,\[\]:;(){}<>\n\r\t，：；、【】「」『』（）《》]+")


def tokenize_words(text: str) -> list[str]:
    """Split text into comparable words; the one tokenizer BM25, overlap and Jaccard share.

    Latin words are lower-cased (possessive 's and thousands commas dropped, so "Caroline's"
    matches "Caroline" and "$1,200" matches "1200"). CJK has no spaces, so each run becomes
    overlapping character bigrams; a run of one or two characters is kept whole.
    """
    words: list[str] = []
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text)):
        if _CJK_RUN.fullmatch(token):
            words.extend(_bigrams(token))
        else:
            words.append(_POSSESSIVE.sub("", token.lower().replace("’", "'")).replace(",", ""))
    return words


def _bigrams(run: str) -> list[str]:
    """Overlapping character pairs: a dictionary-free stand-in for CJK word segmentation."""
    return [run] if len(run) <= 2 else [run[i : i + 2] for i in range(len(run) - 1)]


def fold_plural(word: str) -> str:
    """Fold plain English plurals so "peanut" and "peanuts" count as one term."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _key(surface: str) -> str:
    """The identity of a term: case, plural and punctuation differences do not make a new one."""
    return " ".join(fold_plural(word) for word in tokenize_words(surface))


def _clean(surface: str) -> str:
    """Make a term safe inside ``[p3:kw1,kw2]``: no separators, brackets or newlines."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", surface)
    text = re.sub(r"(?<=\d)[:：](?=\d)", ".", text)  # 3:30pm -> 3.30pm
    text = " ".join(_FORBIDDEN.sub(" ", text).split()).strip(" '\"-")
    return text[:_MAX_CHARS].rstrip()


def _is_stop(word: str) -> bool:
    """Too common or too short to tell pages apart."""
    lowered = word.lower().replace("’", "'")
    return len(lowered) < 2 or lowered in STOPWORDS or _POSSESSIVE.sub("", lowered) in STOPWORDS


@dataclass
class _Term:
    """One candidate keyword of a page: its summed weight, occurrences and written forms."""

    score: float = 0.0
    count: int = 0
    forms: Counter[str] = field(default_factory=Counter)

    @property
    def display(self) -> str:
        """The form that carried most weight, so "EpiPen" beats a sentence-initial "epipen"."""
        return self.forms.most_common(1)[0][0]


@dataclass
class _Bag:
    """The candidate terms of one page, keyed by ``_key``."""

    noise: frozenset[str]
    terms: dict[str, _Term] = field(default_factory=dict)

    def add(self, surface: str, weight: float) -> None:
        """Count one occurrence; speaker names are damped because every page has them."""
        surface = _clean(surface)
        key = _key(surface)
        if not key:
            return
        term = self.terms.setdefault(key, _Term())
        weight *= _SPEAKER_DAMPING if key in self.noise else 1.0
        term.score += weight
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
    keys = {_key(name) for name in speakers}
    return frozenset(keys | {word for key in keys for word in key.split()})


def _body(line: str, speakers: frozenset[str]) -> str:
    """A line without its speaker prefix, which starts every line and so marks no page."""
    match = _SPEAKER_PREFIX.match(line)
    if match and match.group(1).lower() in speakers:
        return line[match.end() :]
    return line


def _take_patterns(body: str, bag: _Bag) -> str:
    """Add emails, money, dates, phones and CJK quantities; mask them so words skip them."""
    for pattern, weight in _PATTERNS:
        for match in pattern.finditer(body):
            bag.add(match.groupdict().get("kw") or match.group(), weight)
        body = pattern.sub(lambda m: _MASK * len(m.group()), body)
    return body


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
        for bigram in _bigrams(segment):
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


@lru_cache(maxsize=4096)
def _extract_terms(text: str, speakers: frozenset[str], noise: frozenset[str]) -> dict[str, _Term]:
    """All candidate terms of one page; plain tokens stand in when nothing better exists."""
    bag = _Bag(noise)
    bodies = [_body(line, speakers) for line in text.splitlines()]
    for body in bodies:
        body = _take_patterns(body, bag)
        _cjk_terms(body, bag)
        _latin_terms(body, bag)
    for source in ("\n".join(bodies), text):
        if bag.terms:
            break
        for word in _content_words(source):
            bag.add(word, _FALLBACK)
    return bag.terms


def _content_words(text: str) -> list[str]:
    """Non-stopword tokens, or all tokens when there are none, so filler pages still get one."""
    tokens = tokenize_words(text)
    return [t for t in tokens if t not in STOPWORDS] or tokens


def _select(
    terms: dict[str, _Term], k: int, rank: Callable[[str, _Term], tuple[float, ...]]
) -> list[str]:
    """Best-ranked terms first (ties in page order), skipping those a chosen keyword covers."""
    chosen: list[str] = []
    covered: list[set[str]] = []
    for key, term in sorted(terms.items(), key=lambda item: rank(*item), reverse=True):
        words = set(key.split())
        if any(words <= seen for seen in covered):
            continue
        chosen.append(term.display)
        covered.append(words)
        if len(chosen) == k:
            break
    return chosen


def _random(page_texts: Sequence[str], k: int, seed: int) -> list[list[str]]:
    """Baseline: k distinct content words per page, seeded by seed and the page text alone."""
    speakers = _speaker_names(page_texts)
    keywords = []
    for text in page_texts:
        body = "\n".join(_body(line, speakers) for line in text.splitlines())
        words = list(dict.fromkeys(_content_words(body) or _content_words(text)))
        rng = random.Random(f"{seed}\x00{text}")  # str seeds hash with sha512: stable across runs
        keywords.append([_clean(w) for w in rng.sample(words, min(k, len(words)))])
    return keywords


def _heuristic(page_texts: Sequence[str], k: int, seed: int) -> list[list[str]]:
    """Rank each page's terms by the weight of their forms; deterministic, so seed is unused."""
    return [_select(terms, k, lambda _, t: (t.score,)) for terms in _page_terms(page_texts)]


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


STRATEGIES: dict[str, KeywordStrategy] = {
    "random": _random,
    "heuristic": _heuristic,
    "tfidf": _tfidf,
}
# Strategies that ask the local model (``localpager.assist``). Until the model has run, a page carries
# the keywords of ``LOCAL_FALLBACK``: the model runs after an answer or after ingest, never before one.
MODEL_STRATEGIES = ("llm-contextual", "llm-batch", "hybrid", "auto")
LOCAL_FALLBACK = "heuristic"


def check_strategy(strategy: str) -> None:
    """Raise ValueError naming the known strategies if ``strategy`` is not one of them."""
    if strategy not in STRATEGIES and strategy not in MODEL_STRATEGIES:
        known = ", ".join([*sorted(STRATEGIES), *MODEL_STRATEGIES])
        raise ValueError(f"unknown keyword strategy {strategy!r}; known: {known}")


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


def term_key(term: str) -> str:
    """Two surface forms with the same key are the same keyword ("Peanuts" and "peanut")."""
    return _key(term)


def is_small_talk(text: str) -> bool:
    """A greeting or an acknowledgement: at most one content word ("thanks!", "ok, sounds good")."""
    return len([w for w in tokenize_words(text) if w not in STOPWORDS]) <= 1


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
            df = max(1, sum(_key(kw) in bag for bag in bags))
            scores.append(math.log(n / df) / math.log(n))
    return sum(scores) / len(scores) if scores else 0.0


def extract_keywords(
    page_texts: Sequence[str], strategy: str = DEFAULT_KEYWORDS, k: int = DEFAULT_K, seed: int = 0
) -> list[list[str]]:
    """Keywords for each page of one conversation, in page order.

    The whole conversation is passed because tfidf and speaker detection compare its pages.
    Raises ValueError naming the known strategies for an unknown name, or for k < 1.
    """
    check_strategy(strategy)
    if strategy not in STRATEGIES:
        raise ValueError(f"keyword strategy {strategy!r} needs the model: use localpager.assist.Assistant")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return STRATEGIES[strategy](list(page_texts), k, seed)
