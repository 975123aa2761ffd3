"""The project's text toolkit: splitting text into words, stop words, stemming and content words.

Keywords, page boundaries, BM25 ranking, small-talk detection, citations and the evaluation's
retrievers all compare words; they compare them with the one tokenizer and the one stop-word list
here, so a word that counts for one of them counts the same way for the others. Stdlib only.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

from . import lexicon
from .choices import Stemmer

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

# Character classes (for use inside ``[...]``): Han, kana, and Lucene's CJK bigram scripts.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\U00020000-\U0002ebef"
KANA = "\u3040-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f"
CJK = HAN + KANA + "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
LATIN = rf"[^\W_{CJK}]+"  # a run of letters or digits of a spaced script
POSSESSIVE = re.compile(r"'s$")
# A name written with a capital mid-sentence ("my accountant is Ana Lopez"): a fact's value, not its slot
NAME_MID_SENTENCE = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-ZÀ-Þ][^\W\d_]+(?:\s[A-ZÀ-Þ][^\W\d_]+)*\b")
CONTACT = re.compile(r"(?<!\w)\+?\(?\d(?:[\s().-]{0,2}\d){6,14}(?!\w)|[\w.+-]+@[\w-]+(?:\.[\w-]+)+")  # a phone, an e-mail

_JOINED_LATIN = rf"{LATIN}(?:(?:['’]|(?<=\d)[.,](?=\d)){LATIN})*"
_TOKEN = re.compile(rf"{_JOINED_LATIN}|[{CJK}]+")
_CJK_RUN = re.compile(rf"[{CJK}]+")


# -- words ------------------------------------------------------------------------------------------
def tokenize_words(text: str) -> list[str]:
    """Split text into comparable words; the one tokenizer BM25, overlap, Jaccard and keywords share.

    Latin words are lower-cased (possessive 's and thousands commas dropped, so "Caroline's"
    matches "Caroline" and "$1,200" matches "1200"). CJK has no spaces, so each run becomes
    overlapping character bigrams; a run of one or two characters is kept whole.
    """
    words: list[str] = []
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text)):
        if _CJK_RUN.fullmatch(token):
            words.extend(cjk_bigrams(token))
        else:
            words.append(POSSESSIVE.sub("", token.lower().replace("’", "'")).replace(",", ""))
    return words


def cjk_bigrams(run: str) -> list[str]:
    """Overlapping character pairs: a dictionary-free stand-in for CJK word segmentation."""
    return [run] if len(run) <= 2 else [run[i : i + 2] for i in range(len(run) - 1)]


def is_stopword(word: str) -> bool:
    """A stop word in any case, with or without a possessive 's ("Everyone's")."""
    lowered = word.lower().replace("’", "'")
    return lowered in STOPWORDS or POSSESSIVE.sub("", lowered) in STOPWORDS


# -- stemming ---------------------------------------------------------------------------------------
def fold_plural(word: str) -> str:
    """Fold plain English plurals so "peanut" and "peanuts" count as one term."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def light_stem(word: str) -> str:
    """Plurals, -ed and -ing, and a final e folded: "painted", "painting", "paints" -> "paint";
    "hike", "hiking" -> "hik". Crude, but only ever compared with itself (BM25's terms)."""
    if not (word.isascii() and word.isalpha()) or len(word) <= 3:
        return word
    if len(word) > 4 and word.endswith("ied"):
        return word[:-3] + "y"
    word = fold_plural(word)
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("eed"):
            word = word[: -len(suffix)]
            if word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> run
            break
    if len(word) >= 4 and word.endswith("e"):
        word = word[:-1]
    return word


STEMMERS: dict[Stemmer, Callable[[str], str]] = {Stemmer.NONE: lambda w: w, Stemmer.PLURAL: fold_plural,
                                                  Stemmer.LIGHT: light_stem}


# -- content words ----------------------------------------------------------------------------------
@lru_cache(maxsize=1 << 16)
def content_words(text: str, stemmer: str = "none") -> tuple[str, ...]:
    """The words that can tell texts apart: ``tokenize_words`` without stop words, stemmed by
    ``stemmer`` (a ``Stemmer``); BM25's terms with ``light``.

    Cached: a simulation grid and a conversation's BM25 index see the same texts again and again.
    """
    stem = STEMMERS[stemmer]
    return tuple(stem(w) for w in tokenize_words(text) if w not in STOPWORDS)


@lru_cache(maxsize=1 << 16)  # keyword extraction asks for the key of every word it weighs
def term_key(term: str) -> str:
    """The identity of a term: "Peanuts" and "peanut" have one key (case, plural and punctuation
    differences do not make a new term)."""
    return " ".join(fold_plural(word) for word in tokenize_words(term))


def is_small_talk(text: str) -> bool:
    """A greeting or an acknowledgement: at most one content word ("thanks!", "ok, sounds good")."""
    return len(content_words(text)) <= 1


# -- what kind of sentence ----------------------------------------------------------------------------
_QUESTION_START = lexicon.pattern("question_start")  # a wh-word or an auxiliary first
_RECALL_PHRASE = lexicon.pattern("recall_phrase")  # "remind me", "do you remember", "tell me again"
# sentence ends: a stop (or a stop and the quotation mark or bracket it closes: "... 'I have a cat.' My sister
# ..."), then space and a capital or a quote (not "3.5", "a.b@c.d" or "Dr. Patel")
SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?…])(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bSt\.)(?<!\bMrs\.)(?<!\bProf\.)"
                            r"|(?<=[.!?…][\"”’')\]]))\s+(?=[\"“'(\[]?[A-Z])")
_FIRST_PERSON = lexicon.pattern("first_person")  # the speaker speaking of themselves
_MAX_SENTENCE = 2000  # a fact is stated in a sentence, not a pasted page: longer runs are not read for this


@lru_cache(maxsize=1 << 16)
def is_question(text: str) -> bool:
    """A question form: ends with a question mark, starts with a wh-word or an auxiliary, or asks to be
    reminded ("remind me", "do you remember", "what was")."""
    stripped = text.strip().rstrip("\"')]}»” ")
    return (stripped.endswith(("?", "？")) or bool(_QUESTION_START.match(stripped))
            or bool(_RECALL_PHRASE.search(stripped)))


@lru_cache(maxsize=1 << 16)  # the ranking asks it of every candidate turn, question after question
def asks_nothing(text: str) -> bool:
    """No sentence of ``text`` has a question's form (a question mark, or a wh-word or auxiliary first; a
    lead-in such as "Before I forget, one thing." asks nothing)."""
    return not any(has_question_form(s) for s in sentences(text[:4 * _MAX_SENTENCE]))


def has_question_form(sentence: str) -> bool:
    """Whether one sentence has a question's form: a question mark, or a wh-word or an auxiliary first."""
    stripped = sentence.strip().rstrip("\"')]}»” ")
    return stripped.endswith(("?", "？")) or bool(_QUESTION_START.match(stripped))


def sentences(text: str) -> list[str]:
    """``text`` cut at sentence ends (``SENTENCE_BREAK``), each piece as written."""
    return [s for s in SENTENCE_BREAK.split(text) if s.strip()]


def is_self_statement(sentence: str) -> bool:
    """A sentence in which the speaker states something about themselves: a first person, and no question
    ("I'm allergic to peanuts", "My landlord is Omar Haddad", "We go camping every June")."""
    sentence = sentence.strip()
    return (bool(sentence) and len(sentence) <= _MAX_SENTENCE and not is_question(sentence)
            and bool(_FIRST_PERSON.search(sentence)))
