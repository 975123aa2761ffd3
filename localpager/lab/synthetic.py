"""Seeded synthetic long conversations with planted facts, later corrections and recall probes.

Real long chats with known answers are scarce, so we plant 6-8 personal facts in 120-200+ turns
of small talk and ask about them later. The filler reuses the facts' generic words ("budget",
"schedule", "nuts") and the questions avoid the facts' own words, so word overlap alone cannot
find the page that holds an answer. A fact is asked about explicitly ("Which snack should I keep
away from at the party?"), implicitly (a present need that depends on it: "I'm packing snacks for a
long flight tomorrow. Anything I should stay away from?") or both; "absent" probes ask about facts
never said, and general questions need none. Only the standard library is used and every choice
comes from ``random.Random(seed)``, so a seed always gives the same conversation.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from localpager.core.choices import choose
from localpager.core.records import GENERAL_PROBE, Probe, Transcript, Turn

from .choices import Phrasing, QuestionStyle
from .synthetic_data import KIND_SETS, TRAINED_KINDS, kind_set, load, phrasing_set

FACT_TYPES = (
    "allergy", "budget", "deadline", "contact", "medical", "preference", "schedule", "number",
    "diet", "constraint", "pet", "family", "plan",
)

ABSENT_PROBE = "absent"  # a probe's type: a question about a fact the conversation never states
# Fact types an absent question must also avoid when one of them is planted: a question about the other
# would have an answer after all ("what must never end up in a dish cooked for me?" of a vegetarian).
ABSENT_RELATED = {"allergy": ("diet",), "diet": ("allergy",)}

FACTS_PER_CONVERSATION = (6, 8)
UPDATES_PER_CONVERSATION = (1, 2)
MIN_TURNS = 60
TAIL_TURNS = 20  # filler only, so every fact sits in an evicted page when probed at the end
REVISIT_GAP = 20  # turns between a fact and a mid-conversation probe of it
DRAW_ATTEMPTS = 10_000  # values and templates tried for a statement before giving up


@dataclass(frozen=True)
class FactKind:
    """One way a fact type shows up: how the user states it, corrects it and is asked about it,
    explicitly (``asks``) or by a present need that depends on it (``implicit``).

    ``value`` names a value maker and its arguments; templates fill ``{v}`` (the value) and
    whatever extra fields that maker provides (``{day}``, ``{dose}``, ``{phone}``, ``{email}``).
    """

    name: str
    type: str
    value: tuple[str | int, ...]
    says: tuple[str, ...]
    asks: tuple[str, ...]
    updates: tuple[str, ...] = ()
    implicit: tuple[str, ...] = ()


@dataclass(frozen=True)
class FillerTopic:
    """Small-talk exchanges (user, assistant) whose ``{slot}`` fields are drawn from ``slots``."""

    exchanges: tuple[tuple[str, str], ...]
    slots: dict[str, tuple[str, ...]] = field(default_factory=dict)


# --- the data: data/*.json, whose keys ``synthetic_data`` explains --------------------------------

_FACTS, _FILLER = load("facts"), load("filler")

# Word pools: the first entry is written in the conversation, all entries are accepted answers.
WORD_POOLS: dict[str, tuple[tuple[str, ...], ...]] = _FACTS["word_pools"]
MONTHS: tuple[str, ...] = _FACTS["months"]
WEEKDAYS: tuple[str, ...] = _FACTS["weekdays"]
FIRST_NAMES: tuple[str, ...] = _FACTS["first_names"]
LAST_NAMES: tuple[str, ...] = _FACTS["last_names"]
MAIL_DOMAINS: tuple[str, ...] = _FACTS["mail_domains"]
AIRLINES: tuple[str, ...] = _FACTS["airlines"]
DOSES: tuple[str, ...] = _FACTS["doses"]
PARKING_LEVELS: str = _FACTS["parking_levels"]

# The tuning phrasing's templates. Questions must need the fact without repeating its words: "snack" for a
# peanut allergy, "lease" for a landlord, "hypertension" for blood pressure.
_TUNING_KINDS, GENERAL_QUESTIONS = phrasing_set(Phrasing.TUNING.value)
FACT_KINDS: tuple[FactKind, ...] = tuple(
    FactKind(name, spec["type"], spec["value"], **_TUNING_KINDS[name]) for name, spec in _FACTS["kinds"].items()
)

KINDS_BY_TYPE: dict[str, tuple[FactKind, ...]] = {
    fact_type: tuple(kind for kind in FACT_KINDS if kind.type == fact_type)
    for fact_type in FACT_TYPES
}

LEAD_INS: tuple[str, ...] = _FILLER["lead_ins"]  # the empty ones: most statements come without a lead-in
ACKS: tuple[str, ...] = _FILLER["acks"]
UPDATE_ACKS: tuple[str, ...] = _FILLER["update_acks"]

# Filler, deliberately full of the facts' generic words (budget, schedule, deadline, nuts, locker, dose,
# party, snack, lease, meeting) in unrelated senses.
FILLER_TOPICS: dict[str, FillerTopic] = {
    name: FillerTopic(exchanges=tuple((e["user"], e["assistant"]) for e in topic["exchanges"]),
                      slots=topic.get("slots", {}))
    for name, topic in _FILLER["topics"].items()
}

# General questions (each phrasing's own, ``GENERAL_QUESTIONS`` the tuning one's) need nothing said before:
# asked at the end of a conversation as probes of type ``general``, they should page nothing in.
GENERAL_PER_CONVERSATION = 6


def _phrasing_set(phrasing: str) -> tuple[dict[str, dict[str, tuple[str, ...]]], tuple[str, ...]]:
    return phrasing_set(choose(Phrasing, phrasing, "phrasing").value)


def fact_kinds(phrasing: str = "tuning") -> tuple[FactKind, ...]:
    """The fact kinds with the templates of ``phrasing`` (a ``Phrasing``)."""
    if phrasing == "tuning":
        return FACT_KINDS
    kinds, _ = _phrasing_set(phrasing)
    return tuple(replace(kind, says=kinds[kind.name]["says"], asks=kinds[kind.name]["asks"],
                         updates=kinds[kind.name]["updates"] if kind.updates else (),
                         implicit=kinds[kind.name]["implicit"])
                 for kind in FACT_KINDS)


def general_questions(phrasing: str = "tuning") -> tuple[str, ...]:
    """The general questions of ``phrasing`` (a ``Phrasing``)."""
    return GENERAL_QUESTIONS if phrasing == "tuning" else _phrasing_set(phrasing)[1]


def set_kinds(name: str) -> tuple[FactKind, ...]:
    """The fact kinds of kind set ``name`` (``synthetic_data.kind_set``: not ``trained``), each its own fact type,
    in their own words; their word pools are named ``<set>/<pool>``."""
    kinds, _, _ = kind_set(name)
    return tuple(
        FactKind(kind, kind, (spec["value"][0], f"{name}/{spec['value'][1]}", *spec["value"][2:])
                 if spec["value"][0] in ("pool", "drug") else tuple(spec["value"]),
                 says=spec["says"], asks=spec["asks"], updates=spec["updates"], implicit=spec["implicit"])
        for kind, spec in kinds.items()
    )


@dataclass(frozen=True)
class _KindSet:
    """What a conversation draws its facts from: the kinds, their fact types, the general questions, and the name
    that seeds the streams of implicit, general and absent questions."""

    kinds: tuple[FactKind, ...]
    types: tuple[str, ...]
    general: tuple[str, ...]
    stream: str


def _kind_set(kinds: str, phrasing: str) -> _KindSet:
    """``trained``: facts.json's kinds in ``phrasing``; another kind set: its own kinds and words (it has no
    phrasings: ``phrasing`` must be left at ``tuning``)."""
    if kinds == TRAINED_KINDS:
        return _KindSet(fact_kinds(phrasing), FACT_TYPES, general_questions(phrasing), phrasing)
    if kinds not in KIND_SETS:
        raise ValueError(f"kinds must be one of {list(KIND_SETS)}, got {kinds!r}")
    if phrasing != Phrasing.TUNING.value:
        raise ValueError(f"kind set {kinds!r} has its own words: the phrasing is tuning (the default), "
                         f"got '{phrasing}'")
    own = set_kinds(kinds)
    return _KindSet(own, tuple(k.type for k in own), kind_set(kinds)[2], f"kinds-{kinds}")


# --- public API -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wording:
    """How a generated conversation is worded and what it asks besides one probe per fact (``generate_conversation``
    says what each means): ``phrasing`` (a ``Phrasing``), ``general`` and ``absent`` questions at the end,
    ``questions`` (a ``QuestionStyle``), and ``kinds``, the kind set facts are drawn from (``KIND_SETS``:
    ``trained``, facts.json's kinds; ``heldout``, kinds_heldout.json's, never tuned on; or ``dev``, kinds_dev.json's,
    other new kinds that may be tuned on)."""

    phrasing: str = "tuning"
    general: int = GENERAL_PER_CONVERSATION
    questions: str = "explicit"
    absent: int = 0
    kinds: str = TRAINED_KINDS


def generate_conversation(seed: int, n_turns: int = 160, revisiting: bool = False, conv_id: str | None = None,
                          **wording) -> Transcript:
    """A conversation of ``n_turns`` (rounded up to even) with planted facts and a probe or two each; ``wording``:
    the fields of ``Wording``, by name.

    ``questions`` (a ``QuestionStyle``) says how each fact is asked about: ``explicit``, one question
    about it (its kind's ``asks``); ``implicit``, one present need that depends on it (``implicit``,
    the probe's ``extra["style"]`` is ``"implicit"``); ``both``, the two, the implicit one right after
    the explicit one. Both ask the same thing: the same answers, evidence and turn. Forward conversations
    ask every probe at the end; revisiting ones ask most probes mid-way, some turns after the fact, so
    paged-out facts get recalled during the conversation. ``general`` general questions
    (``GENERAL_QUESTIONS``) and ``absent`` questions about kinds whose fact type the conversation never
    states (type ``absent``, ``extra["kind"]`` the kind asked about) are asked at the end, in that
    order, with no answer and no evidence. Implicit, general and absent questions are drawn from random
    streams of their own, so the turns and the other probes do not depend on them.
    """
    words = Wording(**wording)
    phrasing, general, absent = words.phrasing, words.general, words.absent
    drawn = _kind_set(words.kinds, phrasing)
    style = choose(QuestionStyle, words.questions, "question style")
    n_turns += n_turns % 2
    if n_turns < MIN_TURNS:
        raise ValueError(f"n_turns must be at least {MIN_TURNS}, got {n_turns}")
    if absent < 0:
        raise ValueError(f"absent must be 0 or more, got {absent}")
    kinds, stream = drawn.kinds, drawn.stream
    rng = random.Random(seed)
    facts = _draw_facts(rng, kinds, drawn.types)
    _place(rng, facts, n_turns)
    meta = {"seed": seed, "revisiting": revisiting, "phrasing": phrasing}
    if words.kinds != TRAINED_KINDS:
        meta["kinds"] = words.kinds
    if style != QuestionStyle.EXPLICIT:
        meta["questions"] = style.value
    if absent:
        meta["absent"] = absent
    return Transcript(
        id=conv_id or f"synthetic-{seed}{'-revisiting' if revisiting else ''}",
        turns=_turns(rng, facts, n_turns),
        probes=(_probes(rng, facts, n_turns, revisiting, style, random.Random(f"implicit:{stream}:{seed}"))
                + _general_probes(seed, stream, general, drawn.general)
                + _absent_probes(seed, stream, facts, kinds, absent)),
        source="synthetic",
        meta=meta,
    )


def generate_dataset(n: int = 10, seed: int = 0, n_turns: int = 160, revisiting: bool | None = None,
                     **wording) -> list[Transcript]:
    """``n`` conversations from one seed; ``revisiting=None`` alternates forward and revisiting (``wording``:
    the fields of ``Wording``, as ``generate_conversation`` takes them)."""
    rng = random.Random(seed)
    return [
        generate_conversation(
            rng.randrange(2**32),
            n_turns,
            revisiting=i % 2 == 1 if revisiting is None else revisiting,
            conv_id=f"synthetic-{seed}-{i:03d}",
            **wording,
        )
        for i in range(n)
    ]


def mentions(text: str, answers: Iterable[str]) -> bool:
    """Whether ``text`` states any of ``answers`` as whole words, ignoring case and spacing.

    Whole words, so that a planted "12 units" is not found inside "112 units".
    """
    haystack = _normalise(text)
    return any(re.search(rf"(?<!\w){re.escape(_normalise(a))}(?!\w)", haystack) for a in answers)


# --- facts ----------------------------------------------------------------------------------------


@dataclass
class _Value:
    slots: dict[str, str]  # template fields; "v" is the value as written
    answers: list[str]


@dataclass
class _Statement:
    text: str
    value: _Value
    turn: int = -1  # the user turn that says it, once placed


@dataclass
class _Fact:
    kind: FactKind
    statements: list[_Statement]  # the original first, then its corrections


def _draw_facts(
    rng: random.Random, kinds: tuple[FactKind, ...] = FACT_KINDS, types: tuple[str, ...] = FACT_TYPES
) -> list[_Fact]:
    """One fact for each of 6-8 distinct types, so no two probes ask for the same kind of thing."""
    facts: list[_Fact] = []
    for fact_type in rng.sample(types, rng.randint(*FACTS_PER_CONVERSATION)):
        kind = rng.choice([k for k in kinds if k.type == fact_type])
        facts.append(_Fact(kind, [_draw(rng, kind, kind.says, facts)]))
    return facts


def _draw(
    rng: random.Random, kind: FactKind, templates: tuple[str, ...], facts: list[_Fact]
) -> _Statement:
    """A statement of a new value that neither names nor is named by any other statement.

    That keeps each answer in exactly the turns that state it, so evidence is unambiguous and a
    correction never repeats the old value.
    """
    others = [s for fact in facts for s in fact.statements]
    maker = VALUE_MAKERS[str(kind.value[0])]
    for _ in range(DRAW_ATTEMPTS):
        value = maker(rng, *kind.value[1:])
        said = _sentence(rng.choice(templates).format(**value.slots))
        text = f"{rng.choice(LEAD_INS)} {said}".strip()
        if not any(mentions(o.text, value.answers) or mentions(text, o.value.answers)
                   for o in others):
            return _Statement(text, value)
    raise RuntimeError(f"{kind.name}: no template and value clear of the other facts' words "
                       f"after {DRAW_ATTEMPTS} draws (does every template name another fact's value?)")


def _place(rng: random.Random, facts: list[_Fact], n_turns: int) -> None:
    """Spread facts and 1-2 corrections over the conversation, leaving the tail to filler.

    Corrections take slots in the second half, each after an earlier fact with another event
    between them (the facts are placed in their drawn order unless a correction would then have no
    fact to correct: see ``_correctable_order``).
    """
    n_updates = rng.randint(*UPDATES_PER_CONVERSATION)
    pairs = _spread(rng, 1, (n_turns - TAIL_TURNS) // 2, len(facts) + n_updates)
    update_slots = set(rng.sample(range(len(pairs) // 2, len(pairs)), n_updates))
    order = _correctable_order(facts, [s for s in range(len(pairs)) if s not in update_slots], update_slots)
    placed: list[_Fact] = []
    for slot, pair in enumerate(pairs):
        if slot in update_slots:
            before = 2 * pairs[slot - 1]
            earlier = [
                f for f in placed
                if f.kind.updates and len(f.statements) == 1 and f.statements[0].turn < before
            ]
            fact = rng.choice(earlier)
            fact.statements.append(_draw(rng, fact.kind, fact.kind.updates, facts))
        else:
            fact = order[len(placed)]
            placed.append(fact)
        fact.statements[-1].turn = 2 * pair


def _correctable_order(facts: list[_Fact], fact_slots: list[int], update_slots: set[int]) -> list[_Fact]:
    """``facts`` in the order they are placed in ``fact_slots``: their own, unless some correction (a slot of
    ``update_slots``) would find fewer correctable facts at least two slots before it than corrections so
    far; then the earliest later correctable fact swaps places with the latest earlier one that is not.

    Some kinds are never corrected (an allergy, a diet, a pet's name), so the drawn order alone may leave a
    correction with nothing to correct."""
    order = list(facts)
    for due, update in enumerate(sorted(update_slots), start=1):
        early = [i for i, slot in enumerate(fact_slots) if slot <= update - 2]
        while sum(bool(order[i].kind.updates) for i in early) < due:
            late = next(i for i in range(len(early), len(order)) if order[i].kind.updates)
            fixed = max(i for i in early if not order[i].kind.updates)
            order[fixed], order[late] = order[late], order[fixed]
    return order


def _spread(rng: random.Random, first: int, stop: int, k: int) -> list[int]:
    """``k`` increasing positions in ``[first, stop)``, one per equal stretch.

    So the facts land on many different pages rather than in one burst.
    """
    span = stop - first
    return [first + rng.randrange(i * span // k, (i + 1) * span // k) for i in range(k)]


# --- turns ----------------------------------------------------------------------------------------


def _turns(rng: random.Random, facts: list[_Fact], n_turns: int) -> list[Turn]:
    """User/assistant pairs: fact statements with a brief acknowledgement, filler elsewhere."""
    events = {s.turn: (s.text, i > 0) for fact in facts for i, s in enumerate(fact.statements)}
    banned = [a for fact in facts for s in fact.statements for a in s.value.answers]
    filler = _filler(rng, banned)
    turns: list[Turn] = []
    for index in range(0, n_turns, 2):
        if index in events:
            user, is_update = events[index]
            # an acknowledgement never states a planted value ("I'll go with the new one" when Go is one)
            assistant = rng.choice([a for a in (UPDATE_ACKS if is_update else ACKS) if not mentions(a, banned)])
        else:
            user, assistant = next(filler)
        turns += [Turn("user", user, index), Turn("assistant", assistant, index + 1)]
    return turns


def _filler(rng: random.Random, banned: list[str]) -> Iterator[tuple[str, str]]:
    """Endless runs of 3-6 exchanges on one topic.

    Exchanges that would state a planted value are skipped, so each answer has one home.
    """
    topic = ""
    while True:
        topic = rng.choice([name for name in FILLER_TOPICS if name != topic])
        exchanges, slots = FILLER_TOPICS[topic].exchanges, FILLER_TOPICS[topic].slots
        for user, assistant in rng.sample(exchanges, rng.randint(3, min(6, len(exchanges)))):
            fill = {name: rng.choice(pool) for name, pool in slots.items()}
            pair = (_sentence(user.format(**fill)), _sentence(assistant.format(**fill)))
            if not mentions(" ".join(pair), banned):
                yield pair


# --- probes ---------------------------------------------------------------------------------------


def _probes(
    rng: random.Random, facts: list[_Fact], n_turns: int, revisiting: bool,
    style: QuestionStyle, implicit_rng: random.Random,
) -> list[Probe]:
    """One probe per fact (two for ``both``), sorted by when it is asked (end-of-conversation probes last).

    The explicit probes are always drawn, from ``rng``, so every style asks at the same turns; implicit
    questions come from ``implicit_rng``, in the order of the facts.
    """
    explicit = [_probe(rng, fact) for fact in facts]
    if revisiting:
        for probe in explicit:
            probe.at = _revisit_turn(rng, probe.evidence[0], n_turns)
    probes: list[Probe] = []
    for fact, probe in zip(facts, explicit):
        if style != QuestionStyle.IMPLICIT:
            probes.append(probe)
        if style != QuestionStyle.EXPLICIT:
            probes.append(_implicit(implicit_rng, fact, probe))
    # a stable sort: an implicit probe stays right after its explicit twin
    return sorted(probes, key=lambda p: (p.at is None, p.at or 0, p.evidence[0]))


def _probe(rng: random.Random, fact: _Fact) -> Probe:
    """The question for a fact; its answer and evidence are the newest statement's."""
    current = fact.statements[-1]
    return Probe(
        question=rng.choice(fact.kind.asks),
        answers=list(current.value.answers),
        evidence=[current.turn],
        type=fact.kind.type,
        extra={
            "kind": fact.kind.name,
            "stated": [s.turn for s in fact.statements],
            "old_answers": [a for s in fact.statements[:-1] for a in s.value.answers],
        },
    )


def _implicit(rng: random.Random, fact: _Fact, explicit: Probe) -> Probe:
    """The fact's implicit question, asking what ``explicit`` asks: the same answers, evidence and turn."""
    return Probe(
        question=rng.choice(fact.kind.implicit),
        answers=list(explicit.answers),
        evidence=list(explicit.evidence),
        type=explicit.type,
        at=explicit.at,
        extra={**{k: list(v) if isinstance(v, list) else v for k, v in explicit.extra.items()},
               "style": QuestionStyle.IMPLICIT.value},
    )


def _general_probes(seed: int, phrasing: str, n: int, pool: tuple[str, ...]) -> list[Probe]:
    """``n`` distinct general questions of ``pool``, asked at the end; drawn from their own stream (see above)."""
    rng = random.Random(f"general:{phrasing}:{seed}")
    return [Probe(question=q, answers=[], evidence=[], type=GENERAL_PROBE)
            for q in rng.sample(pool, min(n, len(pool)))]


def _absent_probes(
    seed: int, phrasing: str, facts: list[_Fact], kinds: tuple[FactKind, ...], n: int
) -> list[Probe]:
    """``n`` questions about facts never stated, asked at the end: "asks" of the kinds whose fact type is not
    planted (nor related to a planted one, ``ABSENT_RELATED``), one kind each as long as kinds last, then
    more of their questions; as many as there are if fewer. Drawn from their own stream (see above)."""
    if n <= 0:
        return []
    planted = {fact.kind.type for fact in facts}
    blocked = planted | {t for p in planted for t in ABSENT_RELATED.get(p, ())}
    rng = random.Random(f"absent:{phrasing}:{seed}")
    candidates = [k for k in kinds if k.type not in blocked]
    order = rng.sample(candidates, len(candidates))
    asks = {k.name: rng.sample(k.asks, len(k.asks)) for k in order}
    rounds = max((len(k.asks) for k in order), default=0)
    drawn = [(k, asks[k.name][i]) for i in range(rounds) for k in order if i < len(k.asks)]
    return [Probe(question=q, answers=[], evidence=[], type=ABSENT_PROBE, extra={"kind": k.name})
            for k, q in drawn[:n]]


def _revisit_turn(rng: random.Random, evidence: int, n_turns: int) -> int | None:
    """An assistant turn at least ``REVISIT_GAP`` after the fact; None (at the end) if none fits."""
    first, last = (evidence + REVISIT_GAP) | 1, n_turns - 3
    return rng.randrange(first, last + 1, 2) if first <= last else None


# --- values ---------------------------------------------------------------------------------------
# Each maker returns the template slots ("v": the value as written) and every accepted answer.


def _pool_value(rng: random.Random, pool: str) -> _Value:
    written, *others = rng.choice(WORD_POOLS[pool] if pool in WORD_POOLS else _set_pool(pool))
    return _Value({"v": written}, [written, *others])


def _money(rng: random.Random, low: int, high: int, step: int) -> _Value:
    amount = rng.randrange(low, high + 1, step)
    forms = _unique([f"${amount:,}", f"{amount:,}", str(amount), f"${amount}"])
    return _Value({"v": forms[0]}, forms)


def _date(rng: random.Random) -> _Value:
    month, day = rng.choice(MONTHS), rng.randint(1, 28)
    nth = _ordinal(day)
    forms = _unique([
        f"{month} {day}", f"{month} {nth}", f"{day} {month}", f"{nth} of {month}",
        f"{month[:3]} {day}",
    ])
    return _Value({"v": rng.choice(forms[:3])}, forms)


def _clock(rng: random.Random) -> _Value:
    hour, minute = rng.randint(7, 19), rng.choice((0, 0, 15, 30, 45))
    h12, half = hour % 12 or 12, "am" if hour < 12 else "pm"
    if minute:
        forms = [f"{h12}:{minute} {half}", f"{h12}:{minute}{half}", f"{hour:02d}:{minute}"]
    else:
        forms = [
            f"{h12}{half}", f"{h12} {half}", f"{h12}:00 {half}", f"{h12}:00{half}", f"{hour:02d}:00"
        ]
    return _Value({"v": rng.choice(forms[:2]), "day": rng.choice(WEEKDAYS)}, forms)


def _person(rng: random.Random) -> _Value:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    slots = {
        "v": f"{first} {last}",
        "phone": f"555-{rng.randint(100, 999):04d}",
        "email": f"{first.lower()}.{last.lower()}@{rng.choice(MAIL_DOMAINS)}",
    }
    return _Value(slots, [f"{first} {last}", first, last])


def _drug(rng: random.Random, pool: str) -> _Value:
    value = _pool_value(rng, pool)
    value.slots["dose"] = rng.choice(DOSES)
    return value


def _units(rng: random.Random) -> _Value:
    units = rng.randint(6, 30)
    return _Value({"v": f"{units} units"}, [f"{units} units", f"{units} unit"])


def _room(rng: random.Random) -> _Value:
    room = rng.randint(2, 9) * 100 + rng.randint(1, 39)
    return _Value({"v": str(room)}, [str(room), f"room {room}"])


def _locker(rng: random.Random) -> _Value:
    locker = rng.randint(100, 399)
    return _Value({"v": str(locker)}, [str(locker), f"locker {locker}"])


def _flight(rng: random.Random) -> _Value:
    airline, number = rng.choice(AIRLINES), rng.randint(100, 999)
    forms = [f"{airline} {number}", f"{airline}{number}", str(number)]
    return _Value({"v": forms[0]}, forms)


def _spot(rng: random.Random) -> _Value:
    level, number = rng.choice(PARKING_LEVELS), rng.randint(1, 60)
    forms = [f"{level}{number}", f"{level}-{number}", f"{level} {number}"]
    return _Value({"v": forms[0]}, forms)


def _code(rng: random.Random) -> _Value:
    """A four-digit door code, accepted only as written."""
    code = str(rng.randint(1000, 9999))
    return _Value({"v": code}, [code])


def _set_pool(pool: str) -> tuple[tuple[str, ...], ...]:
    """A kind set's word pool, named ``<set>/<pool>`` (``set_kinds``)."""
    name, _, own = pool.partition("/")
    return kind_set(name)[1][own]


VALUE_MAKERS = {
    "pool": _pool_value, "money": _money, "date": _date, "clock": _clock, "person": _person,
    "drug": _drug, "units": _units, "room": _room, "locker": _locker, "flight": _flight,
    "spot": _spot, "code": _code,
}


# --- text -----------------------------------------------------------------------------------------


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _unique(forms: list[str]) -> list[str]:
    return list(dict.fromkeys(forms))
