"""Whether a sentence asks for work to be done (an imperative), tells what its speaker habitually does, relays
someone else's claim or frames its own with doubt: read from its parse.

A request is no claim about the speaker. "Book my usual table at the Italian place for Friday at 8pm." and
"Schedule my piano lesson for Tuesdays at 5pm." are full of the user's own details, and the claim model
(``claims``), which reads a sentence's frame as a bag of its words, read half of 30 such requests written to check
it as claims: they became standing facts and answered later questions. A verb it never saw opening a request is
no frame to it. English grammar says it in any words: the sentence's root is a verb in its base form, near its
start, with no subject. Unless the verb wraps a statement, a clause of its own with a subject ("Don't forget I'm
in Singapore.", "Note that our boiler is a Vaillant.", "Put on jazz and I'll be happy all day."): what that says
is a claim, and the claim model reads it. A clause asking whether ("Check whether my train is on time.") wraps
none; nor does one whose subject is what "let" or "help" acts on, in the object case ("Let me see a recipe for
my vegan sister.").

A speaker's plain present ("I bank with Monzo.", "We rent a flat in Leith.") says what stays true of them, in any
verb: the root a present-tense verb (not "be": "I'm on a tight schedule tonight" is a passing state) whose subject is
the speaker ("I", "we"), with no modal ("I might ...") and no clause under it ("I think ...", "I want to ..."),
and an object that names something particular, direct or after a preposition ("Monzo", "a Worcester boiler",
"size 9 shoes"; ``states_habit``). The claim and fact models read a sentence's frame as a bag of words, and "I +
verb + object" is as often a remark about the conversation ("I take your point about Brexit.", "I get the bit
about Python."), whose object names nothing of the speaker's.

A sentence whose main verb has someone else as its subject and a statement of its own under it ("My friend said
[she's no longer allergic to sesame].", "Tom reckons [I'm allergic to sesame].", "You said [the code is 4471].")
relays another's claim (``relays_other``): its words may read as a fact, but the speaker does not assert them, so
it never replaces what the speaker told (``facts.supersedes``), and the speaker's own word bearing on a message as
well answers first (``retrieval.facts.own_word``). Quotation marks make a quotation plain
(``claims.mask_quotes``); reported speech has none, and the verb that reports it may be any ("swears", "insists",
"reckons"), so the parse, not a list of such verbs, tells it. When the one who said it is the listener ("You said
[my husband's name is Ethan].", ``relays_listener``), in a chat it is the assistant's word passed back: no fact, and
no evidence for an answer (``facts``, ``runtime.grounding``).

Where a sentence's framing words sit, for the hedge model (``hedge_features``, ``hedges``): a modal and the verb it
carries, the adverbs of its main verb, and the clauses of the speaker's own that name nothing ("I think", "if I
remember right"), each as the parse places it.

The parse is spaCy's English pipeline, its tagger and parser (``models/manifest.toml``'s parser), loaded on first
use, once a process: a few milliseconds a sentence, asked only of a chat user's sentence something else already
took for a fact, of one in the first person naming something that nothing else took, of a fact about to replace
another or best matching a message, of a fact holding words of doubt or speaking to someone, or of a message the
answer must classify. One parse at a time: a pipeline is not shared between threads. English only, as the rest of
the facts layer.
"""

from __future__ import annotations

import sys
import threading
from functools import cache, lru_cache
from typing import Any, NamedTuple

from . import lexicon
from .text import fold_plural

SUBJECTS = frozenset({"nsubj", "nsubjpass", "expl", "csubj", "csubjpass"})
CLAUSES = frozenset({"ccomp", "parataxis", "conj"})  # a clause of its own beside or under the verb
ASKING = frozenset({"whether", "if"})  # what makes a wrapped clause a question, not a statement
OPENING = 2  # the root verb's place in its sentence at most: "Book ...", "Please book ...", "Now just book ..."
PARTICULAR = frozenset({"NNP", "NNPS", "CD"})  # a name, a number
COMPLEMENTS = frozenset({"xcomp", "acomp", "oprd"})  # a verb completing another's sense: its tense is the other's
HABIT_CLAUSES = frozenset({"ccomp", "xcomp"})  # "I think [Paris sounds lovely]", "I want [to repaint]"
SPEAKER = frozenset(lexicon.words("speaker_subject"))  # "I bank with ...", "we rent ..."
OBJECT_CASE = frozenset(lexicon.words("object_case"))  # "Let [me see ...]": a subject in the object case
BE = frozenset(lexicon.words("present_be"))  # "I'm on a tight schedule": a passing state
DO = frozenset(lexicon.words("present_do"))  # "I don't eat ...": "do" carries the present
PERFECT = frozenset(lexicon.words("perfect_have"))  # "I've sent it": a present perfect tells of the past
BEEN = frozenset(lexicon.words("perfect_be"))  # "Been playing the oboe for years.": a perfect without its "I've"
BE_PAST = frozenset(lexicon.words("past_be"))  # "The problem was that ...": no one's saying
DUMMY = frozenset(lexicon.words("dummy_subject"))  # "It turns out I'm ...": the speaker's own claim
LISTENER = frozenset(lexicon.words("second_person"))  # "you've probably seen": a doubt about the listener
SPEAKERS_OWN = frozenset(lexicon.words("asks_my"))  # "my sister", "our dog": who is the speaker's
MAX_CHARS = 600  # a request, not a pasted page: longer text is not parsed
_FIRST_PERSON = lexicon.pattern("first_person")
_SECOND_PERSON = lexicon.pattern("second_person")
_PARSING = threading.Lock()


@cache  # loaded under _PARSING: two threads asking first load it once
def pipeline() -> Any:
    """spaCy's English pipeline without the parts this module does not read (named entities, lemmas, the coarse
    parts of speech: a sixth of a parse's time). Its library (thinc) imports PyTorch on import when it is
    installed, for GPU models this one is not: held off while spaCy loads, it costs neither the second nor the
    memory (the embedder runs without it too), and a later import of it finds it as ever."""
    from .modelpaths import parser_path

    held = "torch" not in sys.modules
    if held:
        sys.modules["torch"] = None  # type: ignore[assignment]  # an import of it fails: thinc goes without
    try:
        import spacy
    finally:
        if held:
            del sys.modules["torch"]
    return spacy.load(parser_path(), exclude=["ner", "lemmatizer", "attribute_ruler"])  # the tags and the parse


def warm() -> None:
    """Load the pipeline now, off the path of a message: a conversation's warm-up does, so that the first sentence
    that needs a parse (a fact told in a request's form, a message the answer must classify) does not wait for it."""
    with _PARSING:
        pipeline()


PARSES_KEPT = 256  # the last parses, by text: a sentence an ingest reads for a request, a habit, a relay and a doubt


class ParseNeeded(Exception):
    """Raised, while parses are deferred (``parses_ahead``), by a reading that needs a parse not made yet."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class _Ahead(threading.local):
    """This thread's parses made ahead in one batch (``parse_ahead``), and whether a parse not among them waits."""

    docs: dict[str, Any] | None = None
    deferring: bool = False


_AHEAD = _Ahead()
AHEAD_BATCH = 64  # texts the pipeline reads at once: batched, a parse costs about a third of one made alone


def _parse(text: str) -> Any:
    """``text``'s parse: made ahead (``parse_ahead``), else once by itself (``_parsed``); while parses are deferred
    (``parses_ahead``), ``ParseNeeded`` instead."""
    docs = _AHEAD.docs
    if docs is not None:
        if text in docs:
            return docs[text]
        if _AHEAD.deferring:
            raise ParseNeeded(text)
    return _parsed(text)


@lru_cache(maxsize=PARSES_KEPT)
def _parsed(text: str) -> Any:
    """``text``'s parse, once: the readings below ask of the same sentence in turn (a chat user's fact is read for a
    request, a relay to the listener and a doubt). A parse is read, never changed."""
    with _PARSING:
        return pipeline()(text)


class parses_ahead:
    """Within it, on this thread, parses made in one batch (``parse_ahead``) are read from where they were kept until
    the outermost one ends; with ``defer``, a reading that needs a parse not made yet raises ``ParseNeeded`` (its
    text) instead of parsing. A caller that reads many sentences (an ingest's extraction) learns so which parses
    they need and makes them together: spaCy parses a batch of short texts in about a third of the time each costs
    alone."""

    def __init__(self, defer: bool = False):
        self.defer = defer

    def __enter__(self) -> parses_ahead:
        self._outer = _AHEAD.docs is None
        if self._outer:
            _AHEAD.docs = {}
        self._was, _AHEAD.deferring = _AHEAD.deferring, self.defer
        return self

    def __exit__(self, *exc: object) -> None:
        _AHEAD.deferring = self._was
        if self._outer:
            _AHEAD.docs = None


def parse_ahead(texts: list[str]) -> None:
    """Parse ``texts`` in batches and keep the parses for the readings within the enclosing ``parses_ahead``."""
    docs = _AHEAD.docs
    if docs is None or not texts:
        return
    with _PARSING:
        for text, doc in zip(texts, pipeline().pipe(texts, batch_size=AHEAD_BATCH)):
            docs[text] = doc


@lru_cache(maxsize=1 << 14)
def asks_for_work(text: str) -> bool:
    """Whether a sentence of ``text`` is a request: its root a base-form verb among its first words, with no
    subject and no statement of its own under it (see the module docstring)."""
    words = text.split(maxsplit=1)
    if not words or len(text) > MAX_CHARS or _FIRST_PERSON.match(words[0]):
        return False  # a sentence that opens with its speaker ("I ...", "My sister ...") has its subject: no parse
    return any(_asks_work(sentence) for sentence in _parse(text).sents)


@lru_cache(maxsize=1 << 12)
def request_words(head: str) -> str | None:
    """The words of a request from its verb on, lower case ("Please check the grammar" -> "check the grammar"),
    when ``head`` is one by its parse (``asks_for_work``, or the forms only a colon's head has: ``_asks_work``'s
    ``of_text``); else None. What the request model reads (``requests``): the words before the verb ("please",
    "just") say nothing of what it asks."""
    if len(head) > MAX_CHARS or _FIRST_PERSON.match(head):
        return None
    worked = asks_for_work(head)
    for sentence in _parse(head).sents:
        root = sentence.root
        bare = root.tag_ == "VB" and not any(child.dep_ in SUBJECTS for child in root.children)
        if bare if worked else _asks_work(sentence, of_text=True):
            words = [t.lower_ for t in sentence if t.i >= root.i and not t.is_punct]
            return " ".join(words) or None
    return None


def _asks_work(sentence: Any, of_text: bool = False) -> bool:
    """Whether ``sentence`` asks for work: its root a base-form verb among its first words (``OPENING``), with no
    subject and no statement of its own under it. With ``of_text`` (a colon's head, which hands over what follows),
    also one asked of the listener with a modal ("Can you shorten this", "Could you make this shorter") and one whose
    clause is an adjective's, what the work should make of the text ("Make this sound more formal"); as a message,
    "Can you ...?" is a question, and the claim gate reads it so."""
    root = sentence.root
    if root.tag_ != "VB":
        return False
    children = list(root.children)
    subjects = [c for c in children if c.dep_ in SUBJECTS]
    asked = of_text and bool(subjects) and all(c.lower_ in LISTENER for c in subjects) and any(
        c.tag_ == "MD" and c.i < subjects[0].i for c in children)
    if (subjects and not asked) or root.i - sentence.start > OPENING + 2 * asked:
        return False
    return not any(_states(c) and not (of_text and c.tag_.startswith("JJ")) for c in children if c.dep_ in CLAUSES)


@lru_cache(maxsize=1 << 14)
def states_habit(text: str) -> bool:
    """Whether a sentence of ``text`` tells what its speaker habitually does or has: its root a present-tense verb
    other than "be" (or one that "do" puts in the present: "I don't eat ..."), its subject "I" or "we", no modal and
    no clause under it, and an object naming something particular that is not the listener's (see the module
    docstring)."""
    return any(_habit_frame(root, children) and any(_particular(o) for o in _objects(children))
               for root, children in _roots(text))


def _habit_frame(root: Any, children: list[Any]) -> bool:
    """A sentence's root in ``states_habit``'s frame, whatever its object names: a present-tense verb other than
    "be" (or one "do" puts in the present), the speaker its subject, no modal, no clause under it, and an object
    that is not the listener's."""
    present = root.tag_ in ("VBP", "VBZ") or (  # "I bank with ...", or "I don't eat ..." ("do" carries it)
        root.tag_ == "VB" and any(c.dep_ == "aux" and c.lower_ in DO for c in children))
    return (present and root.lower_ not in BE and _speaker_says(children)
            and not any(c.dep_ == "dobj" and _listeners(c) for c in children)
            and bool(_objects(children)))


def _speaker_says(children: list[Any]) -> bool:
    """A verb's ``children`` with the speaker as its subject ("I", "we"), and no modal ("I might ...") and no clause
    under it ("I think ...", "I want to ..."): the verb says something of the speaker outright."""
    return (any(c.dep_ == "nsubj" and c.lower_ in SPEAKER for c in children)
            and not any(c.tag_ == "MD" or c.dep_ in HABIT_CLAUSES for c in children))


@lru_cache(maxsize=1 << 12)
def habit_description(text: str) -> str | None:
    """What the speaker says they do or have, when a sentence of ``text`` tells it in ``states_habit``'s frame with
    an object of any kind ("We heat the house with a wood burner." -> "heat the house with a wood burner", "I take
    your point." has the listener's) but a pronoun ("..., and I visit her every few months.": read alone, it says
    nothing of whom): the words from the verb up to a clause of their own or a punctuation mark, at most
    ``DESCRIPTION_WORDS``. Whether that is a way they live or a remark is the habit model's to say
    (``traits``)."""
    if len(text) > MAX_CHARS:
        return None
    for root, children in _roots(text):
        if _habit_frame(root, children) and not any(o.tag_ == "PRP" for o in _objects(children)):
            return _words_from(root, root.sent)
    return None


@lru_cache(maxsize=1 << 12)
def result_description(text: str) -> str | None:
    """What the speaker says they did, when a sentence of ``text`` tells it in the past with the speaker its subject
    ("We just adopted a rescue greyhound called Pepper." -> "adopted a rescue greyhound called Pepper", "I've joined
    a climbing gym." -> "joined a climbing gym"): its root a verb in the simple past, or the present perfect's
    participle, with no modal, no clause under it and an object or a complement ("became a grandmother", "got
    married") that is neither a pronoun nor the listener's; the words from the verb up to a clause of their own or
    a punctuation mark. Whether its result stays true of them ("bought a cottage") or it only happened ("bought
    some milk") is the result model's to say (``traits``)."""
    if len(text) > MAX_CHARS:
        return None
    for root, children in _roots(text):
        past = root.tag_ == "VBD" or (root.tag_ == "VBN" and any(c.dep_ == "aux" and c.lower_ in PERFECT
                                                                 for c in children))
        objects = _objects(children) + [c for c in children if c.dep_ in COMPLEMENTS or c.dep_ == "attr"]
        if (past and _speaker_says(children) and not any(c.dep_ == "neg" for c in children)
                and objects and not any(o.tag_ == "PRP" or _listeners(o) for o in objects)):
            return _words_from(root, root.sent)
    return None


def _words_from(first: Any, sentence: Any) -> str | None:
    """The words of ``sentence`` from ``first`` up to a clause of their own or a punctuation mark (a hyphen
    joins), at most ``DESCRIPTION_WORDS``; None for none."""
    words = []
    for token in sentence[first.i - sentence.start:]:
        if (token.is_punct and token.text != "-") or (token.dep_ in _CLAUSE_OPENERS and token is not first):
            break
        words.append(token.text_with_ws)
    return "".join(words[:DESCRIPTION_WORDS]).strip() or None


PAST_FORMS = frozenset({"VBD", "VBN"})  # "Sold the old dinghy ...", "Moved to the night shift."
# a clause before the sentence's main one, as the parser attaches it: "Been getting up at six for years, so lie-ins
# are a thing of the past." (its "getting" an adverbial clause of "are")
LEADING_CLAUSES = frozenset({"advcl", "ccomp", "conj"})


@lru_cache(maxsize=1 << 14)
def speaker_left_out(text: str) -> str | None:
    """``text`` with its subject put back when a note leaves out the speaker ("Sold the old dinghy and bought a
    bigger one." -> "I sold the old dinghy ...", "Been drinking oat milk for years." -> "I've been drinking ..."):
    its first word the root verb in the past ("Sold") or the "been" of a perfect ("Been drinking"), with no subject;
    the perfect's clause may come before the main one ("Been getting up at six for years, so lie-ins are over.").
    A present verb first is a request ("Book ...") or leaves out another subject ("Sounds good.": it); None for
    those, a question and a text of several sentences or too long to parse."""
    if not text or len(text) > MAX_CHARS or text.rstrip().endswith("?"):
        return None
    sentences = list(_parse(text).sents)
    if len(sentences) != 1:
        return None
    root = sentences[0].root
    first = sentences[0][0]
    lower = text[:1].lower() + text[1:]
    been = first.tag_.startswith("VB") and first.lower_ in BEEN  # a perfect's participle: "Been vegan for years."
    verb = first.head if been and first.dep_ == "aux" else first  # "Been [getting] up at six for years, so ..."
    if any(c.dep_ in SUBJECTS for c in verb.children):
        return None
    if first.i == root.i and root.tag_ in PAST_FORMS:
        return f"I've {lower}" if been else f"I {lower}"
    if verb is not first and verb.tag_ == "VBG" and (verb.i == root.i or verb.dep_ in LEADING_CLAUSES):
        return f"I've {lower}"
    return None


@lru_cache(maxsize=1 << 12)
def owned(text: str) -> frozenset[str]:
    """What ``text`` says is the speaker's, as its parse finds it: the nouns "my" or "our" determines, plurals folded
    ("My sister lives in Leeds." -> sister, "My niece's name is Ana." -> niece); none in a text too long to parse."""
    if not text or len(text) > MAX_CHARS:
        return frozenset()
    return frozenset(fold_plural(t.head.lower_) for t in _parse(text)
                     if t.dep_ == "poss" and t.lower_ in SPEAKERS_OWN and t.head.tag_.startswith("NN"))


def owned_apart(new: str, old: str) -> bool:
    """Whether two statements name two different ones of the speaker's: each names one ("my sister", "my brother")
    and they name none in common."""
    newer, older = owned(new), owned(old)
    return bool(newer and older and not newer & older)


@lru_cache(maxsize=1 << 12)
def tells_past(text: str, at: int) -> bool | None:
    """Whether the clause of ``text`` holding the character at ``at`` tells of the past: its verb in the past tense
    ("I saw her on Friday", "My sister got married on Saturday"); False for any other tense ("The dentist is on
    Friday", "I will call on Wednesday", "I'm seeing her on Friday"); None where no verb governs it, for a perfect
    ("I've booked it for Friday": done, for a day that may be to come), or when the text is too long to parse."""
    if not text or len(text) > MAX_CHARS or not 0 <= at < len(text):
        return None
    parsed = _parse(text)
    token = next((t for t in parsed if t.idx <= at < t.idx + len(t.text)), None)
    while token is not None and not token.tag_.startswith("VB"):
        token = None if token.head.i == token.i else token.head
    if token is None:
        return None
    while token.dep_ in COMPLEMENTS and token.head.tag_.startswith("VB"):  # "got [married]", "was going to [call]"
        token = token.head
    helpers = [c for c in token.children if c.dep_ in ("aux", "auxpass")]
    if any(c.tag_ == "MD" for c in helpers):
        return False  # "will", "'ll", "can": what is to come
    if token.tag_ == "VBN" and any(c.lower_ in PERFECT for c in helpers):
        return None  # "I've booked it for Friday": done, for a day that may be to come
    return token.tag_ == "VBD" or any(c.tag_ == "VBD" for c in helpers)


# Clauses inside a sentence that a wh-word may open without asking: its subject ("[What I drink when I get up] is
# rooibos"), an adverbial ("[When I'm not working], I'm climbing") or a complement ("[How I take my coffee]: black")
INNER_CLAUSES = frozenset({"csubj", "csubjpass", "advcl", "ccomp"})


def wh_opens_clause(text: str) -> bool:
    """Whether the wh-word that opens ``text`` opens a clause inside the sentence rather than asking: a verb
    between it and the main verb is a subject, adverbial or complement clause (``INNER_CLAUSES``). A question's
    wh-word belongs to the main clause ("what should i eat tonight", "What time is my flight"). Asked of a line a
    wh-word opens without a question mark: "When I'm not working I'm usually climbing." and "What I drink when I get
    up is always rooibos." had read as questions and stated no fact."""
    if not text or len(text) > MAX_CHARS:
        return False
    parsed = _parse(text)
    first = next((t for t in parsed if not t.is_punct), None)
    if first is None:
        return False
    verb = first.head
    while verb.dep_ != "ROOT" and verb.i != verb.head.i:
        if verb.dep_ in INNER_CLAUSES:
            return True
        verb = verb.head
    return False


def two_clauses(text: str) -> tuple[str, str] | None:
    """``text`` cut where its main clause goes on in a second one with a subject of its own, joined by "and" or
    "but" ("The wifi password is bluefish22 [and] the door code is 4471."): the two clauses, the second capitalized;
    None when the parse finds no such second clause, or the second leans on the first through a pronoun of anyone
    but the speaker or a demonstrative standing alone ("..., and the best way to reach [them] is 555-0203.",
    "..., and [that]'s what I always order.")."""
    if not text or len(text) > MAX_CHARS:
        return None
    parsed = _parse(text)
    root = next((t for t in parsed if t.dep_ == "ROOT"), None)
    if root is None:
        return None
    for clause in root.children:
        if clause.dep_ != "conj" or not any(c.dep_ in SUBJECTS for c in clause.children):
            continue
        joint = [c for c in root.children if c.dep_ == "cc" and root.i < c.i < clause.i]
        if joint and not any(_leans_back(t) for t in clause.subtree):
            start = joint[-1].idx
            left, right = text[:start].rstrip(" ,;"), text[start + len(joint[-1].text):].strip()
            if left and right:
                return left, right[:1].upper() + right[1:]
    return None


def _leans_back(token: Any) -> bool:
    """Whether ``token`` refers to something said before it: a personal pronoun not the speaker's ("them", "it"),
    or a determiner standing as a noun ("that", "this")."""
    if token.tag_ == "PRP":
        return not _FIRST_PERSON.fullmatch(token.text)
    return token.tag_ == "DT" and token.dep_ != "det"


def relays_other(text: str) -> bool:
    """Whether a sentence of ``text`` relays someone else's claim: its root a verb other than "be", its subject a
    person or thing other than the speaker (a noun, or a pronoun that is neither "I", "we" nor a dummy "it"), and
    after it a clause under it with a subject of its own that does not ask whether (see the module docstring): what
    was said follows the one who said it ("My new accountant is Ravi Shah; the old one retired." parses with the
    first clause under "retired", and relays nothing). Asked only of a fact about to replace another and of the
    fact that best matches a message (``retrieval.facts.own_word``), once a text: a parse costs milliseconds."""
    return bool(_relayers(text))


@lru_cache(maxsize=1 << 12)
def introduces_speech(head: str) -> bool:
    """Whether ``head``, the words before a colon, hands over to what someone else says, writes or asks for: it
    ends with a verb whose subject (the one doing it, not a passive's) is neither the speaker nor the listener, or
    with that verb's pronoun object ("My friend wrote: ...", "Here is the text my teacher gave me: ...", "My mum
    wants me to translate this: ..."). What follows is their words, its "I" theirs, as inside quotation marks. A
    head ending otherwise goes on to its own words ("My allergist confirmed it last spring: no strawberries for
    me.", "My writing is going well: "); so does a passive ("Two seats are booked: ..."), whose subject does
    nothing; a label names no one ("Quick update: ..."), and a frame of the speaker's or the listener's own is
    theirs ("I've got news: ...", "Just so you know: ...")."""
    if not head or len(head) > MAX_CHARS:
        return False
    words = [t for t in _parse(head) if not t.is_punct]
    if not words:
        return False
    last = words[-1]
    verb = last if last.tag_.startswith("VB") else (
        last.head if last.tag_ in ("PRP", "DT") and last.dep_ in ("dobj", "dative") else None)
    while verb is not None and verb.dep_ in ("xcomp", "ccomp"):  # "wants me to translate this": who wants
        verb = verb.head
    # the head's own verb, or one saying what a thing in it is ("the text my teacher gave me"); not a clause under
    # another ("Ever since the kids left:", "My job, since my boss retired:"), which sets the scene for the
    # speaker's own words
    return (verb is not None and verb.tag_.startswith("VB") and verb.dep_ in ("ROOT", "relcl")
            and not any(c.dep_ == "mark" or c.tag_ == "WRB" for c in verb.children)
            and verb.lower_ not in BE and verb.lower_ not in BE_PAST
            and any(c.dep_ == "nsubj" and _other(c) and c.lower_ not in LISTENER and _someone(c)
                    for c in verb.children))


def _someone(subject: Any) -> bool:
    """A subject that names one: a pronoun, a name, or a noun with a determiner or an owner ("she", "Tom", "the
    vet", "my friend"). A bare noun is more often a label the parse read as a clause ("News habits update: ...",
    "Camera update: ...")."""
    return subject.tag_ in ("PRP", "NNP", "NNPS") or any(c.dep_ in ("det", "poss") for c in subject.children)


# The most words a self-description's predicate is read to: "a season ticket holder at Leeds", "deaf in my left ear"
DESCRIPTION_WORDS = 8
# where a predicate ends: a clause of its own begins ("..., which makes notebooks annoying", "... so I can't drive")
_CLAUSE_OPENERS = frozenset({"relcl", "advcl", "ccomp", "mark", "cc", "conj", "parataxis"})


@lru_cache(maxsize=1 << 12)
def self_description(text: str) -> str | None:
    """What the speaker says they are, when a sentence of ``text`` describes them with "be" in the present or its
    perfect ("I'm left-handed, which makes notebooks annoying." -> "left-handed", "We're both teachers." -> "both
    teachers", "I'm on blood thinners." -> "on blood thinners", "I've been a volunteer firefighter for a decade."
    -> "a volunteer firefighter for a decade"): the words after "be" up to a clause of their own or a punctuation
    mark, at most ``DESCRIPTION_WORDS``; None when none does, when it is denied ("I'm not diabetic.") or when "be"
    carries a verb in "-ing" (what they are doing: "I'm running late."). Whether that stays true of them is the
    trait model's to say (``traits``)."""
    if len(text) > MAX_CHARS:
        return None
    for sentence in _parse(text).sents:
        for be in sentence:
            if not (be.lower_ in BE and be.i > sentence.start and be.nbor(-1).lower_ in SPEAKER) and not (
                    be.lower_ in BEEN and be.i > sentence.start + 1 and be.nbor(-1).lower_ in PERFECT
                    and be.nbor(-2).lower_ in SPEAKER):  # "I'm a nurse", "I've been a nurse for years"
                continue
            head = be.head if be.dep_ in ("aux", "auxpass") else be  # "I'm [running] late", "I'm [left]-handed"
            if head.tag_ == "VBG" or any(c.dep_ == "neg" for c in head.children) or (
                    be.i + 1 < sentence.end and be.nbor(1).dep_ == "neg"):
                return None
            if be.i + 1 >= sentence.end or be.nbor(1).tag_ in ("VBG", "TO"):  # "I've been networking", "how lucky I
                return None  # am to be ...": no description after "be"
            said = _words_from(be.nbor(1), sentence)
            word = be.nbor(1)  # a lone "one" or "it" stands for something said before: "I've been one 'cause ..."
            lone = said is not None and len(said.split()) == 1 and (
                word.tag_ == "PRP" or (word.tag_ == "CD" and word.is_alpha))
            return None if lone else said
    return None


def relays_listener(text: str) -> bool:
    """Whether a sentence of ``text`` relays what the one it is said to said ("You said my husband's name is
    Ethan.", "Earlier you told me I'm allergic to peanuts."): in a chat, the assistant's words, which are no
    evidence of a fact about the user, whoever repeats them. "As you said, ..." is the speaker's own claim (its
    root is theirs). Parsed only when it speaks to someone."""
    return bool(_SECOND_PERSON.search(text)) and any(subject in LISTENER for subject in _relayers(text))


@lru_cache(maxsize=1 << 12)
def _relayers(text: str) -> tuple[str, ...]:
    """The subjects (lower case) of the sentences of ``text`` that relay a claim (``relays_other``)."""
    found: list[str] = []
    for root, children in _roots(text):
        if not root.tag_.startswith("VB") or root.lower_ in BE or root.lower_ in BE_PAST:
            continue
        subjects = [c for c in children if c.dep_ in ("nsubj", "nsubjpass") and c.i < root.i and _other(c)]
        asked = root.sent[-1].text == "?" or any(c.dep_ == "aux" and c.i < s.i for c in children for s in subjects)
        if subjects and not asked and any(c.dep_ == "ccomp" and c.i > root.i and _states(c) for c in children):
            found += [s.lower_ for s in subjects]  # not "Do you think the Hawks will ...?": a question relays nothing
    return tuple(found)


def _roots(text: str) -> list[tuple[Any, list[Any]]]:
    """Each sentence of ``text`` as its root and the root's children, by the parse; none for an empty text or one
    too long to parse."""
    if not text or len(text) > MAX_CHARS:
        return []
    parsed = _parse(text)
    return [(sentence.root, list(sentence.root.children)) for sentence in parsed.sents]


def _other(subject: Any) -> bool:
    """A subject that is someone or something other than the speaker: a noun ("my friend", "Tom", "the vet") or a
    personal pronoun other than "I", "we" and a dummy "it" ("she", "you", "they"); one with the speaker beside it
    is the speaker's ("The wife and I agreed: ...")."""
    if any(c.lower_ in SPEAKER for c in subject.conjuncts):
        return False
    if subject.tag_.startswith("NN"):
        return True
    return subject.tag_ == "PRP" and subject.lower_ not in SPEAKER and subject.lower_ not in DUMMY


def _objects(children: list[Any]) -> list[Any]:
    """A verb's objects: its direct object, and what each of its prepositions takes ("with Monzo")."""
    found = [c for c in children if c.dep_ == "dobj"]
    return found + [g for c in children if c.dep_ == "prep" for g in c.children if g.dep_ == "pobj"]


def _listeners(noun: Any) -> bool:
    """A noun the listener owns ("your point"): what the speaker does to it is a remark on what was said."""
    return any(c.dep_ == "poss" and c.lower_ == "your" for c in noun.children)


def _particular(noun: Any) -> bool:
    """An object naming something particular: a name or a number in its phrase ("Monzo", "a Worcester boiler",
    "size 9 shoes", "a garage on Mill Lane"); "that idea" and "the feeling" name nothing."""
    return any(t.tag_ in PARTICULAR for t in noun.subtree)


def _states(clause: Any) -> bool:
    """A clause with a subject of its own that does not ask whether. A subject in the object case is what the verb
    above it acts on ("Let [me see a recipe for my vegan sister]", "Help [me write a note to my landlord]"): such a
    clause says nothing of its own, though a clause under it may ("Let me tell you, [my favourite colour is
    teal]")."""
    children = list(clause.children)
    subjects = [c for c in children if c.dep_ in SUBJECTS]
    if subjects and all(s.lower_ in OBJECT_CASE for s in subjects):
        return any(_states(c) for c in children if c.dep_ in CLAUSES)
    return bool(subjects) and not any(c.dep_ == "mark" and c.lower_ in ASKING for c in children)


# What ``hedge_features`` reads: a verb's adverbs ("probably"), ...
FRAME_MODIFIERS = frozenset({"advmod", "npadvmod"})
FRAME_OBJECTS = frozenset({"dobj", "prep", "attr", "pobj", "dative", "oprd"})  # a clause that says something itself
FRAME_CLAUSES = frozenset({"ccomp", "xcomp"})  # "I think [...]", "I seem [to be ...]"
# An object that names nothing: "I remember [right]", "I doubt [it]", "I doubt [that]" (not "my", "your": their
# noun names something)
NAMING_NOTHING = ("JJ", "RB", "PRP", "DT")
CLAIM_CLAUSES = frozenset({"ROOT", "ccomp"})  # a sentence's main clause, and one it states


@lru_cache(maxsize=1 << 12)
def hedge_features(text: str) -> frozenset[str]:
    """The words that frame the claims of ``text``, each in the place the parse gives it, for the hedge model
    (``hedges``): a modal with the "be" or "have" it carries, or with any other verb (``md:could:be``,
    ``md:could:do``: "could be" doubts, "could eat" does not); an adverb of a verb (``adv:probably``,
    ``adv:always``; an adjective's says how much, and counts only in a frame: "pretty sure"); and each clause whose
    subject is the speaker, a dummy "it" or none (a fragment's root) read as a frame when it names nothing (no
    object, no preposition): "[I think] ...", "[I'm not certain]", "[if I remember right]", "[No idea] if ...".
    A frame is its markers, a negation, its verb (any "be" read as ``be``, "seems" as "seem"), the adjective
    completing it with that adjective's adverbs ("pretty sure"), and whether it wraps a clause (``+c``) or stands
    alone (``+0``): ``sp:not:be:sure+c``, ``sp:think+0``, ``sp:if:remember+0``. Which of them doubt a claim is
    learned from labelled sentences, not listed. None for an empty or overlong text."""
    found: set[str] = set()
    if not text or len(text) > MAX_CHARS:
        return frozenset()
    parsed = _parse(text)
    for token in parsed:
        if not _frames_claim(_framed(token.head)):
            continue
        if token.tag_ == "MD":  # "could be", "might have" apart from "could eat": two readings of one word
            carried = _verb_word(token.head)
            found.add(f"md:{token.lower_}:{carried if carried in ('be', 'have') else 'do'}")
        elif token.dep_ in FRAME_MODIFIERS and token.tag_.startswith("RB") and token.head.tag_.startswith("VB"):
            found.add(f"adv:{token.lower_}")
    for sentence in parsed.sents:
        found.update(f for f in (_frame(token, token.i == sentence.root.i) for token in sentence) if f)
    return frozenset(found)


def _framed(verb: Any) -> Any:
    """The verb whose claim ``verb`` frames when it is a participle with no subject of its own set before it
    ("[Hypothetically speaking], I live in Oslo."): its words frame that claim; else ``verb`` itself."""
    while (verb.dep_ == "advcl" and verb.tag_ in ("VBG", "VBN") and verb.i < verb.head.i
           and not any(c.dep_ in SUBJECTS for c in verb.children)):
        verb = verb.head
    return verb


class Scene(NamedTuple):
    """A preposition setting the scene of a claim (``scenes``): its words ("In my novel"), its noun with the words
    compounded into it or describing it ("novel", "murder mystery party"), and how it is set (``marks``: the
    preposition, the noun's determiner, a plural noun, a clause describing it, the sentence opening with it)."""

    words: str
    noun: str
    marks: frozenset[str]


def scenes(text: str) -> tuple[Scene, ...]:
    """Each preposition of ``text`` that sets the scene of a claim (``_scene``). Which scenes are made up is the
    scene model's to say (``core.scenes``). None for an empty or overlong text."""
    if not text or len(text) > MAX_CHARS:
        return ()
    parsed = _parse(text)
    found = []
    for token in parsed:
        if token.dep_ == "prep" and (noun := _scene(token)) is not None:
            named = [c.text for c in noun.lefts if c.dep_ in ("compound", "amod")] + [noun.text]
            determiner = next((c.lower_ for c in noun.children if c.dep_ in ("det", "poss")), None)
            marks = {f"prep:{token.lower_}", f"det:{determiner}"}
            marks |= {"plural"} if noun.tag_ in ("NNS", "NNPS") else set()
            marks |= {"described"} if any(c.dep_ in ("relcl", "acl") for c in noun.children) or (
                token.head.dep_ == "advcl" and token.head.i > noun.i) else set()  # "In the game [I'm playing], ..."
            marks |= {"first"} if token.i == token.sent.start else set()
            found.append(Scene(parsed[token.i:noun.i + 1].text, " ".join(named), frozenset(marks)))
    return tuple(found)


def _scene(preposition: Any) -> Any:
    """The noun of a preposition setting the scene of a claim: one set before the verb of the main clause ("[In my
    novel], the heroine is ...", "[At work], I'm ...") or describing its subject ("My character [in the campaign]
    is ..."). Which scenes are a made-up world and which the speaker's own is learned (``core.scenes``), not
    listed. None for any other preposition ("I live [in Oslo]")."""
    head = preposition.head
    verb = head.head if head.dep_ in SUBJECTS else head
    # a clause set before the main one that the preposition opens: "[In the game] I'm playing, my character ..."
    # (a relative clause read as the main verb's), "[In the film] made last year, ..."
    while verb.dep_ == "advcl" and verb.i < verb.head.i and all(
            preposition.i < c.i for c in verb.children if c.dep_ in SUBJECTS):
        verb = verb.head
    if not _frames_claim(verb) or not (head.i != verb.i or preposition.i < verb.i):
        return None
    return next((c for c in preposition.children if c.dep_ == "pobj"), None)


def _frames_claim(verb: Any) -> bool:
    """Whether a modal or an adverb of ``verb`` bears on what the sentence claims: ``verb`` heads its main clause
    or a clause it states, not one describing a noun ("Triodos, the bright one [you've probably seen]"), saying why
    or what follows ("We moved [so the kids could go to Oakfield]") or added beside it ("I'm vegetarian, but [I
    might try fish]"), and its subject is not the listener."""
    if verb.dep_ == "ROOT" and any(c.dep_ == "mark" for c in verb.children):
        return False  # "..., [so Japan might be a stretch]": a clause saying why or what follows, parsed as the root
    return verb.dep_ in CLAIM_CLAUSES and not any(c.dep_ in SUBJECTS and c.lower_ in LISTENER for c in verb.children)


def _verb_word(verb: Any) -> str:
    """A verb's word as a frame reads it: "be" for any form of it, "have" for "has", "'ve", a present's "-s" off."""
    word = verb.lower_
    if word in BE or word in BE_PAST or word == "be":
        return "be"
    if word in PERFECT or word in ("has", "had"):
        return "have"
    return word[:-1] if verb.tag_ == "VBZ" and word.endswith("s") else word


def _frame(verb: Any, root: bool) -> str | None:
    """``verb``'s clause as a frame (see ``hedge_features``): its subject the speaker (``sp``), a dummy "it"
    (``it``), or none when it is its sentence's root (``frag``: "Not sure, but ...", "No idea if ..."); None for
    a clause of anyone else's, or one that names something (an object or a preposition that is no adjective, adverb
    or pronoun: "I remember [right]" and "I doubt [it]" name nothing)."""
    children = list(verb.children)
    subjects = [c for c in children if c.dep_ in SUBJECTS]
    if not subjects:
        who = "frag" if root else None
    elif all(s.lower_ in SPEAKER for s in subjects):
        who = "sp"
    else:
        who = "it" if all(s.lower_ in DUMMY for s in subjects) else None
    if who is None or (who != "frag" and not verb.tag_.startswith(("VB", "JJ"))):
        return None
    said = [c for c in children if c.dep_ in ("acomp", "attr") and c.tag_.startswith("JJ")]
    objects = [c for c in children if c.dep_ in FRAME_OBJECTS and c not in said]
    if any(not c.tag_.startswith(NAMING_NOTHING) for c in objects) or any(
            c.dep_ in FRAME_OBJECTS or c.dep_ == "xcomp" for s in said for c in s.children):
        # "I'm not sure [about fancy restaurants]": it says something. An adjective's "to" is a preposition
        # the parser may read as a verb's ("allergic [to shellfish]" as "to" + a verb): not a clause it wraps.
        return None
    parts = [c.lower_ for c in children if c.dep_ in ("mark", "det")]
    parts += ["not"] if any(c.dep_ == "neg" for c in children) else []
    parts.append(_verb_word(verb))
    for adjective in said:
        parts += [c.lower_ for c in adjective.children if c.dep_ == "advmod"] + [adjective.lower_]
    wraps = verb.dep_ == "parataxis" or any(  # "My code is 4471, [I think]": a side clause frames its head's
        c.dep_ in FRAME_CLAUSES or (c.dep_ == "advcl" and any(m.lower_ in ASKING for m in c.children))
        for c in children) or any(c.dep_ == "ccomp" for s in said for c in s.children)
    return f"{who}:{':'.join(parts)}{'+c' if wraps else '+0'}"
