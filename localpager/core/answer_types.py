"""What kind of answer a question asks for, and what kinds of fact a turn states.

Question answering systems have long matched a question's expected answer type with the entities a
passage holds: "how much can I spend" wants an amount, "who do I call" a person, "when" a date or a time.
A small embedding model often ranks a turn that shares the question's topic above the turn that holds its
answer ("Which snack should I keep away from at the party?" is nearer to "We're hosting a party. What
snacks are easy?" than to "I'm badly allergic to sesame"), so the ranking (``ranking.rank_turns``) gives a
turn that states a fact of the asked type a bonus.

Types: amounts of money, clock times, dates (written or relative: "last Friday"), people (a name, a
phone number, an e-mail), numbers (a room, a locker, a flight), quantities (a dose), medicines, things to
avoid (allergies, intolerances, what makes one ill) and likings (favourites, loves). The cues are words
of the language, not of any data set: they were written from what the types mean, then checked on
generated conversations and LoCoMo 1-5 (``benchmarks/recall_gate.py``). Stdlib only; each pattern is
linear in the text and runs on at most ``_MAX_CHARS`` of it.
"""

from __future__ import annotations

import re
from functools import lru_cache

_MAX_CHARS = 2000

TYPES = ("money", "time", "date", "person", "place", "number", "quantity", "medicine", "avoid", "liking")

_MONTHS = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_WEEKDAYS = r"(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?s?"

# -- what a question asks for -------------------------------------------------------------------------
# Each cue asks for one of a few types: "when" is answered by a date or a time, "where" by a place or a
# number (a locker, a parking bay), "how much" by an amount, a quantity or a number. A question holding
# several cues asks for each ("which medicine must I never take": a medicine, and something to avoid).
_WH_START = r"(?:^|[.?!;:,]\s*|\b(?:me|us|know|remember|recall|say|tell|wonder|ask)\s+)"  # "when" asked, not "when I order"
_ASKS: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(
        r"\b(?:how much|what|how pricey|how expensive|highest|most|max(?:imum)?|limit|cap|ceiling)\b.{0,60}?"
        r"\b(?:pay|spend|afford|cost|costs|budget|price|prices|rent|money|cash|charge|fee|salary|earn|save|saved|"
        r"splurge|allowance|handle|shell out|set aside|put aside|earmark\w*|allocat\w*|allow\w*)\b"
        r"|\b(?:afford|budget|price range|spending (?:cap|limit)|how pricey|how expensive|earmark\w*|set aside|"
        r"put aside)\b", re.I), frozenset({"money"})),
    (re.compile(r"\b(?:how much|how many|what amount|which amount|what dose|dosage|how big a dose)\b", re.I),
     frozenset({"money", "quantity", "number"})),
    (re.compile(rf"{_WH_START}when\b", re.I), frozenset({"date", "time"})),
    (re.compile(r"\b(?:what time|at what time|which time|what hour|how early|how late|the time of|time of the)\b"
                r"|\bmy (?:[\w'-]+ )?time\b", re.I), frozenset({"time"})),
    (re.compile(
        r"\b(?:what date|which date|what day|which day|by when|how long ago|what year|which year|what month|"
        r"which month|deadline|due|cutoff|cut-off|last day)\b", re.I), frozenset({"date"})),
    (re.compile(
        r"\b(?:who|whom|whose|which (?:person|doctor|vet|dentist|plumber|electrician|accountant|lawyer|agent|"
        r"landlord|teacher|nurse|specialist|friend)|(?:call|phone|ring|text|contact|email|e-mail|write to|"
        r"reach)\b(?!\s+(?:me|us)\b))", re.I), frozenset({"person"})),  # "text me a reminder" asks no one
    (re.compile(rf"{_WH_START}where\b|\bwhich (?:city|country|town|place|restaurant|hotel|school|store|shop|park|"
                r"street|state)\b", re.I), frozenset({"place", "number"})),
    (re.compile(
        r"\b(?:what|which) (?:number|room|locker|flight|seat|gate|spot|space|bay|platform|cubby|door|code|pin|"
        r"table|apartment|unit|level|floor|plane|train|bus)\b|\bnumber\b", re.I), frozenset({"number"})),
    (re.compile(
        r"\b(?:medicine|medication|meds|pill|pills|prescription|prescribe|drug|drugs|tablet|tablets|statin|"
        r"dose|inhaler|treatment|take for|reach for)\b", re.I), frozenset({"medicine"})),
    (re.compile(
        r"\b(?:avoid|keep away|stay away|steer clear|never|must not|mustn't|shouldn't|should not|can't|"
        r"cannot|can not|leave (?:off|out)|off my plate|allerg\w*|react\w*|unsafe|safe for me|not (?:eat|have|"
        r"take|give|serve|bring|prescribe|adopt)|sneeze|itch\w*|make me (?:sick|ill)|warn\w*|watch out|"
        r"careful|hospital|ruled out|rule out|off limits|off-limits|keep off|off the (?:cards|table|menu)|no-go|"
        r"not an option|stay out|keep out)\b", re.I), frozenset({"avoid"})),
    (re.compile(
        r"\b(?:favou?rite|fave|enjoy|like|love|prefer|happiest|happy|delight|cheer|brighten|treat me|choose|pick|"
        r"(?:bring|get|buy|book|play|cook|order|paint) (?:me|for me|for my)|gift|present|bouquet|surprise|go-to|"
        r"(?:listen|listening|watch|eat|drink|read|order|play|wear)\w* (?:to )?(?:most|usually|always)|"
        r"(?:usually|always) (?:have|listen|play|order|pick|choose|go for|put on)|top (?:genre|pick|choice))\b",
        re.I), frozenset({"liking"})),
)

# -- what a turn states -------------------------------------------------------------------------------
_NUMBER = r"\d+(?:[,.]\d+){0,4}"
_STATES = {
    "money": re.compile(
        rf"[$€£¥₹]\s?{_NUMBER}|\b{_NUMBER}\s?(?:k\s)?(?:dollars?|bucks|euros?|pounds|usd|eur|gbp|grand)\b", re.I),
    "time": re.compile(
        r"\b\d{1,2}(?:[:.]\d{2})?\s?(?:[ap]\.?m\.?)(?!\w)|\b\d{1,2}:\d{2}\b|\b(?:noon|midnight|o'clock)\b", re.I),
    "date": re.compile(
        rf"\b{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}\b"
        rf"|\b{_WEEKDAYS}\b|\b(?:19|20)\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?\b"
        r"|\b(?:yesterday|today|tonight|tomorrow|last (?:week|weekend|month|year|night)|next (?:week|weekend|"
        r"month|year)|this (?:week|weekend|month|year)|\w+ (?:days|weeks|months|years) ago)\b", re.I),
    "person": re.compile(
        r"\b[A-Z][a-z]+(?:\s[A-Z][a-z]+)+\b|\b(?:Dr|Mr|Mrs|Ms|Prof)\.?\s[A-Z][a-z]+"
        r"|(?<!\w)\+?\(?\d(?:[\s().-]{0,2}\d){6,14}(?!\w)|(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,4}"),
    "place": re.compile(r"\b(?:in|at|to|from|near|visit(?:ed|ing)?|moved to)\s+(?:the\s)?[A-Z][a-z]+"),
    "number": re.compile(
        r"\b(?:room|locker|flight|seat|gate|spot|space|bay|platform|cubby|door|code|pin|table|apartment|unit|"
        r"level|floor|no\.?|number|#)\s?[A-Z]{0,3}-?\d+\b|\b[A-Z]{1,3}\s?-?\d{1,5}\b|\b\d{3,5}\b"),
    "quantity": re.compile(
        rf"\b{_NUMBER}\s?(?:mg|mcg|µg|ml|g|kg|units?|pills?|tablets?|capsules?|puffs?|drops?|doses?|cups?|"
        r"glasses?|hours?|minutes?|km|miles?|lbs?|%)(?!\w)", re.I),
    "medicine": re.compile(
        r"\b(?:\w+(?:pril|olol|sartan|statin|triptan|cillin|mycin|cycline|azole|prazole|dipine|formin|oxetine|"
        r"azepam|codone|profen|amol|semide|thiazide|tidine|mab|vir)|insulin|aspirin|ibuprofen|paracetamol|"
        r"acetaminophen|naproxen|codeine|antibiotics?|inhaler|medication|medicine|meds|pills?|prescri\w+|"
        r"drugs?|dose|mg)\b", re.I),
    "avoid": re.compile(
        r"\b(?:allerg\w*|intoleran\w*|anaphyla\w*|epipen|hives|rash|swell\w*|itch\w*|sneez\w*|wheez\w*|"
        r"react(?:ed|ion|s)?|can't (?:eat|have|take|stand|be around|touch|drink)|cannot (?:eat|have|take|stand|"
        r"be around)|avoid\w*|(?:makes?|made) me (?:sick|ill|sneeze|itch)|sends? me to|the er\b|hospital|"
        r"never (?:eat|touch|take)|bad reaction|trace of|throat|can't breathe|breathing|puff(?:s|ed)? up|"
        r"ill|sick|vomit\w*|keep (?:it|them) away|stay away|steer clear|no-go|balloon\w*|can't stay|"
        r"medical bracelet)\b", re.I),
    "liking": re.compile(
        r"\b(?:favou?rite|love|loves|adore|nothing beats|prefer|fan of|obsessed|could listen|enjoy\w*|"
        r"into|all about|hooked on|can't get enough|cheers? me up|makes? me happy|best|go-to|fave|top (?:genre|"
        r"pick|choice)|my jam|on repeat|nothing (?:gets|beats|compares|like)|like nothing|moved on to|these days|"
        r"mostly|always (?:order|pick|choose|go for|have)|weakness for|sucker for|crazy about|partial to|"
        r"never get tired)\b", re.I),
}


@lru_cache(maxsize=4096)
def asked_groups(question: str) -> tuple[frozenset[str], ...]:
    """What ``question`` asks for: for each of its cues, the types that would answer it."""
    text = question[:_MAX_CHARS]
    return tuple(dict.fromkeys(types for pattern, types in _ASKS if pattern.search(text)))


def asked_types(question: str) -> frozenset[str]:
    """Every type that would answer one of ``question``'s cues (empty for a question that names none)."""
    return frozenset().union(*asked_groups(question))


@lru_cache(maxsize=1 << 16)
def stated_types(text: str) -> frozenset[str]:
    """The fact types ``text`` states."""
    text = text[:_MAX_CHARS]
    return frozenset(name for name, pattern in _STATES.items() if pattern.search(text))


def match(question: str, text: str) -> float:
    """The share of the types ``question`` asks for that ``text`` states (0 when it asks for none):
    "Which medicine must a doctor never prescribe me?" asks for a medicine to avoid, and "I'm allergic to
    penicillin" states both, "I take lisinopril" one of the two."""
    groups = asked_groups(question)
    if not groups:
        return 0.0
    stated = stated_types(text)
    return sum(bool(group & stated) for group in groups) / len(groups)


_SEVERAL = re.compile(
    r"\b(?:both|in common|how many|what are some|in what ways|(?:what|which) (?:kinds|types|sorts) of|list|"
    r"name (?:two|three|some|all|a few))\b"
    r"|\b(?:what|which)\s+(?:[\w'-]+\s+){0,2}?[\w'-]+s\s+(?:has|have|does|do|did|are|were)\b"
    r"|\b(?:has|have)\s+(?:[A-Z][\w'-]*\s+)(?:and\s+[A-Z][\w'-]*\s+)?(?:ever\s+)?\w+(?:ed|en|ne|wn|ught|ead)\b",
    re.I)


def asks_for_several(question: str) -> bool:
    """Whether ``question`` asks for more than one thing: "both", "how many", "what books has she read",
    "where has she camped" (a list is the answer, and one turn seldom holds all of it)."""
    return bool(_SEVERAL.search(question[:_MAX_CHARS]))


_PAST_WHEN = re.compile(r"\bwhen (?:did|was|were|had)\b|\bhow long ago\b|\b(?:what|which) (?:day|date|year|month) "
                        r"(?:did|was|were)\b", re.I)


def asks_when(question: str) -> bool:
    """Whether ``question`` asks for a date ("when did…", "what day…", "by when…"), not a duration."""
    return any("date" in group for group in asked_groups(question))


def asks_when_past(question: str) -> bool:
    """Whether ``question`` asks when something happened ("when did…", "how long ago…"): then the day a
    turn telling of it was said is an answer, when the turn names no other."""
    return bool(_PAST_WHEN.search(question[:_MAX_CHARS]))

