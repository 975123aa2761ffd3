"""Tests for localpager.lab.synthetic: determinism, shape, clean evidence, non-leaking probes."""

from __future__ import annotations

import re

import pytest

from localpager.core.records import GENERAL_PROBE, Probe, Transcript
from localpager.lab.choices import Phrasing
from localpager.lab.synthetic import (
    FACT_KINDS,
    FACT_TYPES,
    GENERAL_PER_CONVERSATION,
    GENERAL_QUESTIONS,
    LEAD_INS,
    TAIL_TURNS,
    fact_kinds,
    generate_conversation,
    generate_dataset,
    mentions,
)

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
    """The probes about planted facts (not the general questions)."""
    return [p for p in conv.probes if p.type != GENERAL_PROBE]


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
        assert other.says and other.asks and bool(other.updates) == bool(tuned.updates)
        assert not set(other.says) & set(tuned.says) and not set(other.asks) & set(tuned.asks)
    conv = generate_conversation(3, phrasing=phrasing)
    for probe in facts(conv):
        assert any(mentions(conv.turns[probe.evidence[0]].text, [a]) for a in probe.answers)

