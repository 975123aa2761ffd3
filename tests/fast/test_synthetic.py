"""Tests for localpager.lab.synthetic: determinism, shape, clean evidence, non-leaking probes."""

from __future__ import annotations

import random
import re

import pytest

from localpager.core.records import GENERAL_PROBE, Probe, Transcript
from localpager.lab.choices import Phrasing, QuestionStyle
from localpager.lab.synthetic import (
    ABSENT_PROBE,
    ABSENT_RELATED,
    FACT_KINDS,
    FACT_TYPES,
    FIRST_NAMES,
    GENERAL_PER_CONVERSATION,
    GENERAL_QUESTIONS,
    LAST_NAMES,
    LEAD_INS,
    TAIL_TURNS,
    VALUE_MAKERS,
    WORD_POOLS,
    fact_kinds,
    generate_conversation,
    generate_dataset,
    mentions,
)
from localpager.lab.synthetic_data import TEMPLATE_KEYS, load

# Words a question may share with the turn it is about: function words and a few everyday ones.
GENERIC = {
    "the", "and", "for", "you", "your", "what", "which", "who", "when", "where", "how", "should",
    "does", "did", "can", "could", "would", "will", "that", "this", "with", "about", "from", "into",
    "get", "got", "need", "must", "now", "one", "all", "any", "have", "has", "had", "are", "was",
    "were", "not", "out", "off", "our", "its", "it's", "i'm", "i've", "time", "day", "week", "new",
    "much", "many", "some", "more", "most", "very", "every", "each", "year", "after", "before",
}

SEEDS = range(40)


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z']+", text.lower()) if len(w) >= 3} - GENERIC


def _conversations() -> list[Transcript]:
    return [generate_conversation(seed, revisiting=seed % 2 == 1) for seed in SEEDS]


@pytest.fixture(scope="module")
def conversations() -> list[Transcript]:
    return _conversations()


def facts(conv: Transcript) -> list[Probe]:
    """The probes about planted facts (not the general or absent questions)."""
    return [p for p in conv.probes if p.type not in (GENERAL_PROBE, ABSENT_PROBE)]


def _probes(conversations: list[Transcript]) -> list[tuple[Transcript, Probe]]:
    return [(conv, probe) for conv in conversations for probe in facts(conv)]


# --- determinism ----------------------------------------------------------------------------------


@pytest.mark.parametrize("revisiting", [False, True])
def test_same_seed_gives_identical_conversation(revisiting: bool) -> None:
    first = generate_conversation(7, revisiting=revisiting)
    assert first == generate_conversation(7, revisiting=revisiting)


def test_different_seeds_give_different_conversations() -> None:
    first, second = generate_conversation(1), generate_conversation(2)
    assert [t.text for t in first.turns] != [t.text for t in second.turns]
    assert [p.question for p in first.probes] != [p.question for p in second.probes]


def test_dataset_is_deterministic_and_seeded() -> None:
    assert generate_dataset(3, seed=5) == generate_dataset(3, seed=5)
    assert generate_dataset(3, seed=5) != generate_dataset(3, seed=6)


# --- shape ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("asked", "expected"), [(120, 120), (160, 160), (201, 202), (240, 240)])
def test_turn_count_and_role_alternation(asked: int, expected: int) -> None:
    conv = generate_conversation(3, n_turns=asked)
    assert len(conv.turns) == expected
    for i, turn in enumerate(conv.turns):
        assert turn.index == i
        assert turn.role == ("user" if i % 2 == 0 else "assistant")
        assert turn.text.strip()


def test_too_short_is_refused() -> None:
    with pytest.raises(ValueError):
        generate_conversation(0, n_turns=20)


def test_six_to_eight_facts_one_probe_each(conversations: list[Transcript]) -> None:
    for conv in conversations:
        assert 6 <= len(facts(conv)) <= 8
        types = [p.type for p in facts(conv)]
        assert len(set(types)) == len(types)
        assert set(types) <= set(FACT_TYPES)
        assert 1 <= sum(len(p.extra["stated"]) > 1 for p in facts(conv)) <= 2


def test_every_fact_type_appears_in_a_dataset() -> None:
    dataset = generate_dataset(10, seed=0)
    assert {p.type for conv in dataset for p in facts(conv)} == set(FACT_TYPES)


def test_dataset_alternates_forward_and_revisiting() -> None:
    dataset = generate_dataset(4, seed=1)
    assert [c.meta["revisiting"] for c in dataset] == [False, True, False, True]
    assert len({c.id for c in dataset}) == 4
    assert all(c.meta["revisiting"] for c in generate_dataset(3, seed=1, revisiting=True))


def test_facts_are_spread_and_the_tail_is_filler(conversations: list[Transcript]) -> None:
    for conv in conversations:
        stated = sorted(t for p in facts(conv) for t in p.extra["stated"])
        assert stated[-1] < len(conv.turns) - TAIL_TURNS
        assert stated[-1] - stated[0] > len(conv.turns) // 2


def test_filler_is_varied_and_shares_generic_words(conversations: list[Transcript]) -> None:
    for conv in conversations:
        user_texts = [t.text for t in conv.turns if t.role == "user"]
        assert len(set(user_texts)) > 0.6 * len(user_texts)
    stated = {(c.id, t) for c in conversations for p in facts(c) for t in p.extra["stated"]}
    filler = " ".join(
        t.text.lower() for c in conversations for t in c.turns if (c.id, t.index) not in stated
    )
    for word in ("budget", "schedule", "deadline", "nuts", "locker", "dose", "party", "lease"):
        assert re.search(rf"\b{word}\b", filler), word


# --- evidence -------------------------------------------------------------------------------------


def test_evidence_is_a_user_turn_stating_the_answer(conversations: list[Transcript]) -> None:
    for conv, probe in _probes(conversations):
        assert len(probe.evidence) == 1
        turn = conv.turns[probe.evidence[0]]
        assert turn.role == "user"
        assert mentions(turn.text, probe.answers), (probe, turn.text)
        assert probe.evidence[0] == probe.extra["stated"][-1]


def test_answers_appear_only_in_their_own_statements(conversations: list[Transcript]) -> None:
    """The evidence is the last (and only) turn with the current value: filler never states it."""
    for conv, probe in _probes(conversations):
        holding = [t.index for t in conv.turns if mentions(t.text, probe.answers)]
        assert holding == probe.evidence, (probe, [conv.turns[i].text for i in holding])


def test_updated_facts_answer_with_the_newest_value(conversations: list[Transcript]) -> None:
    updated = [(c, p) for c, p in _probes(conversations) if len(p.extra["stated"]) > 1]
    assert updated
    for conv, probe in updated:
        first, *_, last = probe.extra["stated"]
        assert first < last == probe.evidence[0]
        old = probe.extra["old_answers"]
        assert not {a.lower() for a in old} & {a.lower() for a in probe.answers}
        assert mentions(conv.turns[first].text, old)
        assert not mentions(conv.turns[last].text, old)
        later = [t.index for t in conv.turns if mentions(t.text, probe.answers + old)]
        assert max(later) == last


# --- questions ------------------------------------------------------------------------------------


def test_questions_do_not_leak_the_answer(conversations: list[Transcript]) -> None:
    for conv, probe in _probes(conversations):
        assert not mentions(probe.question, probe.answers + probe.extra["old_answers"]), probe
        answer_words = set().union(*(_content_words(a) for a in probe.answers))
        assert not answer_words & _content_words(probe.question), probe


def test_questions_share_only_generic_words_with_the_evidence(
    conversations: list[Transcript],
) -> None:
    for conv, probe in _probes(conversations):
        shared = _content_words(probe.question) & _content_words(conv.turns[probe.evidence[0]].text)
        assert not shared, (probe.question, conv.turns[probe.evidence[0]].text, shared)


def test_no_template_pairing_shares_content_words() -> None:
    """Every question against every way its fact can be stated, not just the pairings seeds hit."""
    for kind in FACT_KINDS:
        for ask in kind.asks:
            for said in kind.says + kind.updates + LEAD_INS:
                shared = _content_words(ask) & _content_words(re.sub(r"\{\w+\}", "", said))
                assert not shared, (kind.name, ask, said, shared)


def test_answers_are_short(conversations: list[Transcript]) -> None:
    for _, probe in _probes(conversations):
        assert probe.answers and all(0 < len(a.split()) <= 3 for a in probe.answers)


# --- when probes are asked ------------------------------------------------------------------------


def test_forward_probes_are_asked_at_the_end() -> None:
    conv = generate_conversation(4, revisiting=False)
    assert all(p.at is None for p in facts(conv))
    assert [p.evidence[0] for p in facts(conv)] == sorted(p.evidence[0] for p in facts(conv))


def test_revisiting_probes_come_after_their_fact_and_are_sorted(
    conversations: list[Transcript],
) -> None:
    for conv in conversations:
        if not conv.meta["revisiting"]:
            continue
        timed = [p for p in facts(conv) if p.at is not None]
        assert len(timed) > len(facts(conv)) / 2
        for probe in timed:
            assert probe.evidence[0] < probe.at < len(conv.turns) - 1
            assert conv.turns[probe.at].role == "assistant"
        ats = [p.at for p in timed]
        assert ats == sorted(ats)
        assert facts(conv)[: len(timed)] == timed
        assert len(set(ats)) >= 3


# --- general questions and phrasing sets ----------------------------------------------------------


def test_general_questions_are_asked_at_the_end_and_leave_the_conversation_as_it_was() -> None:
    with_general = generate_conversation(7)
    without = generate_conversation(7, general=0)
    assert with_general.turns == without.turns and facts(with_general) == without.probes
    general = [p for p in with_general.probes if p.type == GENERAL_PROBE]
    assert len(general) == GENERAL_PER_CONVERSATION == len({p.question for p in general})
    assert all(p.at is None and not p.evidence and not p.answers for p in general)
    assert with_general.probes[-len(general):] == general
    assert {p.question for p in general} <= set(GENERAL_QUESTIONS)


@pytest.mark.parametrize("phrasing", [p for p in Phrasing if p != Phrasing.TUNING])
def test_every_phrasing_set_has_every_fact_kind_with_its_fields(phrasing: str) -> None:
    """Another phrasing set replaces the templates only: the same kinds, values and slots."""
    for tuned, other in zip(FACT_KINDS, fact_kinds(phrasing)):
        assert (other.name, other.type, other.value) == (tuned.name, tuned.type, tuned.value)
        assert other.says and other.asks and other.implicit and bool(other.updates) == bool(tuned.updates)
        assert not set(other.says) & set(tuned.says) and not set(other.asks) & set(tuned.asks)
        assert not set(other.implicit) & set(tuned.implicit)
    conv = generate_conversation(3, phrasing=phrasing)
    for probe in facts(conv):
        assert any(mentions(conv.turns[probe.evidence[0]].text, [a]) for a in probe.answers)



# --- every set's kinds and implicit questions -----------------------------------------------------

# What an implicit question never says: it asks about the present, not about the past or the memory.
MEMORY_PHRASES = re.compile(
    r"\bdid i (say|tell|mention)\b|\bremind me\b|\bdo you remember\b|\bwhat was\b|\bagain\b"
    r"|\blast time\b|\bearlier\b|\bi told you\b",
    re.IGNORECASE,
)
IMPLICIT_PER_KIND = {Phrasing.TUNING: 3}  # the others: 4
NEW_KINDS = {
    "diet": "diet", "code_language": "constraint", "avoided_airline": "constraint", "pet_name": "pet",
    "sibling_city": "family", "wedding_trip": "plan", "evening_class": "schedule", "door_code": "number",
}


def _accepted(kind_name: str) -> list[str]:
    """Every answer a kind's value can be accepted as, where they can be listed (words, not numbers: the
    makers of numbers, dates and times write digits, which no question holds)."""
    maker, *args = load("facts")["kinds"][kind_name]["value"]
    if maker in ("pool", "drug"):
        return [a for row in WORD_POOLS[args[0]] for a in row]
    if maker == "person":
        return [*FIRST_NAMES, *LAST_NAMES]
    return []


@pytest.mark.parametrize("phrasing", list(Phrasing))
def test_every_set_has_every_kind_with_the_four_lists(phrasing: Phrasing) -> None:
    kinds = load(f"phrasing_{phrasing.value}")["kinds"]
    assert list(kinds) == [k.name for k in FACT_KINDS]
    for kind in FACT_KINDS:
        templates = kinds[kind.name]
        assert set(templates) == set(TEMPLATE_KEYS), (kind.name, sorted(templates))
        assert templates["says"] and templates["asks"], kind.name
        assert bool(templates["updates"]) == bool(kind.updates), kind.name
        assert len(templates["implicit"]) >= IMPLICIT_PER_KIND.get(phrasing, 4), kind.name
        for template in templates["says"] + templates["updates"]:
            assert template.count("{v}") == 1, (kind.name, template)


@pytest.mark.parametrize("phrasing", list(Phrasing))
def test_every_set_implicit_questions_hold_no_answer_and_no_memory_phrase(phrasing: Phrasing) -> None:
    kinds = load(f"phrasing_{phrasing.value}")["kinds"]
    for kind in FACT_KINDS:
        accepted = _accepted(kind.name)
        for question in kinds[kind.name]["implicit"]:
            assert not re.search(r"\d", question), (kind.name, question)
            assert not mentions(question, accepted), (kind.name, question)
            assert not MEMORY_PHRASES.search(question), (kind.name, question)
            assert "{" not in question, (kind.name, question)


@pytest.mark.parametrize("phrasing", list(Phrasing))
def test_every_set_can_state_each_fact_clear_of_every_pool_word(phrasing: Phrasing) -> None:
    """A statement is redrawn while it names another fact's value, so some template of every kind must name
    none ("I go to yoga" names Go): else a conversation holding that value could never be drawn."""
    kinds = load(f"phrasing_{phrasing.value}")["kinds"]
    words = [a for rows in WORD_POOLS.values() for row in rows for a in row]
    for kind in FACT_KINDS:
        for key in ("says", "updates"):
            templates = [re.sub(r"\{\w+\}", "", t) for t in kinds[kind.name][key]]
            for word in words:
                assert not templates or any(not mentions(t, [word]) for t in templates), (kind.name, key, word)


def test_new_kinds_have_their_types_and_makers() -> None:
    by_name = {kind.name: kind for kind in FACT_KINDS}
    assert {name: by_name[name].type for name in NEW_KINDS} == NEW_KINDS
    assert set(FACT_TYPES) == {kind.type for kind in FACT_KINDS}
    assert by_name["door_code"].value == ("code",) and by_name["wedding_trip"].value == ("date",)
    assert ("Kraków", "Krakow") <= WORD_POOLS["cities"][1] and WORD_POOLS["code_languages"][1] == ("Scala",)


def test_tuning_implicit_questions_share_no_content_word_with_their_statements() -> None:
    """As the explicit questions: a present need found by meaning, not by the statement's words."""
    for kind in FACT_KINDS:
        assert len(kind.implicit) == IMPLICIT_PER_KIND[Phrasing.TUNING]
        accepted = set().union(*(_content_words(a) for a in _accepted(kind.name)))
        for question in kind.implicit:
            assert not accepted & _content_words(question), (kind.name, question)
            for said in kind.says + kind.updates + LEAD_INS:
                shared = _content_words(question) & _content_words(re.sub(r"\{\w+\}", "", said))
                assert not shared, (kind.name, question, said, shared)


def test_code_maker_writes_a_four_digit_number_accepted_as_written() -> None:
    rng = random.Random(3)
    values = [VALUE_MAKERS["code"](rng) for _ in range(500)]
    for value in values:
        assert re.fullmatch(r"[1-9]\d{3}", value.slots["v"]) and value.answers == [value.slots["v"]]
    assert len({v.slots["v"] for v in values}) > 400
    codes = [p for c in generate_dataset(20, seed=2) for p in facts(c) if p.extra["kind"] == "door_code"]
    assert codes and all(re.fullmatch(r"\d{4}", p.answers[0]) for p in codes)


# --- question styles and absent questions ---------------------------------------------------------


@pytest.mark.parametrize("revisiting", [False, True])
def test_implicit_probes_ask_what_the_explicit_ones_ask(revisiting: bool) -> None:
    for seed in range(12):
        explicit = generate_conversation(seed, revisiting=revisiting)
        both = generate_conversation(seed, revisiting=revisiting, questions="both")
        implicit = generate_conversation(seed, revisiting=revisiting, questions=QuestionStyle.IMPLICIT)
        assert all("style" not in p.extra for p in facts(explicit))
        pairs = list(zip(facts(both)[::2], facts(both)[1::2]))
        assert [e for e, _ in pairs] == facts(explicit)
        assert [i for _, i in pairs] == facts(implicit)
        kinds = {kind.name: kind for kind in FACT_KINDS}
        for e, i in pairs:
            assert i.extra == {**e.extra, "style": "implicit"}
            assert (i.answers, i.evidence, i.at, i.type) == (e.answers, e.evidence, e.at, e.type)
            assert i.evidence and i.question in kinds[i.extra["kind"]].implicit
        assert both.probes[len(facts(both)):] == explicit.probes[len(facts(explicit)):]


def test_implicit_questions_do_not_leak_the_answer() -> None:
    for seed in range(20):
        conv = generate_conversation(seed, questions="implicit")
        for probe in facts(conv):
            assert not mentions(probe.question, probe.answers + probe.extra["old_answers"]), probe
            shared = _content_words(probe.question) & _content_words(conv.turns[probe.evidence[0]].text)
            assert not shared, (probe.question, conv.turns[probe.evidence[0]].text, shared)


def test_absent_probes_never_ask_about_a_planted_type() -> None:
    asks = {kind.name: kind.asks for kind in FACT_KINDS}
    types = {kind.name: kind.type for kind in FACT_KINDS}
    for seed in range(30):
        conv = generate_conversation(seed, revisiting=seed % 2 == 1, absent=5)
        planted = {p.type for p in facts(conv)}
        planted_kinds = {p.extra["kind"] for p in facts(conv)}
        absent = [p for p in conv.probes if p.type == ABSENT_PROBE]
        assert len(absent) == 5 and conv.probes[-5:] == absent
        assert len({p.question for p in absent}) == 5 and len({p.extra["kind"] for p in absent}) == 5
        for probe in absent:
            kind = probe.extra["kind"]
            assert kind not in planted_kinds and types[kind] not in planted, (kind, planted)
            assert not {types[kind]} & {t for p in planted for t in ABSENT_RELATED.get(p, ())}
            assert probe.question in asks[kind]
            assert probe.answers == [] and probe.evidence == [] and probe.at is None


def test_question_style_and_absent_do_not_change_the_turns() -> None:
    for seed in range(8):
        plain = generate_conversation(seed, revisiting=seed % 2 == 1)
        for questions, absent in (("implicit", 0), ("both", 3), ("explicit", 6)):
            other = generate_conversation(seed, revisiting=seed % 2 == 1, questions=questions, absent=absent)
            assert other.turns == plain.turns, (questions, absent)
            general = [p for p in other.probes if p.type == GENERAL_PROBE]
            assert general == [p for p in plain.probes if p.type == GENERAL_PROBE]
            assert sum(p.type == ABSENT_PROBE for p in other.probes) == absent
    few = generate_conversation(1, absent=2).probes[-2:]
    assert few == generate_conversation(1, absent=4, questions="both").probes[-4:-2]
    assert generate_dataset(2, seed=3, questions="both", absent=2) == generate_dataset(2, seed=3, questions="both",
                                                                                      absent=2)


def test_unknown_question_style_is_refused() -> None:
    with pytest.raises(ValueError, match="question style"):
        generate_conversation(0, questions="sometimes")
