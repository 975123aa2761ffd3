"""Standing facts: what a speaker tells about themselves that stays true, found in the turns as they arrive.

Pages are short-term memory: they hold what was said, and a question finds them by asking about it. But the
questions where memory matters most do not ask about the past ("I'm packing snacks for a flight. Anything I
should stay away from?" from someone allergic to sesame): they share no words with the statement, and a recall
gate that looks for questions about the past rightly stays shut. So, as each turn is stored, the sentences in
which a person states a durable fact about themselves or their world become *standing facts*, the long-term
layer: one short line each, in the speaker's own words, with its kind, the slot it fills (its *subject*), its
source turn and date. They are kept in the store, shown to the model, and a newer fact about the same subject
supersedes the older (a budget raised, a deadline moved).

A sentence is a standing fact when its speaker is a person (a user turn, or a named speaker's), it asks
nothing, it says something about the speaker or their world (a first person, or a user's statement holding a
specific value: an amount, a time, a number), and it states what lasts: an allergy, a diet, a medicine, a
constraint ("never", "only", "can't"), a preference, a person and how to reach them, a pet, family, a recurring
schedule, a plan or deadline with a date, a number or code, a budget, where they live or work. A past event
("we went hiking yesterday") is a page's business, not a standing fact. The cues are words of the language,
written from what each kind means; ``answer_types.stated_types`` gives the values a sentence holds. Stdlib only;
each pattern is linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from collections.abc import Iterable, Sequence, Set
from functools import lru_cache

from .answer_types import stated_types
from .claims import is_claim, mask_quotes, states_fact
from .dates import format_day
from .records import Turn
from .text import content_words, fold_plural, sentences

# The extractor's version: a conversation whose facts an older one made gets them made again. 2: quotations and
# sentences that claim nothing (``claims``) state no fact. 3: a fact is one line (``one_line``). 4: a claim the
# fact model says stays true is a fact whatever it is about (``stated_fact``).
FACTS_VERSION = 4
KINDS = ("avoid", "diet", "medicine", "constraint", "preference", "person", "pet", "family", "schedule", "plan",
         "number", "budget", "identity", "stated")
# A fact the cues below have no words for, found by the fact model (``claims.states_fact``): whatever it is about.
STATED = "stated"
MAX_FACT_CHARS = 220  # a standing fact is one line: a longer sentence is cut at a clause boundary
_MAX_SENTENCE = 600  # a statement, not a pasted document

# Said before the fact, not part of it: "Oh, by the way.", "Before I forget, one thing:", "FYI -"
_LEAD_IN = re.compile(
    r"^\W*(?:(?:oh|ah|so|ok(?:ay)?|well|also|anyway|and|btw|fyi|ps|p\.s\.|note to self|for the record|for what it's"
    r" worth|just so you know|just so you're aware|heads[- ]up|quick note(?: for later)?|before i forget(?:,? one thing)?|"
    r"by the way|one more thing|unrelated,? but (?:worth saying|worth noting|important)|side note|random fact|"
    r"fun fact)\b[\s,.:;!-]*)+", re.I)
# a wh-word asking, not one opening a clause ("When a migraine hits I take sumatriptan.")
_WH_QUESTION = re.compile(
    r"^\W*(?:what|when|where|who|whom|whose|which|why|how)(?:'s|'re|\s+(?:is|are|was|were|do|does|did|can|could|"
    r"should|would|will|shall|have|has|had|am|i|you|we|they|my|your|much|many|long|often|far|time|day|kind|"
    r"about|else)\b)", re.I)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|im|ive|my|mine|me|myself|we|we're|we've|we'd|our|ours|us)\b",
                           re.I)
# A moment that has passed or a mood of the moment: not what stays true
_TRANSIENT = re.compile(
    r"\b(?:yesterday|last (?:night|week|weekend|time|month|year|summer|winter)|this morning|earlier today|just now|"
    r"the other day|a (?:while|few days|week) ago|\d+ (?:days|weeks) ago|right now|at the moment|today|tonight|tomorrow|"
    r"last (?:mon|tues|wednes|thurs|fri|satur|sun)day|came out|went wrong|turned out|i was (?:so|really|very)|"
    r"we were (?:so|really|very)|i felt|so (?:happy|excited|proud|glad) (?:for|about))\b", re.I)
# A turn that greets, thanks or cheers the other person ("Hey Caroline!", "Love that painting!")
_ADDRESS = re.compile(r"^\W*(?:hey|hi|hello|bye|thanks|thank you|congrats|congratulations|wow|aw+|oh wow|love that|"
                      r"that's (?:so|really|awesome|great|amazing)|sounds (?:great|good|fun)|good luck)\b", re.I)

_NEVER = r"(?:never|no longer|won't|will not|refuse to|can(?:'|no)?t|cannot|can not|don't|do not|must not|mustn't)(?: ever)?"
_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("avoid", re.compile(
        r"\b(?:allerg\w*|intoleran\w*|anaphyla\w*|epi-?pen|auto-?injectors?|celiac|coeliac|hives|kryptonite|"
        rf"{_NEVER} (?:eat|have|take|drink|stand|be around|touch|tolerate|digest|handle)\b|"
        r"(?:makes?|made|gives?|gave) me (?:\w+ )?(?:sick|ill|sneeze|itch\w*|hives|a rash|an? (?:migraine|headache|rash)|"
        r"migraines?|headaches?)|react(?:ed|s)? (?:badly )?to|"
        r"reaction to|(?:throat|airways?|eyes?) (?:close|swell|start)|off limits|no-go|steer clear|avoid\w*|stay away|"
        r"antihistamines?|asthma|nemesis|dander|sets? off my|(?:lips?|face|eyes?) (?:balloon|puff|swell)\w*)",
        re.I)),
    ("diet", re.compile(
        r"\b(?:vegetarian|vegan|pescatarian|pescetarian|halal|kosher|gluten[- ]free|dairy[- ]free|lactose[- ]free|"
        r"keto|paleo|plant[- ]based|teetotal\w*|sober|(?:don't|do not|never) eat (?:meat|fish|pork|beef|animal)|"
        r"on an? [\w-]+ diet)\b",
        re.I)),
    ("medicine", re.compile(
        r"\b(?:i (?:take|inject|use|need)|i'm on|i am on|prescribed|prescription|medication|meds|tablets?|pills?|"
        r"inhaler|insulin|\d+\s?(?:mg|mcg|ml|units?))\b", re.I)),
    ("constraint", re.compile(
        rf"\b(?:{_NEVER} (?:fly|book|use|work|do|travel|take|go|drive|eat|drink|touch|code|write|buy|manage|climb)|"
        r"only\b.{0,40}\bfor me\b|for me\b.{0,40}\bonly\b|i only (?:\w+)|nothing but|always have to|have to be|"
        r"i refuse|not again|never again|boycott\w*|blacklist\w*|i'm done with|hard no|sworn\b.{0,20}\boff|"
        r"please never|never suggest|the only (?:\w+ )?(?:language|one|thing|kind)|only (?:comfortable|want|use|read|"
        r"write|eat|drink|fly|book|wear)|in anything else|(?:write|give|show) (?:any|all|every)\b.{0,25}\bfor me|"
        r"my rule (?:for|is))\b", re.I)),
    ("person", re.compile(
        r"\b(?:my|our|the) (?:[\w'’]+ )?(?:accountant|landlord|landlady|plumber|electrician|vet|veterinarian|doctor|"
        r"dentist|gp|physician|lawyer|attorney|agent|therapist|mechanic|manager|boss|nanny|babysitter|cleaner|"
        r"trainer|tutor|coach|neighbou?r|roommate|flatmate|colleague|coworker|co-worker|assistant|contact|"
        r"best friend|friend|bookkeeper|advisor|adviser|builder|handyman|carer|caregiver)\b|"
        r"\b(?:does my (?:books|taxes|hair)|takes care of|looks after|handles my|files my)\b", re.I)),
    ("preference", re.compile(
        r"\b(?:favou?rite|fave|prefer\w*|nothing beats|nothing (?:makes|cheers|compares)|i (?:love|adore|hate|"
        r"like|enjoy|despise|can't stand|can't resist)|i'd (?:pick|choose|take)|my go-to|go-to|i'm (?:a (?:big |huge )?"
        r"fan|obsessed|hooked|crazy about|partial to)|sucker for|weakness for|on repeat|my jam|i always (?:order|pick|"
        r"choose|go for|have)|give me\b.{0,40}\b(?:any day|every time)|is my (?:thing|jam)|my kind of|"
        r"my (?:colou?r|music|genre|flowers?|cuisine|food|drink|team|band|style|song|sport|scent)\b|i pick|my choice|"
        r"happy place|nothing gets me|obsessed with)\b", re.I)),
    ("schedule", re.compile(
        r"\b(?:every|each) (?:day|morning|evening|night|week|weekend|month|mon|tues|wednes|thurs|fri|satur|sun)\w*|"
        r"\bon (?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends|weekdays)\b|"
        r"\b(?:weekly|daily|monthly|biweekly|fortnightly|every other)\b|\b(?:mon|tues|wednes|thurs|fri|satur|sun)days\b|"
        r"\b(?:appointment|lesson|class|shift|session|practice|rehearsal|sync|stand-?up|meeting|slot|training|"
        r"check-?up|clinic|service|mass|choir)\b", re.I)),
    ("plan", re.compile(
        r"\b(?:due|deadline|cut-?off|expires?|renew\w*|submit\w*|file|filing|booked|fly(?:ing)?|leav(?:e|ing)|"
        r"pushed|postponed|rescheduled|brought forward|moved (?:it|the \w+) to|"
        r"wedding|married|trip|moving|move|start(?:s|ing)?|travel\w*|going to|gonna|will|plan(?:ning)?|by|until|"
        r"before|at the latest|no later than|(?:new )?date|ready|done|finished|in by)\b", re.I)),
    ("number", re.compile(
        r"\b(?:locker|room|code|password|passcode|passphrase|pin|passport|account|flight|seat|spot|space|bay|"
        r"licen[cs]e|plate|wi-?fi|phone|number|apartment|flat|unit|gate|policy|member(?:ship)?|id|extension|"
        r"postcode|zip|address)\b", re.I)),
    ("budget", re.compile(
        r"\b(?:budget|money|spend|afford|cap|ceiling|(?:set|put)\b.{0,30}\baside|earmark\w*|at most|max(?:imum)?|tops|limit|"
        r"no more than|not a cent more|under|go up to|up to|fit into|fit in|come in under|saved|savings|salary|rent|"
        r"figure|or less|come to|for everything|all in|in total|out of the question|anything over|nothing over)\b",
        re.I)),
    ("pet", re.compile(
        r"\b(?:my|our) (?:\w+ )?(?:dog|cat|puppy|pup|kitten|parrot|bird|budgie|rabbit|bunny|hamster|guinea pig|"
        r"fish|horse|pony|tortoise|turtle|snake|lizard|ferret|beagle|labrador|lab|retriever|terrier|poodle|collie|"
        r"spaniel|dachshund|tabby)\b|\bi (?:have|own|got|adopted) an? (?:dog|cat|puppy|kitten|parrot|rabbit|hamster|"
        r"horse)\b|\b(?:i|we) (?:have|own|keep|got|adopted|'ve got|have got) (?:an?|two|three|four|some) (?:[\w-]+ )?(?:dogs?|"
        r"cats?|puppies|puppy|kittens?|parrots?|birds?|rabbits?|bunnies|hamsters?|guinea pigs?|fish|horses?|ponies|"
        r"tortoises?|turtles?|snakes?|lizards?|ferrets?|greyhounds?|chickens?|hens?)\b|\b(?:dog|cat|pup|puppy|kitten|"
        r"parrot|rabbit|terrier|beagle|pet)(?:'s)? name\b|\b(?:called|named) (?:him|her|it|them) [A-Z]", re.I)),
    ("family", re.compile(
        r"\bmy (?:(?:little|big|older|younger|twin|baby|step|half)[- ]?)?(?:sister|brother|sibling|mom|mum|mother|"
        r"dad|father|parents|wife|husband|partner|spouse|fianc[ée]e?|girlfriend|boyfriend|son|daughter|kids?|"
        r"children|cousin|aunt|uncle|niece|nephew|grandma|grandmother|grandpa|grandfather|grandparents|in-laws)\b|"
        r"^(?:mum|mom|dad|grandma|grandpa|nan|gran|sis|bro)(?:'s)?\b|\bmy (?:sis|bro)\b|"
        r"\b(?:i|we)(?:'ve| have)? got (?:an?|one|two|three|four|five) "
        r"(?:older |younger |little |big )?(?:sisters?|brothers?|siblings|kids|children|sons?|daughters?)\b",
        re.I)),
    ("identity", re.compile(
        r"\bi (?:live|work|study|teach|grew up|was born|moved)\b|\bi'm (?:a|an) (?!\w+ (?:of|about)\b)(?!bit\b|little\b|"
        r"tad\b|lot\b|touch\b|mess\b|wreck\b)[\w-]+|"
        r"\bi am (?:a|an) [\w-]+|\bi'm from\b|\bi come from\b|\bmy (?:job|work|home|house|hometown|company|office|"
        r"school|university|major|degree|car|bike|name)\b|^(?:studying|working (?:as|at|for)|teaching)\b|"
        r"\bi'm (?:doing|studying|taking) an? [\w' -]*(?:degree|master's|masters|phd|course|diploma|apprenticeship)\b",
        re.I)),
)
# What a kind's statement must hold besides its cue: a schedule a time or a day, a budget an amount, ...
_NEEDS: dict[str, frozenset[str]] = {
    "schedule": frozenset({"time", "date"}), "plan": frozenset({"date"}), "number": frozenset({"number"}),
    "budget": frozenset({"money"}), "person": frozenset({"person"}), "medicine": frozenset({"medicine", "quantity"}),
}
# Kinds a statement can be of without a first person, when a user states it with its value ("The team sync is
# every Monday at 6 pm", "Locker 122 at the gym")
_IMPERSONAL = frozenset({"schedule", "plan", "number", "budget", "medicine"})
# A kind a first-person statement is of by the value it holds alone, when no cue names one ("I'm seeing the
# dentist Monday at 2:15pm", "I rent from Yuki Alvarez, 555-0644")
_BY_VALUE = (("time", "schedule"), ("money", "budget"), ("medicine", "medicine"), ("quantity", "medicine"),
             ("contact", "person"), ("number", "number"), ("date", "plan"))
_MONEY_WORDS = re.compile(r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple)\s+(?:grand|"
                          r"thousand|hundred|k)\b", re.I)  # "two grand", "about five thousand"
_EVERY_MONTH = re.compile(r"\b(?:every|each) (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b(?! \d)",
                          re.I)  # "every October": a date that recurs, which answer_types does not call a date
_CONTACT = re.compile(r"(?<!\w)\+?\(?\d(?:[\s().-]{0,2}\d){6,14}(?!\w)|[\w.+-]+@[\w-]+(?:\.[\w-]+)+")  # a phone or an e-mail
# Liking a moment or the other person's doing, not a thing: "I love how art lets us...", "I love it when you cook"
_VAGUE_LIKING = re.compile(r"\b(?:love|like|enjoy|adore|hate)\s+(?:it|that|this|how|when|the way|seeing|being|you|your|"
                           r"these|those|the idea|the feeling|hearing|watching you)\b", re.I)
_DAY = re.compile(r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\bnext (?:week|month|year|spring|summer|autumn|"
                  r"fall|winter)\b", re.I)
# What happened, told in the past ("we celebrated", "my brother wrote it"), against what stands ("I'm", "I love")
_STORY_KINDS = frozenset({"preference", "family", "identity", "pet"})
_PAST = re.compile(r"\b(?:was|were|went|came|had|did|made|wrote|took|got|saw|gave|found|bought|met|spent|used to|"
                   r"(?!(?:interest|excit|marri|retir|tir|bas|allerg|obsess|hook|us|need|sort|link|schedul|book|plann|"
                   r"locat|call|nam|diagnos|prescrib)ed\b)[a-z]{3,}ed)\b",
                   re.I)
_STANDING = re.compile(r"\b(?:i'm|i am|i've been|i have|i love|i like|i prefer|i adore|i hate|i live|i work|my \w+ "
                       r"(?:is|are|lives|works)|favou?rite|always|every|never|moved to|relocated to|lives in|based in|"
                       r"these days|now|called|named)\b", re.I)
# The subject left out, as people write notes: "Allergic to strawberries, the serious kind.", "Vegetarian, btw."
_ELIDED = re.compile(r"^(?:(?:i've |always |have )?been |taking |on )?(?:seriously |badly |very |severely |mildly |"
                     r"strictly |fully )?(?:allergic|intolerant|"
                     r"vegetarian|vegan|pescatarian|halal|kosher|gluten[- ]free|lactose[- ]intolerant|celiac|coeliac|"
                     r"diabetic|asthmatic|(?:pet |food |drug |nut )?allergy)\b|^(?:mum|mom|dad|grandma|grandpa|nan|gran)\b|"
                     r"^(?:taking|on) [a-z]+(?:ine|ol|in|ide|pam|one|ate|ium)\b|^(?:current |new )?favou?rite\b|"
                     r"^(?:pup|puppy|dog|cat|sis|bro)(?:'s)?\b", re.I)
# Words that only say which kind a statement is (or that it changed): not which slot it fills
_GENERIC = frozenset(fold_plural(w) for w in (
    "allergic allergy allergies intolerant epipen reaction react reacted swell itch hives sick ill avoid "
    "favorite favourite prefer love like enjoy best pick choose go-to "
    "take takes taking inject injection prescribed prescription medication medicine meds pill pills tablet tablets "
    "dose mg every each weekly daily morning evening night week weekend monday tuesday wednesday thursday friday "
    "saturday sunday mondays tuesdays wednesdays thursdays fridays saturdays sundays am pm "
    "appointment lesson class session slot meeting due deadline by until latest "
    "number code budget spend afford cap ceiling set aside max most tops limit "
    "actually changed change now new moved move switched switch swapped updated update instead anymore longer "
    "reassigned rebooked extended pushed raised lowered still currently lately these days from on "
    "call reach phone email number address contact write text").split())
# The newer statement says its value changed: "actually", "moved", "now", "new", "raised"
CHANGE_CUE = re.compile(r"\b(?:actually|no longer|any ?more|instead|now|chang\w*|switch\w*|mov\w*|swapp?\w*|"
                        r"re(?:assign|book|schedul|nam|vis)\w*|extend\w*|push\w*|postpon\w*|new|updat\w*|correction|"
                        r"got a bonus|went up|went down|raised|lowered|these days|final|relocat\w*|transferr\w*|shifted)\b", re.I)
# ... in words that say nothing else ("now" and "new" say a lot else: "I'm now mentoring", "a new recipe"): what a
# statement of another kind than the one it changes needs
_CHANGED = re.compile(r"\b(?:actually|no longer|any ?more|instead|chang\w*|switch\w*|moved|swapp?\w*|"
                      r"re(?:assign|book|schedul|vis)\w*|pushed|postponed|shifted|updated|correction)\b", re.I)
# In a recall's notes (``retrieval.rerank``) a later turn replaces an earlier one only when it says that something
# changed, in these narrower words, and ranks among the best three turns. With similarity and margin alone,
# LoCoMo's later turns on the same topic (a new event, not a correction) took over the injection: page selection on
# LoCoMo conversations 1-5 (categories 1-4, 12 questions each) 0.47 without newest-wins, 0.13 with it, 0.43 with the
# cue and the rank. On the 72 generated probes: e2e 0.36 without, 0.39 with; the latest value for 7 of 16 update
# probes against 5.
CORRECTION_CUE = re.compile(r"\b(?:actually|no longer|any ?more|instead|chang\w*|switch\w*|moved?|swapp?\w*|"
                            r"new one|re(?:assign|book|schedul)\w*|correction|update[ds]?)\b", re.I)
# Kinds of which a slot holds one value: a newer budget for the laptop or code for the door replaces the older
# whether or not it says that something changed ("After talking it over, $1,700 is the most I'll spend on a laptop")
ONE_VALUE = frozenset({"budget", "number"})
_DATED = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d|\b\d{1,2}(?:st|nd|rd|th)?\s+"
                    r"(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", re.I)  # a written date, not "Monday"
_ANNOTATION = re.compile(r"\s*\[[^\[\]]{0,400}\]")  # what a transcript adds: "[shares a photo: a photo of a cat]"
_CLAUSES = re.compile(r";\s+|\s+[\u2014\u2013-]\s+")  # a statement and a question in one sentence
_CLAUSE = re.compile(r"[;,:\u2014\u2013]\s|\s(?:and|but|so|because)\s")


@dataclass
class FactDraft:
    """A standing fact found in a turn, before it is stored: its kind, the slot it fills and its line."""

    kind: str
    subject: str  # the slot: the words that say what it is about, less its value ("laptop", "gym locker")
    text: str  # the line: the speaker's own words, without the lead-in
    speaker: str | None = None  # a transcript's person; None: a chat's user


@dataclass
class StandingFact:
    """A stored standing fact (``Store.facts``): a numbered line of a conversation with its source turn."""

    fact_id: int
    turn: int
    kind: str
    subject: str
    text: str
    time: str | None = None
    speaker: str | None = None
    superseded_by: int | None = None  # the newer fact that replaced it
    pinned: bool = False  # shown first (the pinned ones fit the facts' room: ``Store.pin_fact``)
    asked: int = 0  # how many answers it was given to
    corrected: bool = False  # its source turn was corrected (``Conversation.correct``): the correction's facts stand

    @property
    def current(self) -> bool:
        return self.superseded_by is None and not self.corrected

    def to_dict(self) -> dict:
        return {**asdict(self), "current": self.current}

    def line(self) -> str:
        """One line for a reader: id, source turn, kind, day, the words, and whether it is pinned or replaced."""
        state = (" [pinned]" if self.pinned else "") + (f" (replaced by #{self.superseded_by})" if self.superseded_by
                                                       else "") + (" (corrected)" if self.corrected else "")
        who = f"{one_line(self.speaker)}: " if self.speaker else ""
        day = f"  {format_day(self.time)}" if self.time else ""
        return f"#{self.fact_id}  turn {self.turn}  {self.kind}{day}  {who}{one_line(self.text)}{state}"


def extract(turn: Turn) -> list[FactDraft]:
    """The standing facts ``turn`` states (none for an assistant's turn: it tells the user things, it says
    nothing about the user)."""
    if not turn.text or (turn.role != "user" and not turn.speaker):
        return []
    found = _extract(turn.text, turn.role == "user" and not turn.speaker)
    return [replace(d, speaker=turn.speaker) for d in found] if turn.speaker else list(found)


@lru_cache(maxsize=1 << 14)
def _extract(text: str, user: bool) -> tuple[FactDraft, ...]:
    found = []
    for sentence in sentences(mask_quotes(text[: 4 * _MAX_SENTENCE])):  # quoted words are not the speaker's
        sentence = _after_greeting(sentence)
        whole = fact_of(sentence, user)
        if whole is not None:
            here = [whole]
        elif _CLAUSES.search(sentence):  # a clause of it: "I need the forms done by March 6; should I use software?"
            here = [d for d in (fact_of(c, user) for c in _CLAUSES.split(sentence)) if d is not None]
        else:
            here = []
        found += here or [d for d in (stated_fact(sentence, user),) if d is not None]
    return tuple(found)


def _after_greeting(sentence: str) -> str:
    """A sentence that opens by greeting or thanking ("Hi, I'm allergic to shellfish.") read from after the
    greeting: the rest may state a fact. A greeting alone stays as it is (and states none)."""
    head, comma, rest = sentence.partition(",")
    return rest.strip() if comma and rest.strip() and len(head) <= 30 and _ADDRESS.match(head) else sentence


def stated_fact(sentence: str, user: bool = True) -> FactDraft | None:
    """A standing fact the cues have no words for: a claim the fact model says states something that stays true
    ("We keep chickens on our allotment."), of kind ``stated``. A chat's ``user`` says it in the first person (an
    app's text in a user turn states nothing about them); a transcript's speaker may speak of their world."""
    line = _LEAD_IN.sub("", _ANNOTATION.sub("", one_line(sentence)).strip()).strip()
    if (not line or len(line) > _MAX_SENTENCE or _asks(line) or _ADDRESS.match(line)
            or (user and not _FIRST_PERSON.search(line)) or not is_claim(line) or not states_fact(line)):
        return None
    return FactDraft(STATED, subject_of(line, STATED), _shorten(line))


def fact_of(sentence: str, user: bool = True) -> FactDraft | None:
    """The standing fact one sentence states, if any. ``user``: the user of a chat said it (a statement with a
    specific value needs no first person then); otherwise a named speaker (a transcript's person)."""
    line = _LEAD_IN.sub("", _ANNOTATION.sub("", one_line(sentence)).strip()).strip()
    if not line or len(line) > _MAX_SENTENCE or _asks(line) or _ADDRESS.match(line) or not is_claim(line):
        return None
    personal = bool(_FIRST_PERSON.search(line))
    stated = (stated_types(line) | ({"contact"} if _CONTACT.search(line) else set())
              | ({"money"} if _MONEY_WORDS.search(line) else set())
              | ({"date"} if _EVERY_MONTH.search(line) else set()))
    kinds = [kind for kind, cue in _CUES if cue.search(line) and (kind not in _NEEDS or _NEEDS[kind] & stated)
             and not (kind == "preference" and _VAGUE_LIKING.search(line))
             and not (kind == "plan" and not _DATED.search(line) and not _DAY.search(line))]
    if not kinds and personal:
        kinds = [kind for value, kind in _BY_VALUE if value in stated and (value != "date" or len(stated) > 1
                                                                          or _DATED.search(line))][:1]
    if not personal:
        kinds = [k for k in kinds if k in _IMPERSONAL or _ELIDED.match(line) or (k == "person" and "contact" in stated)
                 ] if user else []
    if not kinds:
        return None
    if _TRANSIENT.search(line) and not {"avoid", "diet", "medicine", "constraint"} & set(kinds):
        return None
    if kinds[0] in _STORY_KINDS and _PAST.search(line) and not _STANDING.search(line):
        return None  # "We celebrated my daughter's birthday", "My brother wrote it": an event, a page's business
    kind = kinds[0]
    return FactDraft(kind, subject_of(line, kind), _shorten(line))


def _asks(line: str) -> bool:
    """A question: a question mark, or a wh-word asking first. (An auxiliary first is not enough here: "Can't do
    Mondays, that's my dentist slot." and "Had to give up my old locker" state things.)"""
    stripped = line.rstrip("\"')]}»” ")
    return stripped.endswith(("?", "？")) or bool(_WH_QUESTION.match(stripped))


_VALUE = re.compile(r"[$€£]\s?\d[\d,.]*|\b\d[\d,.:/-]*\s?(?:[ap]\.?m\.?|mg|mcg|ml|units?|k|st|nd|rd|th)?\b|\S+@\S+|"
                    r"\b[A-Z]{1,3}\s?\d+[A-Z]?\b")  # amounts, numbers, times, days of the month, e-mails, codes
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-ZÀ-Þ][^\W\d_]+(?:\s[A-ZÀ-Þ][^\W\d_]+)*\b")  # a name written with a capital mid-sentence
_NAMED = frozenset({"person", "family", "pet", "identity", STATED})  # kinds whose value may be a name: who, where


def subject_of(line: str, kind: str) -> str:
    """The slot a fact fills: its content words less its values (amounts, times, numbers, codes; for a person,
    a relative, a pet or where one lives, the names written with a capital mid-sentence: the Hartley deck's
    name is its slot, the accountant's is its value), the words that only say its kind or that it changed, and
    stop words; sorted, so that "my budget for the laptop" and "the laptop budget" fill the same slot."""
    line = _VALUE.sub(" ", line)
    if kind in _NAMED:
        line = _NAME.sub(" ", line)
    words = {fold_plural(w) for w in content_words(line)} - _GENERIC
    return " ".join(sorted(w for w in words if not w.isdigit() and len(w) > 1))


def _one_value(new: FactDraft | StandingFact, old: FactDraft | StandingFact) -> bool:
    """Both of a kind a slot holds one of, and both amounts of money or neither (a flat's budget is not its
    landlord's phone number)."""
    return new.kind in ONE_VALUE and ("money" in stated_types(new.text)) == ("money" in stated_types(old.text))


def supersedes(new: FactDraft | StandingFact, old: FactDraft | StandingFact) -> bool:
    """Whether a newer fact replaces an older one: the same speaker's, filling the same slot (a third of the
    shorter slot's words shared, at least one), and either the newer says that something changed ("actually",
    "moved", "now") with both of one kind, or their slots are nearly one (half their words shared), or it says
    so in words that say nothing else ("changed", "moved", "rebooked": a lesson stated with a daughter and
    moved with its teacher is changed whatever the kind), or both are of a kind a slot holds one of (``ONE_VALUE``:
    a budget for the laptop, the code of the front door). Two allergies, two friends or two classes share no
    slot word, so both stand."""
    if new.text == old.text or new.speaker != old.speaker:
        return False
    a, b = set(new.subject.split()), set(old.subject.split())
    shared = len(a & b)
    if not shared or shared / min(len(a), len(b)) < 1 / 3:
        return False
    if new.kind == old.kind:
        return (_one_value(new, old) or bool(CHANGE_CUE.search(new.text))
                or shared / len(a | b) >= 0.5)
    return bool(_CHANGED.search(new.text))


# Bidirectional controls: embeddings, overrides and isolates, the marks, the Arabic letter mark
_BIDI_CONTROLS = dict.fromkeys(map(ord, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"))


def one_line(text: str) -> str:
    """``text`` as one line: every break ``str.splitlines`` knows becomes a space and the bidirectional controls
    are dropped, so that a fact (the turn it came from stays as it was said) can neither begin a line that looks
    like another fact's in a listing nor show its words in another order than they are stored."""
    return " ".join(text.translate(_BIDI_CONTROLS).splitlines())


def _shorten(line: str) -> str:
    """At most ``MAX_FACT_CHARS``: cut at the last clause boundary before it (or the last space)."""
    if len(line) <= MAX_FACT_CHARS:
        return line
    head = line[:MAX_FACT_CHARS]
    cuts = [m.start() for m in _CLAUSE.finditer(head) if m.start() > MAX_FACT_CHARS // 2]
    cut = cuts[-1] if cuts else head.rfind(" ")
    return head[: cut if cut > 0 else MAX_FACT_CHARS].rstrip(" ,;:") + "…"


# A message asking what is remembered, not about one thing: "What do you remember about me?", "What else did I
# mention?", "Can you remind me what we talked about last?"
_WHEN = r" so far| last(?: time)?| earlier| before| lately| recently| today| this week"
_OVERVIEW = re.compile(
    r"\bwhat (?:do|did|else do) you (?:remember|know|recall)(?: about (?:me|us|myself)| of me)?\s*[?.!]*\s*$|"
    r"\bwhat (?:do|did) you (?:remember|know|recall) about (?:me|us)\b|"
    r"\b(?:tell|show) me what you (?:remember|know)\b|"
    r"\bwhat (?:else )?(?:have|did) i (?:told|tell|mentioned|mention|said|say|shared|share)(?: to)?(?: you)?"
    r"(?: so far| about myself| about me)?\s*[?.!]*\s*$|"
    rf"\bremind me what (?:we|i) (?:talked|spoke|chatted|discussed)(?: about)?(?:{_WHEN})?\s*[?.!]*\s*$|"
    rf"\bremind me what i (?:said|told you)(?: about (?:me|myself))?(?:{_WHEN})?\s*[?.!]*\s*$|"
    rf"\bwhat (?:did|have) we (?:talk(?:ed)?|speak|spoken|chat(?:ted)?|discuss(?:ed)?)(?: about)?(?:{_WHEN})?\s*[?.!]*\s*$|"
    r"\bdo you remember anything about (?:me|us)\b|\bwhat (?:facts|things) do you (?:have|keep|know) about me\b",
    re.I)


def asks_what_is_remembered(message: str) -> bool:
    """Whether ``message`` asks what is remembered as a whole (what the standing facts and the recent pages
    answer), not about one thing ("What do you remember about my trip?" asks about the trip)."""
    return bool(_OVERVIEW.search(message[:300]))


class CurrentFacts:
    """The facts that still stand, by speaker and slot word. ``supersedes`` needs the same speaker and a word of
    the slot shared, so a newer fact is compared only with the standing facts that share one with it (found
    here), never with all of them: thousands of facts of other slots cost nothing to a new one."""

    def __init__(self) -> None:
        self.facts: dict[int, FactDraft | StandingFact] = {}
        self._by_word: dict[tuple[str | None, str], set[int]] = {}

    def add(self, fact_id: int, fact: FactDraft | StandingFact) -> None:
        self.facts[fact_id] = fact
        for word in set(fact.subject.split()):
            self._by_word.setdefault((fact.speaker, word), set()).add(fact_id)

    def remove(self, ids: Iterable[int]) -> None:
        for fact_id in ids:
            fact = self.facts.pop(fact_id)
            for word in set(fact.subject.split()):
                near = self._by_word[(fact.speaker, word)]
                near.discard(fact_id)
                if not near:
                    del self._by_word[(fact.speaker, word)]

    def replaced_by(self, fact: FactDraft | StandingFact) -> list[int]:
        """The ids of the standing facts ``fact`` supersedes (``supersedes``), in order."""
        near = set().union(*(self._by_word.get((fact.speaker, w), ()) for w in set(fact.subject.split())))
        return sorted(i for i in near if supersedes(fact, self.facts[i]))


def superseded(facts: Sequence[FactDraft | StandingFact], ids: Sequence[int]) -> dict[int, int]:
    """Which fact supersedes which, ``facts`` taken oldest first (``ids``: theirs): {an older fact's id: the id
    of the newer one that replaced it}. Each is compared with the facts that still stand when it comes (those
    of its slot: ``CurrentFacts``)."""
    by: dict[int, int] = {}
    current = CurrentFacts()
    for fact_id, fact in zip(ids, facts):
        replaced = current.replaced_by(fact)
        by.update(dict.fromkeys(replaced, fact_id))
        current.remove(replaced)
        current.add(fact_id, fact)
    return by


def facts_of(turns: Sequence[Turn], pinned: Set[tuple[int, str]] = frozenset()) -> list[StandingFact]:
    """The standing facts of a conversation's ``turns``, in order, each superseding the older ones of its slot as
    it comes (what the store keeps; a reader of a store made before standing facts existed gets them from here).
    ``pinned``: (turn, text) of facts pinned before."""
    made = [StandingFact(0, turn.index, draft.kind, draft.subject, draft.text, turn.time, turn.speaker,
                         pinned=(turn.index, draft.text) in pinned, corrected=turn.superseded_by is not None)
            for turn in turns for draft in extract(turn)]
    for n, fact in enumerate(made, start=1):
        fact.fact_id = n
    by = superseded(made, [f.fact_id for f in made])
    for fact in made:
        fact.superseded_by = by.get(fact.fact_id)
    return made
